"""Comparing vantages (issue 26): the same DNS question asked from two places gets
different answers where the answer depends on where one stands. ``scan dns-ecs`` sends the
vantage's own /24 as client subnet by default (scanners/dns/ecs.py ``vantage_subnet``: the
source address the kernel picks, from getsockname), and an ECS-aware authoritative answers
per client subnet (thesis 2.4.3; the testbed's [[dns.ecs]] scopes), and the round-trip time
depends on the path. Rows are told apart by their own vantage, ``row_vantage(run_id,
shard_id)`` (schema/0115_row_vantage.sql: the vantage of the shard that committed the row,
else the run's ``scan_run.vantage``), so one campaign run split across vantages is
compared per vantage too."""
from __future__ import annotations

from analysis.figures import FigureContext, figure
from analysis.style import new_figure
from netsurvey.errors import UsageError


@figure("vantage-compare-dns-ecs", sources=["dns_ecs_probe", "scan_run", "job_shard"])
def compare_dns_ecs(ctx: FigureContext) -> None:
    """Per vantage (scan_run.vantage name): answers, ECS scope and median RTT of each name asked by scan dns-ecs."""
    with ctx.db.connect() as conn:
        if ctx.runs:
            runs = list(ctx.runs_of_kind("dns-ecs"))
        else:   # the latest finished dns-ecs run of every vantage
            runs = [r for (r,) in conn.execute(
                "SELECT max(id) FROM scan_run WHERE kind = 'dns-ecs' AND status = 'finished'"
                " GROUP BY coalesce(vantage->>'name', vantage->>'host') ORDER BY 1")]
            if not runs:
                raise UsageError(f"{ctx.name}: no finished 'dns-ecs' run in the database")
            ctx.record_runs(runs)
        rows = conn.execute(
            """SELECT coalesce(v->>'name', r.vantage->>'host', '?') AS vantage,
                      array_to_string(ARRAY(SELECT jsonb_array_elements_text(
                          coalesce(v->'sources'->'ipv4', '[]') || coalesce(v->'sources'->'ipv6', '[]'))),
                          ' ') AS sources,
                      p.hostname, p.subnet::text, p.scope_prefix, array_to_string(p.answers, ' ') AS answers,
                      count(*)::int, percentile_cont(0.5) WITHIN GROUP (ORDER BY p.rtt_ms)::float8
               FROM dns_ecs_probe p JOIN scan_run r ON r.id = p.run_id, LATERAL row_vantage(p.run_id, p.shard_id) v
               WHERE p.run_id = ANY(%s) AND p.outcome = 'answer'
               GROUP BY 1, 2, 3, 4, 5, 6 ORDER BY 3, 1, 4""", (runs,)).fetchall()
    table = [(v, s, h, sub, sc, a, n, round(m, 3) if m is not None else None) for v, s, h, sub, sc, a, n, m in rows]
    ctx.write_csv(["vantage", "sources", "hostname", "subnet", "scope_prefix", "answers", "probes",
                   "rtt_median_ms"], table)
    fig, ax = new_figure("vantage / hostname", "median RTT [ms]")
    labels = [f"{v}\n{h}" for v, _, h, *_ in table]
    ax.bar(range(len(table)), [r[7] or 0 for r in table], color="#4477aa")
    ax.set_xticks(range(len(table)), labels, fontsize=6, rotation=30, ha="right")
    for i, r in enumerate(table):
        ax.annotate(f"{r[5]} (/{r[4]})", (i, r[7] or 0), ha="center", va="bottom", fontsize=6)
    ax.set_title(f"dns-ecs from {len({r[0] for r in table})} vantages: answer (scope) and median RTT", fontsize=8)
    for v in sorted({r[0] for r in table}):
        ctx.sample(sum(r[6] for r in table if r[0] == v), f"answers at vantage {v}")
    ctx.save(fig)
    ctx.notes["rows"] = table


@figure("vantage-compare-handshake-timing", sources=["handshake_timing_sample", "scan_run", "job_shard"])
def compare_handshake_timing(ctx: FigureContext) -> None:
    """Per vantage (each row's own, row_vantage) and method: n, median connect and first-byte times of scan handshake-timing (Tables 3.5/5.1 depend on the path's RTT, i.e. on where one stands)."""
    with ctx.db.connect() as conn:
        if ctx.runs:
            runs = list(ctx.runs_of_kind("handshake-timing"))
        else:   # the latest finished handshake-timing run of every vantage (a campaign run counts for each of its)
            runs = [r for (r,) in conn.execute(
                """SELECT DISTINCT max(r.id) FROM scan_run r LEFT JOIN job_shard j ON j.run_id = r.id
                   WHERE r.kind = 'handshake-timing' AND r.status = 'finished'
                   GROUP BY coalesce(j.vantage->>'name', r.vantage->>'name', r.vantage->>'host') ORDER BY 1""")]
            if not runs:
                raise UsageError(f"{ctx.name}: no finished 'handshake-timing' run in the database")
            ctx.record_runs(runs)
        rows = conn.execute(
            """SELECT coalesce(v->>'name', r.vantage->>'host', '?') AS vantage,
                      array_to_string(ARRAY(SELECT jsonb_array_elements_text(
                          coalesce(v->'sources'->'ipv4', '[]') || coalesce(v->'sources'->'ipv6', '[]'))),
                          ' ') AS sources,
                      p.method, count(DISTINCT p.address)::int, count(*)::int,
                      percentile_cont(0.5) WITHIN GROUP (ORDER BY p.connect_ms)::float8,
                      percentile_cont(0.5) WITHIN GROUP (ORDER BY p.ttfb_ms)::float8,
                      percentile_cont(0.1) WITHIN GROUP (ORDER BY p.ttfb_ms)::float8,
                      percentile_cont(0.9) WITHIN GROUP (ORDER BY p.ttfb_ms)::float8,
                      array_to_string(array_agg(DISTINCT p.run_id ORDER BY p.run_id), ' ')
               FROM handshake_timing_sample p JOIN scan_run r ON r.id = p.run_id,
                    LATERAL row_vantage(p.run_id, p.shard_id) v
               WHERE p.run_id = ANY(%s) AND p.status = 'success'
               GROUP BY 1, 2, 3 ORDER BY 3, 1""", (runs,)).fetchall()
    if not rows:
        raise UsageError(f"{ctx.name}: no successful handshake-timing sample in run(s) {', '.join(map(str, runs))}")

    def r3(x):
        return round(x, 3) if x is not None else None

    table = [(v, s, m, t, n, r3(c), r3(f), r3(lo), r3(hi), ids) for v, s, m, t, n, c, f, lo, hi, ids in rows]
    ctx.write_csv(["vantage", "sources", "method", "targets", "samples", "connect_median_ms", "ttfb_median_ms",
                   "ttfb_p10_ms", "ttfb_p90_ms", "runs"], table)
    fig, ax = new_figure("vantage / method", "time to first byte [ms] (median, p10-p90)")
    xs = range(len(table))
    med = [r[6] or 0 for r in table]
    ax.bar(xs, med, color="#4477aa")
    ax.errorbar(xs, med, yerr=[[max(0, m - (r[7] or m)) for m, r in zip(med, table)],
                               [max(0, (r[8] or m) - m) for m, r in zip(med, table)]], fmt="none", ecolor="k")
    ax.set_xticks(list(xs), [f"{r[0]}\n{r[2]}" for r in table], fontsize=6, rotation=30, ha="right")
    for i, r in enumerate(table):
        ax.annotate(f"n={r[4]}", (i, med[i]), ha="center", va="bottom", fontsize=6)
    ax.set_title(f"handshake-timing from {len({r[0] for r in table})} vantages", fontsize=8)
    for v in sorted({r[0] for r in table}):
        ctx.sample(sum(r[4] for r in table if r[0] == v), f"successful connections at vantage {v}")
    ctx.save(fig)
    ctx.notes["rows"] = table
