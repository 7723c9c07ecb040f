"""What a browser saves on a revisit with state (issue 25, item 4), from the view
browser_revisit_saving (schema/0035_browser_revisit.sql): per browser and transport, the
median time to first byte of first visits and of revisits on the timing testbed, and the
saving in ms and in round trips of the delay profile the run used.

The thesis has no per-browser revisit table; its Table 5.1 times handshakes of its own
client. What a round trip is worth here is set by the profile: TLS 1.2 abbreviated saves one
(RFC 5246), TLS 1.3 PSK none unless the browser sends early data (RFC 8446 sec. 2.3), QUIC
0-RTT one (RFC 9001 sec. 4.6.1); first visits also pay the browser's certificate
verification, which resumption skips.
"""
from __future__ import annotations

from .figures import FigureContext, figure
from .style import new_figure

TRANSPORTS = ("tls12", "tls13", "quic")


@figure("browser-revisit-savings", sources=["browser_revisit_saving"],
        description="Time to first byte a browser saves on a revisit with TLS / QUIC state, per browser")
def revisit_savings(ctx: FigureContext) -> None:
    """Time to first byte a browser saves on a revisit with TLS / QUIC state, per browser."""
    runs = ctx.run_ids("browser-revisit")
    with ctx.db.connect() as conn:
        rows = conn.execute(
            "SELECT run_id, browser, browser_version, transport, link_profile, link_rtt_ms, pairs, revisits_resumed, "
            "revisits_early_data, first_ttfb_median_ms, revisit_ttfb_median_ms, saving_median_ms, saving_median_rtts, "
            "connect_saving_median_ms FROM browser_revisit_saving WHERE run_id = ANY(%s) ORDER BY run_id, browser, "
            "array_position(%s::text[], transport)", (list(runs), list(TRANSPORTS))).fetchall()
    table = [(run, b, v, t, prof, rtt, n, res, early, round(f, 1), round(r, 1), round(s, 1),
              None if srtt is None else round(srtt, 2), None if cs is None else round(cs, 1))
             for run, b, v, t, prof, rtt, n, res, early, f, r, s, srtt, cs in rows]
    ctx.write_csv(["run_id", "browser", "browser_version", "transport", "link_profile", "link_rtt_ms", "pairs",
                   "revisits_resumed", "revisits_early_data", "first_ttfb_median_ms", "revisit_ttfb_median_ms",
                   "saving_median_ms", "saving_median_rtts", "connect_saving_median_ms"], table)
    fig, ax = new_figure("browser / transport", "time to first byte, median [ms]")
    xs = list(range(len(table)))
    ax.bar([x - 0.2 for x in xs], [r[9] for r in table], width=0.4, label="first visit", color="#bbbbbb")
    ax.bar([x + 0.2 for x in xs], [r[10] for r in table], width=0.4, label="revisit with state", color="#4477aa")
    ax.set_xticks(xs, [f"{r[1]}\n{r[3]}" for r in table])
    rtts = sorted({r[5] for r in table if r[5]})
    for rtt in rtts:
        ax.axhline(3 * rtt, color="#999999", linewidth=0.6, linestyle=":")
    ax.legend(title=", ".join(f"{p} ({rtt:g} ms RTT)" for p, rtt in sorted({(r[4], r[5] or 0) for r in table})))
    ctx.sample(sum(r[6] for r in table), "first/revisit pairs")
    ctx.save(fig)
    ctx.notes["rows"] = table
