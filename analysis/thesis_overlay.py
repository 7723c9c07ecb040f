"""Draw the thesis's published values (analysis/thesis_reference.py) beside ours.

``apply(ctx, ax, ...)`` is called by a figure after it drew its own series and before
``ctx.save``: every reference value of the figure is

* drawn where it can be placed on the figure's axes - a black open star, with its value
  beside it, at (x, share) on a CDF,
  at (category, value) on a bar/point figure, a dashed vertical line for a published
  maximum - and listed in a second legend under the axes as
  "thesis: <what>: <value> (<section, figure>)"; a value that cannot be placed (e.g. a mean)
  is listed in that legend without a mark;
* compared with ours (computed in PostgreSQL from the figure's own source query, or given
  by the figure) in ``ctx.compare`` for the report;
* written to NAME-thesis.csv, with ``drawn`` = marker / line / legend / no.

Values marked ``draw=False`` in the data file (they would mislead on our axes, e.g. the
height of a CDF step) go to the CSV and the report only.
"""
from __future__ import annotations

from typing import Any, Callable, Optional, Sequence

from psycopg import sql

from .thesis_reference import Ref, for_figure

THESIS_COLOR = "#000000"

CSV_HEADER = ["key", "what", "series", "stat", "x", "thesis_value", "qualifier", "unit", "where", "ours",
              "drawn", "quote"]

_OPS = {"share_lt": "<", "share_le": "<=", "share_gt": ">", "share_ge": ">=", "share_eq": "="}


def ours_from_source(db, source_sql: str, params: Sequence[Any], ref: Ref) -> Optional[float]:
    """Our value for ``ref`` from a source yielding ``value`` (and optionally ``grp``):
    shares in %, quantiles/max/mean in the value's unit; None without data."""
    with db.connect() as conn:
        cols = [d.name for d in conn.execute(f"SELECT * FROM ({source_sql}) s LIMIT 0", params).description]
        conds, wparams = [], []
        if ref.series is not None and "grp" in cols:
            conds, wparams = ["grp::text = %s"], [ref.series]
        if ref.top is not None:
            # a value the thesis states for a top list: over ranks 1..top, and only if our list
            # reaches that rank (else there is no such cut to compare)
            if "rank" not in cols:
                return None
            reach = conn.execute(sql.SQL("SELECT max(rank) FROM ({}) s").format(sql.SQL(source_sql)),
                                 params).fetchone()[0]
            if reach is None or reach < ref.top:
                return None
            conds.append("rank <= %s")
            wparams.append(ref.top)
        where = (" WHERE " + " AND ".join(conds)) if conds else ""
        if ref.stat in _OPS and ref.given_gt is not None:
            # a share "of the remaining": among the values above given_gt only
            expr = (f"100.0 * count(*) FILTER (WHERE value {_OPS[ref.stat]} %s AND value > %s)"
                    " / nullif(count(*) FILTER (WHERE value > %s), 0)")
            eparams = [ref.x, ref.given_gt, ref.given_gt]
        elif ref.stat in _OPS:
            expr = f"100.0 * count(*) FILTER (WHERE value {_OPS[ref.stat]} %s) / nullif(count(value), 0)"
            eparams = [ref.x]
        elif ref.stat == "share_null":
            expr, eparams = "100.0 * count(*) FILTER (WHERE value IS NULL) / nullif(count(*), 0)", []
        elif ref.stat == "quantile":
            expr, eparams = "percentile_disc(%s) WITHIN GROUP (ORDER BY value)", [ref.p]
        elif ref.stat in ("max", "mean"):
            expr, eparams = ("max(value)" if ref.stat == "max" else "avg(value)"), []
        elif ref.stat == "count":
            expr, eparams = "count(value)", []
        else:
            return None
        # expr, source_sql and where are SQL text of this module and the figures (code, never data)
        row = conn.execute(sql.SQL("SELECT ({})::float8 FROM ({}) s{}").format(
            sql.SQL(expr), sql.SQL(source_sql), sql.SQL(where)), (*eparams, *params, *wparams)).fetchone()
    return None if row is None or row[0] is None else float(row[0])


def cdf_position(ref: Ref) -> Optional[tuple[str, float, Optional[float]]]:
    """Where a reference sits on a CDF in shares 0..1: ('marker', x, y) / ('line', x, None)."""
    if ref.given_gt is not None:
        return None     # a share of a part of the series: not a point of its CDF
    if ref.stat in ("share_lt", "share_le") and ref.x is not None:
        return ("marker", ref.x, ref.value / 100)
    if ref.stat in ("share_gt", "share_ge") and ref.x is not None:
        return ("marker", ref.x, 1 - ref.value / 100)
    if ref.stat == "quantile" and ref.p is not None:
        return ("marker", ref.value, ref.p)
    if ref.stat == "max":
        return ("line", ref.value, None)
    return None


def apply(ctx, ax, *, source: Optional[str] = None, params: Sequence[Any] = (),
          ours: Optional[dict[str, Any]] = None,
          position: Optional[Callable[[Ref], Optional[tuple[str, float, Optional[float]]]]] = None,
          refs: Optional[Sequence[Ref]] = None) -> list[dict]:
    """Draw, compare and list the figure's reference values (see the module docstring).
    ``position(ref)`` -> ('marker', x, y) | ('line', x, None) | None places a value on the
    axes (default: :func:`cdf_position`); ``ours`` maps ref keys to our values (else they
    come from ``source``). Returns the CSV rows. No-op for a figure without values."""
    refs = for_figure(ctx.name) if refs is None else tuple(refs)
    if not refs:
        return []
    position = position or cdf_position
    handles, rows = [], []
    for ref in refs:
        our = (ours or {}).get(ref.key)
        if our is None and source is not None and ref.key not in (ours or {}):
            our = ours_from_source(ctx.db, source, params, ref)
        drawn = "no"
        if ax is not None and ref.draw:
            pos = position(ref)
            if pos is not None and pos[0] == "marker":
                h, = ax.plot([pos[1]], [pos[2]], linestyle="none", marker="*", markersize=10, color=THESIS_COLOR,
                             markerfacecolor="white", markeredgewidth=1.2, label=ref.label(), zorder=5)
                # the value beside its star, so several stars on one figure stay apart
                ax.annotate(f"thesis {ref.value_text()}", (pos[1], pos[2]), xytext=(5, -2),
                            textcoords="offset points", fontsize=6, color=THESIS_COLOR)
                drawn = "marker"
            elif pos is not None and pos[0] == "line":
                h = ax.axvline(pos[1], color=THESIS_COLOR, linestyle="--", linewidth=0.9, label=ref.label())
                drawn = "line"
            else:
                h, = ax.plot([], [], linestyle="none", label=ref.label())
                drawn = "legend"
            handles.append(h)
        rows.append([ref.key, ref.what, ref.series or "", ref.stat, "" if ref.x is None else ref.x, ref.value,
                     ref.qualifier, ref.unit, ref.where, "" if our is None else round(float(our), 4), drawn,
                     ref.quote])
        ctx.compare(ref.what + (f" [{ref.series}]" if ref.series else ""), f"{ref.value_text()} ({ref.where})",
                    None if our is None else round(float(our), 4), ref.unit, quote=ref.quote)
    if handles:
        _legend_below(ax, handles)
    ctx.write_csv(CSV_HEADER, rows, suffix="-thesis")
    ctx.notes["thesis_refs"] = [{"key": r[0], "value": r[5], "unit": r[7], "where": r[8], "ours": r[9] or None,
                                 "drawn": r[10]} for r in rows]
    return rows


def _legend_below(ax, handles) -> None:
    """The thesis's values as a second legend under the axes (ticks and label included), so
    they never hide our series and the figure's own legend stays."""
    fig = ax.figure
    own = ax.get_legend()
    fig.canvas.draw()
    bb = ax.get_tightbbox(fig.canvas.get_renderer())
    y0 = ax.transAxes.inverted().transform((0, bb.y0))[1]
    leg = ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(0.0, y0 - 0.02), fontsize=6.5,
                    handlelength=1.2, borderaxespad=0.0)
    if own is not None:
        ax.add_artist(own)
    leg.set_in_layout(True)
