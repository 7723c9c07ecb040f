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


#: units of a duration axis (the unit in the label's brackets) in seconds
DURATION_UNITS = {"ms": 0.001, "s": 1.0, "min": 60.0, "h": 3600.0, "days": 86400.0, "d": 86400.0}
#: the marks of a duration axis on a log scale, by rank: the first rank that fits is kept
#: whole, lower ranks only while the axis stays readable
_DAY, _WEEK = 86400.0, 7 * 86400.0
_LOG_MARKS = ([0.001, 1.0, 60.0, 3600.0, _DAY, _WEEK, 365 * _DAY],
              [0.01, 0.1, 10.0, 600.0, 6 * 3600.0, 30 * _DAY],
              [0.005, 0.05, 0.5, 5.0, 30.0, 300.0, 1800.0, 12 * 3600.0, 2 * _DAY, 14 * _DAY, 91 * _DAY],
              [0.002, 0.02, 0.2, 2.0, 15.0, 120.0, 900.0, 7200.0, 3 * 3600.0])
#: steps of a duration axis on a linear scale, seconds
_LIN_STEPS = [0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900,
              1800, 3600, 2 * 3600, 3 * 3600, 6 * 3600, 12 * 3600, _DAY, 2 * _DAY, _WEEK, 2 * _WEEK, 4 * _WEEK,
              13 * _WEEK, 26 * _WEEK, 52 * _WEEK]
MAX_TICKS = 7


def duration_text(seconds: float) -> str:
    """A duration as a reader reads it: '0', '500 ms', '30 s', '5 min', '1 h', '2 d', '1 w', '1 y'."""
    if seconds == 0:
        return "0"
    a = abs(seconds)
    for name, unit, exact in (("y", 365 * _DAY, True), ("w", _WEEK, True), ("d", _DAY, False),
                              ("h", 3600.0, False), ("min", 60.0, False), ("s", 1.0, False), ("ms", 0.001, False)):
        v = a / unit
        if v >= 1 and (not exact or abs(v - round(v)) < 1e-9):
            text = f"{v:.3g}" if abs(v - round(v, 1)) > 1e-9 else f"{round(v, 1):g}"
            return ("-" if seconds < 0 else "") + f"{text} {name}"
    return f"{seconds:g} s"


def duration_unit(label: str) -> float | None:
    """Seconds per unit of an axis label ending in a duration unit ('lifetime [s]' -> 1.0)."""
    import re

    m = re.search(r"\[(ms|s|min|h|days|d)\]\s*$", label or "")
    return DURATION_UNITS[m.group(1)] if m else None


def _thin(values: list[float], n: int) -> list[float]:
    """At most n of the sorted values, evenly strided, keeping the first."""
    if len(values) <= n:
        return values
    stride = -(-len(values) // n)
    return values[::stride]


def _log_duration_ticks(lo: float, hi: float) -> list[float]:
    """Seconds: the marks of _LOG_MARKS within [lo, hi], rank by rank while <= MAX_TICKS."""
    chosen: list[float] = []
    for rank in _LOG_MARKS:
        more = sorted(chosen + [m for m in rank if lo <= m <= hi])
        if len(more) > MAX_TICKS and len(chosen) >= 2:
            break
        chosen = more
        if len(chosen) > MAX_TICKS:
            break
    return _thin(chosen, MAX_TICKS)


def _lin_duration_ticks(lo: float, hi: float) -> list[float]:
    import math

    span = hi - lo
    if span <= 0:
        return [lo]
    step = next((s for s in _LIN_STEPS if span / s <= MAX_TICKS - 1), _LIN_STEPS[-1])
    first = math.ceil(lo / step - 1e-9)
    return [k * step for k in range(first, int(math.floor(hi / step + 1e-9)) + 1)]


def set_duration_axis(axis, unit_s: float, *, log: bool) -> None:
    """Ticks a reader can read on an axis of durations whose data are in ``unit_s`` seconds:
    1 min, 1 h, 1 d, 1 w marks (log) or whole minutes / hours / days (linear), at most
    MAX_TICKS labels, each with its unit ('5 min', '1 d')."""
    from matplotlib.ticker import FuncFormatter, Locator, LogLocator, NullFormatter, NullLocator

    class DurationLocator(Locator):
        def __call__(self):
            vmin, vmax = self.axis.get_view_interval()
            return self.tick_values(vmin, vmax)

        def tick_values(self, vmin, vmax):
            lo, hi = sorted((vmin * unit_s, vmax * unit_s))
            if log:
                ticks = _log_duration_ticks(max(lo, 1e-9), hi)
                if len(ticks) < 2:   # a short span without a round mark: plain 1-2-5 log ticks
                    return _readable_log_ticks(max(vmin, 1e-12), vmax)
            else:
                ticks = _lin_duration_ticks(lo, hi)
            return [t / unit_s for t in ticks]

    ax = axis.axes
    if log:
        (ax.set_xscale if axis is ax.xaxis else ax.set_yscale)("log")
        axis.set_minor_locator(LogLocator(base=10, subs="auto"))
    else:
        axis.set_minor_locator(NullLocator())
    axis.set_major_locator(DurationLocator())
    axis.set_major_formatter(FuncFormatter(lambda v, _: duration_text(v * unit_s)))
    axis.set_minor_formatter(NullFormatter())


def _readable_log_ticks(vmin: float, vmax: float) -> list[float]:
    """Log ticks at 1, 2, 5 x 10^k on a short axis, 1 and 3 x 10^k up to four decades, and
    every (second, third, ...) decade on longer ones: never more than MAX_TICKS + 1."""
    import math

    lo, hi = sorted((vmin, vmax))
    lo = max(lo, 1e-12)
    decades = math.log10(hi / lo) if hi > lo else 0.0
    subs = (1.0, 2.0, 5.0) if decades <= 2.2 else (1.0, 3.0) if decades <= 3.5 else (1.0,)
    ticks = [m * 10.0 ** k for k in range(math.floor(math.log10(lo)) - 1, math.ceil(math.log10(hi)) + 2)
             for m in subs]
    inside = [t for t in ticks if lo * (1 - 1e-9) <= t <= hi * (1 + 1e-9)]
    return _thin(inside, MAX_TICKS + 1) if len(inside) >= 2 else ticks


def new_figure(xlabel: str, ylabel: str, *, logx: bool = False, title: str | None = None):
    """A figure and axes in house style. Labels must state units, e.g. 'TTL [s]'. An x axis
    of durations of a second or more ('[s]', '[min]', '[h]', '[days]') gets duration ticks
    (1 min, 1 h, 1 d, 1 w); the label then names the unit of the CSV's values instead."""
    fig, ax = plt.subplots()
    ax.set_ylabel(ylabel)
    unit = duration_unit(xlabel)
    if unit is not None and unit >= 1.0:
        # the ticks carry their units ('5 min', '1 d'); the label says what the CSV holds
        ax.set_xlabel(xlabel[:xlabel.rindex("[")].rstrip() + f" (CSV: {xlabel[xlabel.rindex('[') + 1:-1]})")
        set_duration_axis(ax.xaxis, unit, log=logx)
    else:
        ax.set_xlabel(xlabel)
        if logx:
            set_log_axis(ax.xaxis)
    if title:
        ax.set_title(title)
    return fig, ax


def set_log_axis(axis) -> None:
    """A log axis labelled with plain numbers, thinned to stay readable: 1, 2, 5 x 10^k on
    a short axis, fewer marks per decade (and fewer decades) on longer ones; minor ticks
    carry no labels."""
    from matplotlib.ticker import FuncFormatter, Locator, LogLocator, NullFormatter

    class ReadableLogLocator(Locator):
        def __call__(self):
            vmin, vmax = self.axis.get_view_interval()
            return self.tick_values(vmin, vmax)

        def tick_values(self, vmin, vmax):
            return _readable_log_ticks(vmin, vmax)

    (axis.axes.set_xscale if axis is axis.axes.xaxis else axis.axes.set_yscale)("log")
    axis.set_major_locator(ReadableLogLocator())
    axis.set_minor_locator(LogLocator(base=10, subs="auto"))
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
