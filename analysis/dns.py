"""DNS figures: Fig 2.5 (CDF of authoritative TTLs for A and AAAA) and the ECS scope
distribution of thesis 2.4.3. Everything is computed in PostgreSQL from the views of
schema/0005_dns.sql."""
from __future__ import annotations

from psycopg import sql

from analysis import thesis_overlay
from analysis.engine import cdf
from analysis.figures import FigureContext, figure
from analysis.style import new_figure, step_cdf


@figure("dns-ttl-cdf", sources=["dns_ttl_observation", "dns_ttl_summary"], thesis="Fig 2.5")
def ttl_cdf(ctx: FigureContext) -> None:
    """CDF of the TTLs of A and AAAA records asked at authoritative servers."""
    runs = list(ctx.run_ids("dns-ttl"))
    src = "SELECT qtype AS grp, ttl AS value FROM dns_ttl_observation WHERE run_id = ANY(%s)"
    curves = cdf(ctx.db, src, (runs,))
    fig, ax = new_figure("TTL [s]", "share of records", logx=True)
    for c in curves:
        step_cdf(ax, list(c.values), list(c.probs), label=f"{c.group} (n={c.n})",
                 linestyle="-" if c.group == "A" else "--")
    for x in (60, 300, 600, 1800):
        ax.axvline(x, color="grey", linewidth=0.5, alpha=0.5)
    ax.legend(loc="lower right")
    thesis_overlay.apply(ctx, ax, source=src, params=(runs,))
    ctx.save(fig)
    with ctx.db.connect() as conn:
        rows = conn.execute(
            """SELECT qtype, sum(n_answers)::int, sum(n_failed)::int,
                      sum(share_60s * n_answers) / nullif(sum(n_answers), 0),
                      sum(share_300s * n_answers) / nullif(sum(n_answers), 0),
                      sum(share_600s * n_answers) / nullif(sum(n_answers), 0),
                      sum(share_under_60s * n_answers) / nullif(sum(n_answers), 0),
                      sum(share_over_30min * n_answers) / nullif(sum(n_answers), 0)
               FROM dns_ttl_summary WHERE run_id = ANY(%s) GROUP BY qtype ORDER BY qtype""", (runs,)).fetchall()
    ctx.write_csv(["qtype", "answers", "failed", "share_60s", "share_300s", "share_600s", "share_under_60s",
                   "share_over_30min"],
                  [[r[0], r[1], r[2], *[None if v is None else round(float(v), 6) for v in r[3:]]] for r in rows])
    ctx.notes["summary"] = {r[0]: {"answers": r[1], "failed": r[2], "share_300s": r[4] and float(r[4])}
                            for r in rows}


@figure("dns-ecs-scopes", sources=["dns_ecs_scope_distribution", "dns_ecs_summary", "dns_ecs_probe"],
        thesis="Sec 2.4.3")
def ecs_scopes(ctx: FigureContext) -> None:
    """ECS scope prefix lengths announced per client subnet (0 = global scope)."""
    runs = list(ctx.run_ids("dns-ecs"))
    with ctx.db.connect() as conn:
        dist = conn.execute(
            """SELECT subnet::text, scope_prefix, sum(n)::int FROM dns_ecs_scope_distribution
               WHERE run_id = ANY(%s) GROUP BY 1, 2 ORDER BY 1, 2""", (runs,)).fetchall()
        summ = conn.execute(
            """SELECT subnet::text, sum(n_probes)::int, sum(n_answers)::int, sum(n_with_ecs)::int,
                      sum(share_global * n_with_ecs) / nullif(sum(n_with_ecs), 0)
               FROM dns_ecs_summary WHERE run_id = ANY(%s) GROUP BY 1 ORDER BY 1""", (runs,)).fetchall()
    totals = {s[0]: s[3] for s in summ}
    subnets = [s[0] for s in summ]
    scopes = sorted({d[1] for d in dist})
    fig, ax = new_figure("scope prefix length [bits]", "share of answers with ECS")
    width = 0.8 / max(1, len(subnets))
    for i, sn in enumerate(subnets):
        xs = [j + i * width for j in range(len(scopes))]
        ys = [next((d[2] for d in dist if d[0] == sn and d[1] == sc), 0) / max(1, totals[sn]) for sc in scopes]
        ax.bar(xs, ys, width=width, label=f"client {sn}")
    ax.set_xticks([j + 0.4 - width / 2 for j in range(len(scopes))], [f"/{s}" for s in scopes])
    ax.set_ylim(0, 1.02)
    ax.legend(loc="upper right")
    src = ("SELECT scope_prefix AS value FROM dns_ecs_probe WHERE run_id = ANY(%s) AND outcome = 'answer'"
           " AND scope_prefix IS NOT NULL")
    with ctx.db.connect() as conn:
        s2324 = conn.execute(sql.SQL("SELECT 100.0 * count(*) FILTER (WHERE value IN (23, 24)) / nullif(count(*), 0)"
                                     " FROM ({}) s").format(sql.SQL(src)), (runs,)).fetchone()[0]
    thesis_overlay.apply(ctx, ax, source=src, params=(runs,),
                         ours={"share_scope_23_24": None if s2324 is None else float(s2324)},
                         position=lambda r: ("marker", scopes.index(0) + 0.4 - width / 2, r.value / 100)
                         if r.stat == "share_eq" and r.x == 0 and 0 in scopes else None)
    ctx.save(fig)
    rows = [[d[0], d[1], d[2], round(d[2] / totals[d[0]], 6) if totals.get(d[0]) else None] for d in dist]
    ctx.write_csv(["subnet", "scope_prefix", "answers", "share"], rows)
    ctx.write_csv(["subnet", "probes", "answers", "with_ecs", "share_global"],
                  [[s[0], s[1], s[2], s[3], None if s[4] is None else round(float(s[4]), 6)] for s in summ],
                  suffix="-summary")
    ctx.notes["share_global"] = {s[0]: s[4] and float(s[4]) for s in summ}
