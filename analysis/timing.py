"""Handshake-timing tables (issue 25) from the views of schema/0030_handshake_timing.sql, with
the thesis's published values beside ours: Tables 3.5, 5.1, 5.2 and 5.7 of Sy 2019
(/work/shared/seeds/004_3801537972db3902.txt: Table 3.5 at its caption "Mean duration to
establish a connection ... TCP/TLS, TFO/TLS, and TCP FOP/TLS", Table 5.1 "Mean duration to
establish a TLS connection via different handshake modes", Table 5.2 "Mean CPU time ...",
Table 5.7 "Websites with TLS 1.3-support in Alexa Top lists").

The thesis measured at network latencies of ~0.3, 50, 100 and 150 ms (its RTT: a TLS 1.2 full
handshake plus a short transfer took 4 x 50 ms + 38 ms at 50 ms); ours are compared with the
thesis row nearest to the run's configured RTT (``link_rtt_ms``), and the comparison says
which row it used.
"""
from __future__ import annotations

from .figures import FigureContext, figure
from .style import new_figure

#: Table 3.5 (ms, mean): latency -> (TCP/TLS initial, TCP/TLS resumed, TFO/TLS initial, TFO/TLS resumed)
THESIS_3_5 = {0.3: (28.9, 20.2, 29.9, 22.3), 50: (189.8, 132.6, 190.0, 83.7), 100: (340.2, 233.1, 340.3, 135.1),
              150: (490.3, 332.9, 490.7, 185.3)}
#: Table 5.1 (ms, mean): latency -> method -> duration (handshake and a short transfer)
THESIS_5_1 = {0.3: {"tls12_full": 26.66, "tls12_resumed": 2.69, "tls13_full": 29.17, "tls13_psk": 6.34, "tls13_0rtt": 6.57},
              50: {"tls12_full": 237.86, "tls12_resumed": 154.20, "tls13_full": 190.06, "tls13_psk": 160.12,
                   "tls13_0rtt": 109.61},
              100: {"tls12_full": 439.08, "tls12_resumed": 304.50, "tls13_full": 340.81, "tls13_psk": 310.27,
                    "tls13_0rtt": 209.72},
              150: {"tls12_full": 639.15, "tls12_resumed": 454.621, "tls13_full": 490.87, "tls13_psk": 460.26,
                    "tls13_0rtt": 309.44}}
#: Table 5.2 (ms CPU, mean): peer -> method -> CPU
THESIS_5_2 = {"server": {"tls12_full": 8.02, "tls12_resumed": 1.33, "tls13_full": 7.84, "tls13_psk": 2.33,
                         "tls13_0rtt": 2.62},
              "client": {"tls12_full": 8.26, "tls12_resumed": 0.76, "tls13_full": 9.22, "tls13_psk": 2.38,
                         "tls13_0rtt": 2.46}}
#: Table 5.7 (% of websites, Alexa): cut -> (TLS 1.3 full, 1-RTT resumption, 0-RTT)
THESIS_5_7 = {10: (10.0, 10.0, 0.0), 100: (9.0, 8.0, 0.0), 1000: (12.7, 11.6, 0.90), 10000: (13.1, 12.6, 0.44),
              100000: (9.2, 8.9, 0.19), 1000000: (8.1, 7.1, 0.05)}
#: our method -> the thesis's column (both TLS 1.2 abbreviated handshakes are its "Resumed")
THESIS_COLUMN = {"tls12_full": "tls12_full", "tls12_id": "tls12_resumed", "tls12_ticket": "tls12_resumed",
                 "tls13_full": "tls13_full", "tls13_psk": "tls13_psk", "tls13_0rtt": "tls13_0rtt"}
ORDER = ["tls12_full", "tls12_id", "tls12_ticket", "tls13_full", "tls13_psk", "tls13_0rtt", "quic_full",
         "quic_resumed", "quic_0rtt"]


def _nearest(latency_ms) -> float:
    return min(THESIS_5_1, key=lambda k: abs(k - (latency_ms or 0.0)))


@figure("handshake-tfo-table", sources=["handshake_timing_table_3_5"], thesis="Table 3.5")
def tfo_table(ctx: FigureContext) -> None:
    """TCP vs TFO: mean time to the first byte and the saving of a cookie, beside the thesis."""
    runs = ctx.run_ids("handshake-timing")
    with ctx.db.connect() as conn:
        rows = conn.execute("SELECT run_id, host(address), link_rtt_ms, tcp_ttfb_mean_ms, tcp_ttfb_stddev_ms, "
                            "tfo_ttfb_mean_ms, tfo_ttfb_stddev_ms, tfo_saving_median_ms FROM handshake_timing_table_3_5 "
                            "WHERE run_id = ANY(%s) ORDER BY run_id, address", (list(runs),)).fetchall()
    table = []
    for run, addr, rtt, tcp, tcp_sd, tfo, tfo_sd, saving in rows:
        lat = _nearest(rtt)
        t = THESIS_3_5[lat]
        thesis_saving = round(t[1] - t[3], 1)   # TCP/TLS resumed - TFO/TLS resumed: the TFO round trip
        table.append((run, addr, rtt, round(tcp, 2), round(tcp_sd or 0, 2), round(tfo, 2), round(tfo_sd or 0, 2),
                      round(saving, 2), lat, thesis_saving))
        ctx.compare(f"TFO saving at {rtt} ms RTT (thesis row {lat} ms)", thesis_saving, round(saving, 2), "ms")
    ctx.write_csv(["run_id", "address", "link_rtt_ms", "tcp_ttfb_mean_ms", "tcp_ttfb_stddev_ms", "tfo_ttfb_mean_ms",
                   "tfo_ttfb_stddev_ms", "tfo_saving_median_ms", "thesis_latency_ms", "thesis_tfo_saving_ms"], table)
    fig, ax = new_figure("", "TFO saving [ms]")
    ax.bar([f"ours {r[2]} ms\n{r[1]}" for r in table] + [f"thesis {r[8]} ms" for r in table[:1]],
           [r[7] for r in table] + [r[9] for r in table[:1]], color=["#4477aa"] * len(table) + ["#bbbbbb"])
    ctx.sample(len(table), "targets")
    ctx.save(fig)
    ctx.notes["rows"] = table


@figure("handshake-tls-delay-table", sources=["handshake_timing_table_5_1"], thesis="Table 5.1")
def tls_delay_table(ctx: FigureContext) -> None:
    """Mean time to the first byte per TLS / QUIC handshake mode, beside the thesis's Table 5.1."""
    runs = ctx.run_ids("handshake-timing")
    with ctx.db.connect() as conn:
        rows = conn.execute("SELECT run_id, host(address), method, link_rtt_ms, samples_ok, ttfb_mean_ms, ttfb_stddev_ms, "
                            "saving_vs_full_median_ms FROM handshake_timing_table_5_1 WHERE run_id = ANY(%s)",
                            (list(runs),)).fetchall()
    rows.sort(key=lambda r: (r[0], r[1], ORDER.index(r[2]) if r[2] in ORDER else 99))
    table = []
    for run, addr, m, rtt, n, mean, sd, saving in rows:
        lat = _nearest(rtt)
        thesis = THESIS_5_1[lat].get(THESIS_COLUMN.get(m, ""))
        table.append((run, addr, m, rtt, n, round(mean, 2), round(sd or 0, 2),
                      None if saving is None else round(saving, 2), lat, thesis))
        if thesis is not None:
            ctx.compare(f"{m} at {rtt} ms RTT (thesis row {lat} ms)", thesis, round(mean, 2), "ms")
    ctx.write_csv(["run_id", "address", "method", "link_rtt_ms", "samples", "ttfb_mean_ms", "ttfb_stddev_ms",
                   "saving_vs_full_median_ms", "thesis_latency_ms", "thesis_mean_ms"], table)
    fig, ax = new_figure("handshake mode", "time to first byte [ms]")
    xs = list(range(len(table)))
    ax.bar([x - 0.2 for x in xs], [r[5] for r in table], width=0.4, label="ours", color="#4477aa")
    ax.bar([x + 0.2 for x in xs], [r[9] or 0 for r in table], width=0.4, label="thesis (nearest latency)",
           color="#bbbbbb")
    ax.set_xticks(xs, [r[2] for r in table], rotation=45, ha="right")
    ax.legend()
    ctx.sample(sum(r[4] for r in table), "connections")
    ctx.save(fig)
    ctx.notes["rows"] = table


@figure("handshake-tls-cpu-table", sources=["handshake_timing_table_5_2"], thesis="Table 5.2")
def tls_cpu_table(ctx: FigureContext) -> None:
    """Mean CPU per connection of client and (our own) server per handshake mode, beside Table 5.2."""
    runs = ctx.run_ids("handshake-timing")
    with ctx.db.connect() as conn:
        rows = conn.execute("SELECT run_id, host(address), method, samples_ok, client_cpu_mean_ms, server_cpu_mean_ms "
                            "FROM handshake_timing_table_5_2 WHERE run_id = ANY(%s)", (list(runs),)).fetchall()
    rows.sort(key=lambda r: (r[0], r[1], ORDER.index(r[2]) if r[2] in ORDER else 99))
    table = []
    for run, addr, m, n, c, s in rows:
        col = THESIS_COLUMN.get(m)
        tc, ts = (THESIS_5_2["client"][col], THESIS_5_2["server"][col]) if col else (None, None)
        table.append((run, addr, m, n, None if c is None else round(c, 3), None if s is None else round(s, 3), tc, ts))
        if col:
            ctx.compare(f"client CPU {m}", tc, table[-1][4], "ms")
            ctx.compare(f"server CPU {m}", ts, table[-1][5], "ms")
    ctx.write_csv(["run_id", "address", "method", "samples", "client_cpu_mean_ms", "server_cpu_mean_ms",
                   "thesis_client_cpu_ms", "thesis_server_cpu_ms"], table)
    fig, ax = new_figure("handshake mode", "CPU per connection [ms]")
    xs = list(range(len(table)))
    for off, i, label, color in ((-0.3, 4, "client (ours)", "#4477aa"), (-0.1, 5, "server (ours)", "#66ccee"),
                                 (0.1, 6, "client (thesis)", "#bbbbbb"), (0.3, 7, "server (thesis)", "#888888")):
        ax.bar([x + off for x in xs], [r[i] or 0 for r in table], width=0.2, label=label, color=color)
    ax.set_xticks(xs, [r[2] for r in table], rotation=45, ha="right")
    ax.legend()
    ctx.sample(sum(r[3] for r in table), "connections")
    ctx.save(fig)
    ctx.notes["rows"] = table


@figure("handshake-tls13-support-table", sources=["handshake_timing_table_5_7"], thesis="Table 5.7")
def tls13_support_table(ctx: FigureContext) -> None:
    """Share of sites with TLS 1.3, 1-RTT resumption and 0-RTT per top-list cut, beside Table 5.7."""
    runs = ctx.run_ids("handshake-timing")
    with ctx.db.connect() as conn:
        rows = conn.execute("SELECT top_n, sum(sites_probed)::int, sum(tls13_sites)::int, sum(resumption_1rtt_sites)::int,"
                            " sum(zero_rtt_sites)::int FROM handshake_timing_table_5_7 WHERE run_id = ANY(%s)"
                            " GROUP BY top_n ORDER BY top_n", (list(runs),)).fetchall()
    table = []
    for cut, n, t13, r1, z in rows:
        pct = [round(100.0 * x / n, 2) if n else 0.0 for x in (t13, r1, z)]
        th = THESIS_5_7.get(cut, (None, None, None))
        table.append((cut, n, t13, r1, z, *pct, *th))
        for name, ours, thesis in zip(("TLS 1.3 full", "1-RTT resumption", "0-RTT"), pct, th):
            ctx.compare(f"{name} share, top {cut}", thesis, ours, "%")
    ctx.write_csv(["top_n", "sites_probed", "tls13_sites", "resumption_1rtt_sites", "zero_rtt_sites", "tls13_percent",
                   "resumption_1rtt_percent", "zero_rtt_percent", "thesis_tls13_percent",
                   "thesis_resumption_1rtt_percent", "thesis_zero_rtt_percent"], table)
    fig, ax = new_figure("top list cut", "sites [%]")
    xs = list(range(len(table)))
    for off, i, label, color in ((-0.25, 5, "TLS 1.3 (ours)", "#4477aa"), (0.0, 6, "1-RTT SR (ours)", "#66ccee"),
                                 (0.25, 7, "0-RTT SR (ours)", "#228833")):
        ax.bar([x + off for x in xs], [r[i] for r in table], width=0.25, label=label, color=color)
    ax.scatter([x - 0.25 for x in xs], [r[8] if r[8] is not None else float("nan") for r in table], color="black",
               marker="_", s=200, label="thesis (Alexa, 2019)")
    ax.set_xticks(xs, [f"top {r[0]}\n(n={r[1]})" for r in table])
    ax.legend()
    ctx.sample(table[-1][1] if table else 0, "sites")
    ctx.save(fig)
    ctx.notes["rows"] = table
