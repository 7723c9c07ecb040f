"""Figures of the browser probes: the tracking table (thesis Tables 3.2, 4.2, 6.1 style) and
the page-load-time CDF of the page-load logger (BLAST)."""
from __future__ import annotations

from .engine import cdf
from .figures import FigureContext, figure
from .style import new_figure, step_cdf


@figure("browser-tracking-table", sources=["browser_track_verdict", "browser_tracking_table"],
        thesis="Tables 3.2, 4.2, 6.1")
def tracking_table(ctx: FigureContext) -> None:
    """Per browser/version/OS: viable or blocked per experiment and mechanism, with waits (s)."""
    runs = ctx.run_ids("browser-track")
    with ctx.db.connect() as conn:
        rows = conn.execute(
            """SELECT browser, browser_version, os, experiment, mechanism, longest_presented_wait_s,
                      shortest_absent_wait_s, expected_max_s, verdict
               FROM browser_tracking_table WHERE run_id = ANY(%s)
               ORDER BY browser, experiment, mechanism""", (list(runs),)).fetchall()
    header = ["browser", "version", "os", "experiment", "mechanism", "longest_presented_wait_s",
              "shortest_absent_wait_s", "server_lifetime_s", "verdict"]
    ctx.write_csv(header, rows)
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 0.4 + 0.3 * max(1, len(rows))))
    ax.axis("off")
    cells = [[r[0] + " " + (r[1] or ""), r[3], r[4], "-" if r[5] is None else f"{r[5]:g}",
              "-" if r[6] is None else f"{r[6]:g}", f"{r[7]:g}" if r[7] is not None else "-", r[8]] for r in rows]
    if cells:
        t = ax.table(cellText=cells, colLabels=["browser", "experiment", "mechanism", "presented at [s]",
                                                 "absent at [s]", "server lifetime [s]", "verdict"],
                     loc="center", cellLoc="left")
        t.auto_set_font_size(False)
        t.set_fontsize(7)
    ax.set_title(f"Tracking via TLS state ({rows[0][2] if rows else ''})", fontsize=8)
    ctx.save(fig)


@figure("browser-plt-cdf", sources=["browser_visit"], thesis="BLAST Fig. 2 (page load time)")
def plt_cdf(ctx: FigureContext) -> None:
    """CDF of the page load time (95% of resources, ms) of complete visits."""
    runs = ctx.run_ids("browser-pageload")
    src = ("SELECT browser AS grp, page_load_time_ms AS value FROM browser_visit "
           "WHERE run_id = ANY(%s) AND status = 'complete'")
    cdfs = cdf(ctx.db, src, (list(runs),))
    fig, ax = new_figure("page load time (95% of resources) [ms]", "share of visits")
    rows = []
    for c in cdfs:
        step_cdf(ax, list(c.values), list(c.probs), label=f"{c.group} (n={c.n})")
        rows += [(c.group, v, p) for v, p in zip(c.values, c.probs)]
    ax.legend()
    ctx.write_csv(["browser", "page_load_time_ms", "cdf"], rows)
    ctx.save(fig)
