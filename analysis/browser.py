"""Figures of the browser probes: the tracking table (thesis Tables 3.2, 4.2, 6.1 style) and
the page-load-time CDF of the page-load logger (BLAST)."""
from __future__ import annotations

from .engine import cdf
from .figures import FigureContext, figure


def _tracking_runs(ctx: FigureContext) -> tuple[int, ...]:
    """The selected runs, else the latest finished browser-track run of every browser."""
    if ctx.runs:
        return ctx.run_ids("browser-track")
    with ctx.db.connect() as conn:
        rows = conn.execute(
            """SELECT max(r.id) FROM scan_run r JOIN browser_track_verdict v ON v.run_id = r.id
               WHERE r.kind = 'browser-track' AND r.status = 'finished' GROUP BY v.browser""").fetchall()
    runs = tuple(sorted(r[0] for r in rows))
    if not runs:
        return ctx.run_ids("browser-track")     # raises the usual "no finished run" error
    ctx.record_runs(runs)
    return runs


def _cell(verdict: str, presented_at, absent_at) -> str:
    if verdict == "viable":
        return f"viable (>= {presented_at:g} s)" if presented_at is not None else "viable"
    if verdict == "blocked" and absent_at is not None:
        return f"blocked ({absent_at:g} s)"
    return verdict


@figure("browser-tracking-table", sources=["browser_track_verdict", "browser_tracking_table"],
        thesis="Tables 3.2, 4.2, 6.1")
def tracking_table(ctx: FigureContext) -> None:
    """Thesis-style table: one column per browser (version, OS), one row per experiment and
    mechanism: viable (with the longest wait at which the identifier was still presented, s)
    or blocked (with the shortest wait at which it was not), n/a if the browser lacks it."""
    runs = _tracking_runs(ctx)
    with ctx.db.connect() as conn:
        rows = conn.execute(
            """SELECT browser, browser_version, os, experiment, mechanism, longest_presented_wait_s,
                      shortest_absent_wait_s, expected_max_s, verdict
               FROM browser_tracking_table WHERE run_id = ANY(%s)
               ORDER BY browser, experiment, mechanism""", (list(runs),)).fetchall()
    header = ["browser", "version", "os", "experiment", "mechanism", "longest_presented_wait_s",
              "shortest_absent_wait_s", "server_lifetime_s", "verdict"]
    ctx.write_csv(header, rows)
    ctx.sample(len(rows), "verdicts")
    import matplotlib.pyplot as plt

    cols = sorted({(r[0], r[1] or "?", r[2] or "") for r in rows})
    keys = sorted({(r[3], r[4]) for r in rows})
    life = {(r[3], r[4]): r[7] for r in rows}
    cell = {((r[0], r[1] or "?", r[2] or ""), r[3], r[4]): _cell(r[8], r[5], r[6]) for r in rows}
    table = [[e, m, "-" if life.get((e, m)) is None else f"{life[(e, m)]:g}"]
             + [cell.get((c, e, m), "") for c in cols] for e, m in keys]
    fig, ax = plt.subplots(figsize=(3.5 + 2.2 * max(1, len(cols)), 0.6 + 0.28 * max(1, len(table))))
    ax.axis("off")
    if table:
        t = ax.table(cellText=table, colLabels=["experiment", "mechanism", "server lifetime [s]"]
                     + [f"{b} {v}" for b, v, _ in cols], loc="center", cellLoc="left")
        t.auto_set_font_size(False)
        t.set_fontsize(7)
        t.auto_set_column_width(list(range(3 + len(cols))))
    oses = sorted({c[2] for c in cols})
    ax.set_title("Tracking via TLS / QUIC / TFO state; OS: " + "; ".join(oses), fontsize=8)
    ctx.save(fig)


@figure("browser-plt-cdf", sources=["browser_visit"], thesis="BLAST page-load-time metric (no figure counterpart)")
def plt_cdf(ctx: FigureContext) -> None:
    """CDF of the page load time (95% of resources, ms) of complete visits."""
    runs = ctx.run_ids("browser-pageload")
    src = ("SELECT browser AS grp, page_load_time_ms AS value FROM browser_visit "
           "WHERE run_id = ANY(%s) AND status = 'complete'")
    cdfs = cdf(ctx.db, src, (list(runs),))
    ctx.cdf_figure(cdfs, "page load time (95% of resources) [ms]", "share of visits",
                   ["browser", "page_load_time_ms", "cdf"])
