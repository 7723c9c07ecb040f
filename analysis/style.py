"""One house style for every figure: labels with units, CDF step plots, log axes where the
thesis uses them, deterministic PNG/SVG output (no timestamps, fixed SVG hash salt)."""
from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

plt.rcParams.update({
    "figure.figsize": (6.0, 3.6), "figure.dpi": 100, "savefig.dpi": 150,
    "font.size": 9, "axes.grid": True, "grid.alpha": 0.3, "axes.spines.top": False,
    "axes.spines.right": False, "legend.frameon": False, "svg.hashsalt": "netsurvey",
    "svg.fonttype": "none", "path.simplify": False,
})


def new_figure(xlabel: str, ylabel: str, *, logx: bool = False, title: str | None = None):
    """A figure and axes in house style. Labels must state units, e.g. 'TTL [s]'."""
    fig, ax = plt.subplots()
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    if logx:
        ax.set_xscale("log")
    if title:
        ax.set_title(title)
    return fig, ax


def step_cdf(ax, values, probs, label: str | None = None, **kw) -> None:
    """Draw an empirical CDF as a post-step line starting at probability 0."""
    if not values:
        return
    xs = [values[0], *values]
    ys = [0.0, *probs]
    ax.step(xs, ys, where="post", label=label, **kw)
    ax.set_ylim(0, 1.02)


def save(fig, out_dir: Path, name: str) -> list[Path]:
    """Write NAME.png and NAME.svg deterministically; returns the paths."""
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = [out_dir / f"{name}.png", out_dir / f"{name}.svg"]
    fig.savefig(paths[0], metadata={"Software": None}, bbox_inches="tight")
    fig.savefig(paths[1], metadata={"Date": None, "Creator": None}, bbox_inches="tight")
    plt.close(fig)
    return paths
