"""One house style for every figure: labels with units, CDF step plots, log axes where the
thesis uses them, deterministic PNG/SVG output (no timestamps, fixed SVG hash salt)."""
from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from cycler import cycler  # noqa: E402

#: Paul Tol's "bright" scheme: distinguishable with colour-vision deficiencies and in grey.
PALETTE = ["#4477AA", "#EE6677", "#228833", "#CCBB44", "#66CCEE", "#AA3377", "#BBBBBB"]
LINESTYLES = ["-", "--", ":", "-.", (0, (5, 1)), (0, (1, 1)), (0, (3, 1, 1, 1, 1, 1))]
MARKERS = ["o", "s", "^", "D", "v", "P", "X"]

plt.rcParams.update({
    "figure.figsize": (6.0, 3.6), "figure.dpi": 100, "savefig.dpi": 150,
    "font.size": 9, "axes.grid": True, "grid.alpha": 0.3, "axes.spines.top": False,
    "axes.spines.right": False, "legend.frameon": False, "svg.hashsalt": "netsurvey",
    "svg.fonttype": "none", "path.simplify": False,
    # every series differs in colour AND line style, so overlapping curves stay visible
    "axes.prop_cycle": cycler(color=PALETTE) + cycler(linestyle=LINESTYLES),
})


def series_style(i: int, dashed: bool = False) -> dict:
    """Colour, line style and a sparse marker for series ``i``: two series that coincide
    still show both (markers at different spots), and colour is never the only cue."""
    k = i % len(PALETTE)
    return {"color": PALETTE[k], "linestyle": "--" if dashed else LINESTYLES[k], "marker": MARKERS[k],
            "markevery": (0.05 + 0.03 * k, 0.2), "markersize": 4}


def new_figure(xlabel: str, ylabel: str, *, logx: bool = False, title: str | None = None):
    """A figure and axes in house style. Labels must state units, e.g. 'TTL [s]'."""
    fig, ax = plt.subplots()
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    if logx:
        set_log_axis(ax.xaxis)
    if title:
        ax.set_title(title)
    return fig, ax


def set_log_axis(axis) -> None:
    """A log axis labelled with plain numbers at 1, 2, 5 x 10^k (no '6x10^0' minor labels
    colliding with each other)."""
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    (axis.axes.set_xscale if axis is axis.axes.xaxis else axis.axes.set_yscale)("log")
    axis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
    axis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    axis.set_minor_formatter(NullFormatter())


def footnote(fig, text: str) -> None:
    """Small grey text under everything else on the figure (axis labels included)."""
    fig.canvas.draw()
    bb = fig.get_tightbbox(fig.canvas.get_renderer())
    fig.text(0.01, bb.y0 / fig.get_figheight() - 0.01, text, fontsize=6, color="#555555", ha="left", va="top")


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
