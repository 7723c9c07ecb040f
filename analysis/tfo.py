"""TFO figures from the database (views of schema/0002_tfo.sql): thesis Table 3.1,
Fig 3.2 and Fig 3.3."""
from __future__ import annotations

from . import thesis_overlay
from .figures import FigureContext, figure
from .style import new_figure
from .thesis_reference import for_figure

CUT_LABELS = {10: "Top 10", 100: "Top 100", 1000: "Top 1K", 10000: "Top 10K", 100000: "Top 100K",
              1000000: "Top 1M"}


@figure("tfo-support-table", sources=["tfo_probe", "tfo_support_by_cut"], thesis="Table 3.1")
def support_table(ctx: FigureContext) -> None:
    """Share of hostnames with TFO support per top-list cut (cuts capped at the list size, n per cut)."""
    runs = ctx.run_ids("tfo")
    with ctx.db.connect() as conn:
        rows = conn.execute(
            "SELECT cut, sum(hostnames)::int, sum(resolution_failed)::int, sum(responded)::int, sum(silent)::int,"
            " sum(tfo)::int FROM tfo_support_by_cut WHERE run_id = ANY(%s) GROUP BY cut ORDER BY cut",
            (list(runs),)).fetchall()
        listed = conn.execute("SELECT max(rank) FROM tfo_probe WHERE run_id = ANY(%s) AND round <= 1",
                              (list(runs),)).fetchone()[0] or 0
    thesis = {int(r.x): r for r in for_figure(ctx.name)}   # Table 3.1 by cut
    table, cuts = [], []
    for c, n, rf, resp, sil, t in capped_cuts(rows, listed):
        label = CUT_LABELS[c] if c <= listed else f"all {listed}"
        # the thesis's share applies only to a real cut (ranks 1..c all in the list)
        ref = thesis.get(c) if c <= listed else None
        table.append((label, min(c, listed), n, rf, resp, sil, t, round(100.0 * t / n, 1) if n else 0.0,
                      ref.value if ref else None))
        cuts.append(c if c <= listed else None)
    ctx.write_csv(["top_list", "cut_rank", "hostnames", "resolution_failed", "responded", "silent", "tfo",
                   "tfo_share_percent", "thesis_tfo_share_percent"], table)
    fig, ax = new_figure("top list (ranks 1..cut; n = hostnames probed)", "hostnames with TFO support [%]")
    ax.bar([f"{r[0]}\n(n={r[2]})" for r in table], [r[7] for r in table], color="#4477aa")
    for i, r in enumerate(table):
        ax.annotate(f"{r[7]:.1f}% ({r[6]}/{r[2]})", (i, r[7]), ha="center", va="bottom", fontsize=8)
    ax.set_ylim(0, 105)
    for r in table:
        ctx.sample(r[2], f"hostnames in {r[0]}")
    thesis_overlay.apply(ctx, ax, ours={f"tfo_share_top_{c}": r[7] for c, r in zip(cuts, table) if c},
                         position=lambda ref: ("marker", cuts.index(int(ref.x)), ref.value)
                         if int(ref.x) in cuts else None)
    ctx.save(fig)
    ctx.notes["rows"] = table


def capped_cuts(rows, listed: int):
    """The rows of cuts smaller than the list, plus the first cut that holds the whole list
    (larger cuts repeat it): a list of 7 names gives one row, not six identical ones."""
    out = []
    for r in rows:
        out.append(r)
        if r[0] >= listed:
            break
    return out


#: Figs 3.2/3.3 also read a campaign of `scan tfo` rounds (one run with rounds,
#: docs/campaign.md) when --run names it; the default stays the latest tfo-lb run
CAMPAIGN_KINDS = ("tfo",)


@figure("tfo-addresses-per-host", sources=["tfo_probe", "tfo_lb_host"], thesis="Fig 3.2")
def addresses_per_host(ctx: FigureContext) -> None:
    """Share of hostnames always supporting TFO over the number of observed server addresses."""
    runs = ctx.run_ids("tfo-lb", given_kinds=CAMPAIGN_KINDS)
    with ctx.db.connect() as conn:
        # one pass over the view (a month of surveys is ~100M rows: bench/month.py); the
        # histogram, the classes and the mean all come from (class, addresses) counts
        counts = conn.execute("SELECT tfo_class, addresses, count(*)::int FROM tfo_lb_host WHERE run_id = ANY(%s)"
                              " GROUP BY 1, 2 ORDER BY 1, 2", (list(runs),)).fetchall()
    always = [(a, n) for c, a, n in counts if c == "always"]
    n_always = sum(n for _, n in always)
    rows = [(a, n, n / n_always) for a, n in always]
    by_class: dict[str, int] = {}
    for c, _, n in counts:
        by_class[c] = by_class.get(c, 0) + n
    classes = sorted(by_class.items())
    mean = sum(a * n for a, n in always) / n_always if n_always else None
    ctx.write_csv(["addresses", "hostnames", "share"], [(a, n, round(s, 6)) for a, n, s in rows])
    ctx.write_csv(["tfo_class", "hostnames"], classes, suffix="-classes")
    fig, ax = new_figure("distinct server IP addresses per hostname", "share of hostnames [%]")
    ax.bar([str(a) for a, _, _ in rows], [100 * s for _, _, s in rows], color="#4477aa")
    ax.set_title(f"hostnames always supporting TFO; mean {mean or 0:.2f} addresses per hostname", fontsize=8)
    total = sum(n for _, n, _ in rows)
    cls = dict(classes)
    thesis_overlay.apply(ctx, ax, ours={
        "share_several_addresses": 100.0 * sum(n for a, n, _ in rows if a >= 2) / total if total else None,
        "mean_addresses": mean, "n_always_tfo": cls.get("always"),
        "share_always_tfo": 100.0 * cls.get("always", 0) / sum(cls.values()) if cls else None},
        position=lambda ref: None)
    ctx.save(fig)
    ctx.notes.update(mean_addresses=mean, classes=dict(classes))


@figure("tfo-lb-failure-rate", sources=["tfo_probe", "tfo_lb_new_address"], thesis="Fig 3.3")
def lb_failure_rate(ctx: FigureContext) -> None:
    """Share of connections that go to a server address not seen before (cached cookie unusable)."""
    runs = ctx.run_ids("tfo-lb", given_kinds=CAMPAIGN_KINDS)
    with ctx.db.connect() as conn:
        rows = conn.execute(
            "SELECT connection, sum(hostnames)::int, sum(new_address)::int FROM tfo_lb_new_address"
            " WHERE run_id = ANY(%s) GROUP BY connection ORDER BY connection", (list(runs),)).fetchall()
    table = [(k, n, m, round(m / n, 6) if n else 0.0) for k, n, m in rows]
    ctx.write_csv(["connection", "hostnames", "new_address", "failure_rate"], table)
    fig, ax = new_figure("connection to the hostname", "failure rate of abbreviated handshakes [%]")
    ax.plot([r[0] for r in table], [100 * r[3] for r in table], marker="o", color="#4477aa")
    ax.set_xticks([r[0] for r in table] or [2])
    thesis_overlay.apply(ctx, ax, ours={f"failure_connection_{r[0]}": 100 * r[3] for r in table},
                         position=lambda ref: ("marker", ref.x, ref.value))
    ctx.save(fig)
    ctx.notes["rows"] = table
