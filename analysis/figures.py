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
                  "analysis.browser", "analysis.simulations", "analysis.timing", "analysis.revisit", "analysis.blast",
                  "analysis.vantage"]


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
        from .style import footnote, save

        line = self.provenance_line()
        if line:   # where the data came from, on the figure itself
            footnote(fig, line)
        self.written += save(fig, self.out_dir, self.name + suffix)

    def provenance_line(self) -> str:
        """'runs 3, 4 (tls) - testbed (nstb-vantage), host v1 - 2026-11-23', from scan_run."""
        runs = self.notes.get("runs") or []
        if not runs:
            return ""
        prov = run_provenance(self.db, runs)
        self.notes["provenance"] = prov
        return provenance_text(prov)

    def write_csv(self, header: Sequence[str], rows, suffix: str = "") -> Path:
        """NAME.csv; for a table (a name ending in -table) also NAME.tex (LaTeX booktabs)."""
        self.out_dir.mkdir(parents=True, exist_ok=True)
        rows = [list(r) for r in rows]
        p = self.out_dir / f"{self.name}{suffix}.csv"
        with p.open("w", newline="") as fh:
            w = csv.writer(fh)
            w.writerow(header)
            w.writerows(rows)
        self.written.append(p)
        if self.name.endswith("-table") and not suffix:
            tex = self.out_dir / f"{self.name}.tex"
            tex.write_text(latex_table(header, rows))
            self.written.append(tex)
        return p

    def cdf_figure(self, curves, xlabel: str, ylabel: str, csv_header: Sequence[str], *,
                   label: str = "{group} (n={n})", logx: bool = False, save: bool = True):
        """The common CDF figure: one step CDF per group of ``curves`` (``engine.cdf``
        results), labelled with ``label`` (fields ``group``, ``n``), and the CSV behind it,
        one row (group, value, cumulative share) per grid point under ``csv_header``.
        Saves the figure unless ``save`` is False; returns (fig, ax) for additions."""
        from .style import new_figure, series_style, step_cdf

        fig, ax = new_figure(xlabel, ylabel, logx=logx)
        rows = []
        for i, c in enumerate(curves):
            step_cdf(ax, list(c.values), list(c.probs), label=label.format(group=c.group, n=c.n), **series_style(i))
            rows += [(c.group, v, p) for v, p in zip(c.values, c.probs)]
        if curves:
            ax.legend()
        if not self.notes.get("samples"):   # n per series for the report unless the figure said more
            for c in curves:
                self.sample(c.n, f"observations ({c.group})" if c.group is not None else "observations")
        self.write_csv(csv_header, rows)
        if save:
            self.save(fig)
        return fig, ax

    def runs_of_kind(self, kind: str, *, all_finished: bool = False, given_kinds: tuple[str, ...] = ()) -> tuple[int, ...]:
        """The selected runs of ``kind`` (``--run`` ids of other kinds are ignored, except
        those of ``given_kinds``, accepted when named by ``--run``), else the latest finished
        run of ``kind`` (every finished one with ``all_finished``). Raises UsageError if none;
        records the ids like :meth:`run_ids`."""
        with self.db.connect() as conn:
            if self.runs:
                ids = [r[0] for r in conn.execute("SELECT id FROM scan_run WHERE id = ANY(%s) AND kind = ANY(%s)"
                                                  " ORDER BY id", (list(self.runs), [kind, *given_kinds]))]
            elif all_finished:
                ids = [r[0] for r in conn.execute("SELECT id FROM scan_run WHERE kind = %s AND status = 'finished'"
                                                  " ORDER BY id", (kind,))]
            else:
                row = conn.execute("SELECT max(id) FROM scan_run WHERE kind = %s AND status = 'finished'",
                                   (kind,)).fetchone()
                ids = [row[0]] if row and row[0] is not None else []
        if not ids:
            if self.runs:
                with self.db.connect() as conn:
                    found = dict(conn.execute("SELECT id, kind FROM scan_run WHERE id = ANY(%s)", (list(self.runs),)))
                given = ", ".join(f"{r} ({found[r]!r})" if r in found else f"{r} (no such run)" for r in self.runs)
                raise UsageError(f"{self.name}: no '{kind}' run among --run {given}")
            raise UsageError(f"{self.name}: no finished '{kind}' run in the database")
        self.record_runs(ids)
        return tuple(ids)

    def run_ids(self, kind: str, *, given_kinds: tuple[str, ...] = ()) -> tuple[int, ...]:
        """The selected runs of ``kind`` (``--run`` ids of other kinds are left to the figures
        that read them: ``report --run`` gives every figure the same list), or the latest
        finished run of ``kind``. Raises UsageError if none: ``plot F --run N`` with N of
        another kind is an error, not an empty figure. The ids are recorded in
        ``notes["runs"]`` for the report. ``given_kinds``: further kinds a figure reads
        when ``--run`` names such a run (never picked as the default)."""
        return self.runs_of_kind(kind, given_kinds=given_kinds)

    # -- what the report shows beside each figure (all optional) ------------------------
    def record_runs(self, runs) -> None:
        """scan_run ids the figure was computed from."""
        self.notes["runs"] = sorted(set(self.notes.get("runs", ())) | {int(r) for r in runs})

    def sample(self, n: int, what: str = "observations") -> None:
        """Sample size behind the figure, e.g. ``ctx.sample(9834, "hosts")``."""
        self.notes.setdefault("samples", []).append({"n": int(n), "what": what})

    def compare(self, quantity: str, thesis, ours, unit: str = "", quote: str = "") -> None:
        """A published value of the thesis/paper beside ours (``thesis`` None = not published);
        ``quote``: the sentence that states it (shown on hover in the report)."""
        self.notes.setdefault("compare", []).append(
            {"quantity": quantity, "thesis": thesis, "ours": ours, "unit": unit, **({"quote": quote} if quote else {})})


_TEX_ESCAPES = {"\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#", "_": r"\_",
                "{": r"\{", "}": r"\}", "~": r"\textasciitilde{}", "^": r"\textasciicircum{}"}


def _tex(v) -> str:
    text = "" if v is None else (f"{v:.4g}" if isinstance(v, float) else str(v))
    return "".join(_TEX_ESCAPES.get(ch, ch) for ch in text)


def latex_table(header: Sequence[str], rows) -> str:
    """A booktabs tabular (\\usepackage{booktabs}); numbers right-aligned."""
    rows = [list(r) for r in rows]
    numeric = [all(isinstance(r[i], (int, float)) or r[i] is None for r in rows) and bool(rows)
               for i in range(len(header))]
    spec = "".join("r" if n else "l" for n in numeric)
    lines = [f"\\begin{{tabular}}{{{spec}}}", "\\toprule", " & ".join(_tex(h) for h in header) + r" \\",
             "\\midrule"]
    lines += [" & ".join(_tex(v) for v in r) + r" \\" for r in rows]
    lines += ["\\bottomrule", "\\end{tabular}", ""]
    return "\n".join(lines)


#: namespaces of the testbeds: the shared one (nstb-), the timing testbed and the tracking
#: vantage (nstt-), the zoos' own (nstz-, nstq-, nstd-); a run from any of them is a testbed run
TESTBED_NETNS_PREFIXES = ("nstb-", "nstt-", "nstz-", "nstq-", "nstd-")


def run_provenance(db: Database, runs) -> list[dict]:
    """Per run: kind, dates, vantage and whether it ran in the testbed or on the Internet."""
    with db.connect() as conn:
        rows = conn.execute(
            "SELECT id, kind, status, started_at, finished_at, vantage, parameters FROM scan_run"
            " WHERE id = ANY(%s) ORDER BY id", (sorted(set(int(r) for r in runs)),)).fetchall()
    out = []
    for rid, kind, status, started, finished, vantage, params in rows:
        vantage = vantage or {}
        netns = vantage.get("netns")
        out.append({"run": rid, "kind": kind, "status": status,
                    "started_at": started.isoformat() if started else None,
                    "finished_at": finished.isoformat() if finished else None,
                    "where": "testbed" if netns and str(netns).startswith(TESTBED_NETNS_PREFIXES) else
                             ("Internet" if vantage else "unknown"),
                    "netns": netns, "host": vantage.get("host"),
                    "list": (params or {}).get("list") if isinstance(params, dict) else None,
                    "top": (params or {}).get("top") if isinstance(params, dict) else None})
    return out


def provenance_text(prov: list[dict]) -> str:
    if not prov:
        return ""
    kinds = sorted({p["kind"] for p in prov})
    where = sorted({p["where"] + (f" ({p['netns']})" if p["netns"] else "") for p in prov})
    hosts = sorted({p["host"] for p in prov if p["host"]})
    dates = sorted({p["started_at"][:10] for p in prov if p["started_at"]})
    date = dates[0] if len(dates) == 1 else f"{dates[0]}..{dates[-1]}" if dates else "?"
    return (f"data: run{'s' if len(prov) > 1 else ''} {', '.join(str(p['run']) for p in prov)} "
            f"({', '.join(kinds)}); {', '.join(where)}" + (f", vantage {', '.join(hosts)}" if hosts else "")
            + f"; {date}")


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
