"""Registry of figures and tables: ``netsurvey plot NAME`` and ``netsurvey plot --list``.

A figure is a function ``fn(ctx: FigureContext) -> None`` registered with
``@figure(name, sources=[...], thesis="Fig 3.2")``; it reads only the database (through
``ctx.db`` and ``analysis.engine``) and writes NAME.png + NAME.svg (via ``ctx.save``) and
always NAME.csv with the numbers behind it (``ctx.write_csv``). Scanner-specific figures
live in ``analysis/<topic>.py`` modules listed in ``FIGURE_MODULES``; they are imported on
demand so a missing optional module never breaks the others.
"""
from __future__ import annotations

import csv
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

from netsurvey.db import Database
from netsurvey.errors import UsageError

#: Modules that register figures (imported lazily; absent modules are skipped).
FIGURE_MODULES = ["analysis.tfo", "analysis.tls", "analysis.quic", "analysis.dns", "analysis.atlas",
                  "analysis.browser", "analysis.simulations"]


@dataclass(frozen=True)
class FigureSpec:
    name: str
    fn: Callable
    sources: tuple[str, ...]
    thesis: str
    description: str


_REGISTRY: dict[str, FigureSpec] = {}


def figure(name: str, *, sources: Sequence[str], thesis: str = "", description: str = ""):
    """Register a figure/table function under ``name``."""
    def deco(fn):
        _REGISTRY[name] = FigureSpec(name, fn, tuple(sources), thesis, description or (fn.__doc__ or "").strip().split("\n")[0])
        return fn
    return deco


@dataclass
class FigureContext:
    """What a figure function gets: the database, the selected runs (empty = latest) and
    the output directory; ``written`` collects the files it produced."""

    db: Database
    runs: tuple[int, ...]
    out_dir: Path
    name: str
    written: list[Path] = field(default_factory=list)
    notes: dict[str, Any] = field(default_factory=dict)

    def save(self, fig, suffix: str = "") -> None:
        from .style import save

        self.written += save(fig, self.out_dir, self.name + suffix)

    def write_csv(self, header: Sequence[str], rows, suffix: str = "") -> Path:
        self.out_dir.mkdir(parents=True, exist_ok=True)
        p = self.out_dir / f"{self.name}{suffix}.csv"
        with p.open("w", newline="") as fh:
            w = csv.writer(fh)
            w.writerow(header)
            w.writerows(rows)
        self.written.append(p)
        return p

    def cdf_figure(self, curves, xlabel: str, ylabel: str, csv_header: Sequence[str], *,
                   label: str = "{group} (n={n})", logx: bool = False, save: bool = True):
        """The common CDF figure: one step CDF per group of ``curves`` (``engine.cdf``
        results), labelled with ``label`` (fields ``group``, ``n``), and the CSV behind it,
        one row (group, value, cumulative share) per grid point under ``csv_header``.
        Saves the figure unless ``save`` is False; returns (fig, ax) for additions."""
        from .style import new_figure, step_cdf

        fig, ax = new_figure(xlabel, ylabel, logx=logx)
        rows = []
        for c in curves:
            step_cdf(ax, list(c.values), list(c.probs), label=label.format(group=c.group, n=c.n))
            rows += [(c.group, v, p) for v, p in zip(c.values, c.probs)]
        if curves:
            ax.legend()
        self.write_csv(csv_header, rows)
        if save:
            self.save(fig)
        return fig, ax

    def run_ids(self, kind: str) -> tuple[int, ...]:
        """The selected runs, or the latest finished run of ``kind``. Raises UsageError if none.
        The ids are recorded in ``notes["runs"]`` for the report."""
        if self.runs:
            self.record_runs(self.runs)
            return self.runs
        from .engine import latest_run

        rid = latest_run(self.db, kind)
        if rid is None:
            raise UsageError(f"{self.name}: no finished '{kind}' run in the database")
        self.record_runs((rid,))
        return (rid,)

    # -- what the report shows beside each figure (all optional) ------------------------
    def record_runs(self, runs) -> None:
        """scan_run ids the figure was computed from."""
        self.notes["runs"] = sorted(set(self.notes.get("runs", ())) | {int(r) for r in runs})

    def sample(self, n: int, what: str = "observations") -> None:
        """Sample size behind the figure, e.g. ``ctx.sample(9834, "hosts")``."""
        self.notes.setdefault("samples", []).append({"n": int(n), "what": what})

    def compare(self, quantity: str, thesis, ours, unit: str = "") -> None:
        """A published value of the thesis/paper beside ours (``thesis`` None = not published)."""
        self.notes.setdefault("compare", []).append(
            {"quantity": quantity, "thesis": thesis, "ours": ours, "unit": unit})


def load_all() -> dict[str, FigureSpec]:
    from netsurvey.plugins import import_present

    import_present(FIGURE_MODULES)
    return dict(sorted(_REGISTRY.items()))


def render(db: Database, name: str, out_dir: Path, runs: Sequence[int] = ()) -> FigureContext:
    specs = load_all()
    if name not in specs:
        raise UsageError(f"unknown figure {name!r}; see 'netsurvey plot --list'")
    from netsurvey.inputs import known_runs, output_dir

    ctx = FigureContext(db=db, runs=known_runs(db, runs), out_dir=output_dir(out_dir), name=name)
    specs[name].fn(ctx)
    return ctx
