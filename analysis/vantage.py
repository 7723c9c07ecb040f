"""Comparing vantages (issue 26): the same DNS question asked from two places gets
different answers where the answer depends on where one stands. ``scan dns-ecs`` sends the
vantage's own /24 as client subnet by default (scanners/dns/ecs.py ``vantage_subnet``: the
source address the kernel picks, from getsockname), and an ECS-aware authoritative answers
per client subnet (thesis 2.4.3; the testbed's [[dns.ecs]] scopes), and the round-trip time
depends on the path. Runs are told apart by ``scan_run.vantage`` (name and sources,
netsurvey/vantage.py)."""
from __future__ import annotations

from analysis.figures import FigureContext, figure
from analysis.style import new_figure
from netsurvey.errors import UsageError


@figure("vantage-compare-dns-ecs", sources=["dns_ecs_probe", "scan_run"])
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
            """SELECT coalesce(r.vantage->>'name', r.vantage->>'host', '?') AS vantage,
                      array_to_string(ARRAY(SELECT jsonb_array_elements_text(
                          coalesce(r.vantage->'sources'->'ipv4', '[]') || coalesce(r.vantage->'sources'->'ipv6', '[]'))),
                          ' ') AS sources,
                      p.hostname, p.subnet::text, p.scope_prefix, array_to_string(p.answers, ' ') AS answers,
                      count(*)::int, percentile_cont(0.5) WITHIN GROUP (ORDER BY p.rtt_ms)::float8
               FROM dns_ecs_probe p JOIN scan_run r ON r.id = p.run_id
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
