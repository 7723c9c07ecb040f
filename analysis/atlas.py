"""RIPE Atlas resolver RTT figures (thesis Fig 2.4 and Fig 9.6). Every number comes from
the views atlas_resolver_rtt / atlas_rtt_triplet (schema/0006_atlas.sql), computed in
PostgreSQL by analysis.engine."""
from __future__ import annotations

from . import thesis_overlay
from .engine import cdf, percentiles
from .figures import FigureContext, figure
from .style import new_figure, step_cdf

_GROUPS = ("all", "same AS", "other AS")
_METRICS = (("rtt_direct_ms", "RTT_direct", "-"), ("rtt_server_ms", "RTT_Server", "--"),
            ("rtt_dns_ms", "RTT_DNS", ":"))


def resolver_rtt_source() -> str:
    """SQL: one row per (probe, egress resolver): value = RTT (ms), grp = all/same AS/other AS."""
    return """SELECT 'all' AS grp, rtt_ms AS value FROM atlas_resolver_rtt WHERE run_id = ANY(%s)
              UNION ALL
              SELECT CASE WHEN same_as THEN 'same AS' ELSE 'other AS' END, rtt_ms
              FROM atlas_resolver_rtt WHERE run_id = ANY(%s) AND same_as IS NOT NULL"""


@figure("atlas-resolver-rtt", sources=["atlas_resolver_rtt", "atlas_ping", "atlas_asn"], thesis="Fig 2.4",
        description="CDF of the RTT between RIPE Atlas probes and their resolvers: all / same AS / other AS")
def resolver_rtt(ctx: FigureContext) -> None:
    runs = list(ctx.run_ids("atlas"))
    src, params = resolver_rtt_source(), (runs, runs)
    cdfs = {c.group: c for c in cdf(ctx.db, src, params)}
    pct = percentiles(ctx.db, src, params, probs=(0.5, 0.95, 0.99))
    fig, ax = new_figure("RTT probe to resolver [ms]", "share of (probe, resolver) pairs", logx=True)
    styles = {"all": "-", "same AS": "--", "other AS": "-."}
    for g in _GROUPS:
        if g in cdfs:
            c = cdfs[g]
            step_cdf(ax, list(c.values), list(c.probs), label=f"{g} (n={c.n})", linestyle=styles[g])
    if "all" in pct:
        for p, mark in ((0.95, "p95"), (0.99, "p99")):
            x = pct["all"][p]
            ax.axvline(x, color="grey", linewidth=0.8, linestyle=":")
            ax.annotate(f"{mark} {x:g} ms", (x, 0.05 if p == 0.95 else 0.15), fontsize=7)
    ax.legend(loc="upper left")
    with ctx.db.connect() as conn:
        probes = conn.execute("SELECT count(DISTINCT prb_id)::int FROM atlas_resolver_rtt WHERE run_id = ANY(%s)",
                              (runs,)).fetchone()[0]
    thesis_overlay.apply(ctx, ax, source=src, params=params, ours={"n_probes": probes})
    ctx.save(fig)
    with ctx.db.connect() as conn:
        below = dict(conn.execute(
            f"SELECT grp, count(*) FILTER (WHERE value < 10)::float8 / count(*) FROM ({src}) s"
            " GROUP BY grp", params).fetchall())
    rows = []
    for g in _GROUPS:
        if g in cdfs:
            c = cdfs[g]
            q = pct.get(g, {})
            rows.append([g, c.n, q.get(0.5), q.get(0.95), q.get(0.99), below.get(g)])
    ctx.write_csv(["group", "n", "p50_ms", "p95_ms", "p99_ms", "share_below_10ms"], rows)
    ctx.notes.update({"runs": runs, "groups": {r[0]: dict(zip(
        ["n", "p50_ms", "p95_ms", "p99_ms", "share_below_10ms"], r[1:])) for r in rows}})


@figure("atlas-rtt-triplet", sources=["atlas_rtt_triplet", "atlas_server_ping", "atlas_ping"], thesis="Fig 9.6",
        description="CDF of RTT_DNS, RTT_Server and RTT_direct for probes using a same-AS (ISP) resolver")
def rtt_triplet(ctx: FigureContext) -> None:
    runs = list(ctx.run_ids("atlas"))
    src = " UNION ALL ".join(
        f"SELECT '{label}' AS grp, {col} AS value FROM atlas_rtt_triplet WHERE run_id = ANY(%s)"
        for col, label, _ in _METRICS)
    params = (runs,) * len(_METRICS)
    cdfs = {c.group: c for c in cdf(ctx.db, src, params)}
    pct = percentiles(ctx.db, src, params, probs=(0.5, 0.9, 0.99))
    with ctx.db.connect() as conn:
        n, faster5, faster10, faster40, faster50 = conn.execute(
            """SELECT count(*), count(*) FILTER (WHERE rtt_direct_ms - rtt_server_ms >= 5),
                      count(*) FILTER (WHERE rtt_direct_ms - rtt_server_ms >= 10),
                      count(*) FILTER (WHERE rtt_direct_ms - rtt_server_ms >= 40),
                      count(*) FILTER (WHERE rtt_direct_ms - rtt_server_ms >= 50)
               FROM atlas_rtt_triplet WHERE run_id = ANY(%s)""", (runs,)).fetchone()
    fig, ax = new_figure("RTT [ms]", "share of probes (same-AS resolver)", logx=True)
    for _col, label, ls in _METRICS:
        if label in cdfs:
            c = cdfs[label]
            step_cdf(ax, list(c.values), list(c.probs), label=f"{label} (n={c.n})", linestyle=ls)
    ax.legend(loc="lower right")
    thesis_overlay.apply(ctx, ax, source=src, params=params,
                         ours={"share_server_5ms_faster": 100 * faster5 / n if n else None,
                               "share_server_10ms_faster": 100 * faster10 / n if n else None,
                               "share_server_40ms_faster": 100 * faster40 / n if n else None,
                               "share_server_50ms_faster": 100 * faster50 / n if n else None})
    ctx.save(fig)
    rows = [[label, cdfs[label].n, *(pct.get(label, {}).get(p) for p in (0.5, 0.9, 0.99))]
            for _c, label, _ in _METRICS if label in cdfs]
    ctx.write_csv(["metric", "n", "p50_ms", "p90_ms", "p99_ms"], rows)
    ctx.notes.update({"runs": runs, "probes": n,
                      "share_server_5ms_faster": faster5 / n if n else None,
                      "share_server_10ms_faster": faster10 / n if n else None,
                      "metrics": {r[0]: dict(zip(["n", "p50_ms", "p90_ms", "p99_ms"], r[1:])) for r in rows}})
