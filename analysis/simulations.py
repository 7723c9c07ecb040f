"""Figures and tables of the simulation models (``netsurvey plot NAME``). Analytic models
(Fig 8.3, Table 9.2) need no measurements; the others read the documented ``model_*``
views and say so (UsageError) when the database holds no such data."""
from __future__ import annotations

from .figures import FigureContext, figure
from .models import inputs
from .style import new_figure, step_cdf


def _view_runs(ctx: FigureContext, view: str) -> None:
    with ctx.db.connect() as conn:
        cols = [d.name for d in conn.execute(f"SELECT * FROM {view} LIMIT 0").description]
        if "scan_run_id" in cols:
            ctx.record_runs(r[0] for r in conn.execute(f"SELECT DISTINCT scan_run_id FROM {view}").fetchall()
                            if r[0] is not None)


@figure("oob-tokens", sources=[], thesis="Fig 8.3")
def oob_tokens_fig(ctx: FigureContext) -> None:
    """Delay overhead of QUIC's initial handshake over RTT: Retry vs out-of-band token (eq. 8.1/8.2, t_proc 40 ms)."""
    from .models.quic import OobOptions, oob_tokens

    r = oob_tokens(OobOptions())
    rows = r["delay_overhead"]
    ctx.write_csv(["rtt_ms", "default_ms", "proposal_ms"], [(x["rtt_ms"], x["default_ms"], x["proposal_ms"]) for x in rows])
    fig, ax = new_figure("round-trip time [ms]", "delay overhead of the initial handshake [ms]")
    ax.plot([x["rtt_ms"] for x in rows], [x["default_ms"] for x in rows], "r:", label="status quo (Retry)")
    ax.plot([x["rtt_ms"] for x in rows], [x["proposal_ms"] for x in rows], "g--", label="out-of-band token")
    ax.legend()
    ctx.save(fig)
    ctx.sample(len(rows), "RTT values (analytic model)")
    ctx.compare("proposal / default at RTT 90 ms", "60%", f"{r['at_web_rtt']['proposal_share_of_default']:.1%}")
    ctx.compare("web browsing: delay saved until the last connection (4.04 × 90 ms)", 363.6,
                round(r["web_browsing"]["delay_saved_until_last_connection_ms"], 2), "ms")


@figure("quicsocks-table", sources=[], thesis="Table 9.2")
def quicsocks_table(ctx: FigureContext) -> None:
    """Latency to resolve and connect over US LTE (RTT_DNS = RTT_Server = 30 ms, RTT_direct = 60 ms)."""
    from .models.quic import RttTriplet, quicsocks_latency

    lat = quicsocks_latency(RttTriplet("LTE", 30, 30, 60))
    ctx.write_csv(["stateless_retry", "status_quo_ms", "proposal_ms"],
                  [("without", lat["status_quo"], lat["proposal"]), ("with", lat["status_quo_retry"], lat["proposal_retry"])])
    fig, ax = new_figure("stateless retry", "latency incl. DNS [ms]")
    xs = [0, 1]
    ax.bar([x - 0.2 for x in xs], [lat["status_quo"], lat["status_quo_retry"]], 0.4, label="status quo")
    ax.bar([x + 0.2 for x in xs], [lat["proposal"], lat["proposal_retry"]], 0.4, label="QuicSocks")
    ax.set_xticks(xs, ["without", "with"])
    ax.legend()
    ctx.save(fig)
    ctx.sample(1, "example client (analytic)")
    for key, pub in (("status_quo", 90), ("proposal", 60), ("status_quo_retry", 150), ("proposal_retry", 90)):
        ctx.compare(key.replace("_", " "), pub, lat[key], "ms")


@figure("quicsocks-cdf", sources=["model_rtt_triplet"], thesis="Fig 9.7")
def quicsocks_cdf(ctx: FigureContext) -> None:
    """CDF of clients over the latency to connect, status quo vs QuicSocks, with and without Retry."""
    from .models.quic import quicsocks

    trip, runs = inputs.triplets_db(ctx.db, ctx.runs)
    ctx.record_runs(runs)
    r = quicsocks(trip)
    fig, ax = new_figure("latency to establish the connection incl. DNS [ms]", "share of clients")
    styles = {"status_quo_retry": "-", "proposal_retry": "--", "status_quo": "-.", "proposal": ":"}
    n = len(trip)
    for k, st in styles.items():
        vals = r["cdf_ms"][k]
        step_cdf(ax, vals, [(i + 1) / n for i in range(n)], label=k.replace("_", " "), linestyle=st)
    ax.legend()
    ctx.save(fig)
    ctx.write_csv(["client", "status_quo_ms", "proposal_ms", "status_quo_retry_ms", "proposal_retry_ms"],
                  [(p["client"], p["status_quo"], p["proposal"], p["status_quo_retry"], p["proposal_retry"])
                   for p in r["per_client"]])
    ctx.sample(n, "clients")
    s30 = next(x for x in r["share_saving_at_least_ms"] if x["ms"] == 30)["no_retry"]
    s15 = next(x for x in r["share_saving_at_least_ms"] if x["ms"] == 15)["no_retry"]
    ctx.compare("clients saving >= 30 ms without Retry", "~10%", f"{s30:.1%}")
    ctx.compare("clients saving >= 15 ms without Retry", "24.3%", f"{s15:.1%}")


@figure("tfo-revisits-table", sources=["model_tfo_revisit_failure"], thesis="Table 3.6")
def tfo_revisits_table(ctx: FigureContext) -> None:
    """Probabilities to save 0/1/2 RTT and mean delay saved per revisit, TFO/TLS vs TCP FOP/TLS (RTT 60 ms)."""
    from .models.tfo_revisits import tfo_revisits

    rates, runs = inputs.failure_rates_db(ctx.db, ctx.runs)
    ctx.record_runs(runs)
    r = tfo_revisits(rates)
    rows = [(x["revisit"], x["failure_rate"], x["tfo_tls"]["p_save_0_rtt"], x["tfo_tls"]["p_save_1_rtt"],
             x["tfo_tls"]["p_save_2_rtt"], x["tfo_tls"]["mean_delay_saved_ms"], x["tcp_fop_tls"]["mean_delay_saved_ms"])
            for x in r["revisits"]]
    ctx.write_csv(["revisit", "failure_rate", "tfo_p0", "tfo_p1", "tfo_p2", "tfo_saved_ms", "fop_saved_ms"], rows)
    fig, ax = new_figure("revisit", "mean delay saved [ms]")
    ax.plot([x[0] for x in rows], [x[5] for x in rows], "o-", label="TFO/TLS")
    ax.plot([x[0] for x in rows], [x[6] for x in rows], "s--", label="TCP FOP/TLS")
    ax.legend()
    ctx.save(fig)
    ctx.sample(len(rows), "revisits")
    for k, pub in zip(range(3), (36.4, 45.5, 63.1)):
        if k < len(rows):
            ctx.compare(f"TFO/TLS mean delay saved, revisit {k + 1}", pub, round(rows[k][5], 1), "ms")


def _sites_or_missing(ctx: FigureContext, trust: str = "union"):
    sites = inputs.sites_db(ctx.db, trust)
    _view_runs(ctx, "model_domain_tree_edge")
    return sites


def _share_plot(ctx, xlabel, dists: dict, suffix: str, cut: int = 25) -> None:
    fig, ax = new_figure(xlabel, "share of sites")
    for (label, dist), marker in zip(dists.items(), ("o", "s")):
        pts = [d for d in dist if d["value"] <= cut]
        ax.plot([d["value"] for d in pts], [d["share"] for d in pts], marker, label=label.replace("_", " "))
    ax.legend()
    ctx.save(fig, suffix)
    ctx.write_csv(["series", "value", "sites", "share"],
                  [(lab, d["value"], d["sites"], d["share"]) for lab, dist in dists.items() for d in dist], suffix)


#: Table 5.6 (thesis line 1656-1658): mean full TLS handshakes to different hostnames to
#: download two websites of a top list (trust from TLS certificates only)
TABLE_5_6 = {"Alexa Top 100": (25.98, 25.34, 9.30), "Alexa Top 1K": (41.78, 40.04, 18.58)}
#: the shares of full handshakes converted the text states for them (line 1654): per-hostname
#: resumption, resumption across hostnames
TABLE_5_6_CONVERTED = {"Alexa Top 100": ("2.5%", "64.2%"), "Alexa Top 1K": ("4.1%", "55.5%")}


@figure("tls-across-hostnames", sources=["model_domain_tree_edge", "model_trust_pair"],
        thesis="Tables 5.4, 5.5, 5.6, Fig 5.5, 5.6")
def tls_across_fig(ctx: FigureContext) -> None:
    """Full TLS handshakes per site and longest path of full handshakes, default vs resumption
    across hostnames (Tables 5.4, 5.5, Fig 5.5, 5.6); NAME-5_6: two sites visited one after
    the other, trust from certificates only (Table 5.6), ours beside the thesis's rows."""
    from .models.trust import tls_across_hostnames, two_site_visits

    r = tls_across_hostnames(_sites_or_missing(ctx), two_sites=False)
    _two_sites_table(ctx, two_site_visits(inputs.sites_db(ctx.db, "san")))
    _share_plot(ctx, "full TLS handshakes to load the site", r["distribution_full_handshakes"], "")
    _share_plot(ctx, "sequential full TLS handshakes (longest path)", r["distribution_longest_path"], "-path")
    m, lp = r["mean_full_handshakes"], r["mean_longest_path_full"]
    ctx.write_csv(["quantity", "no_resumption", "per_hostname_resumption", "across_hostnames"],
                  [("mean full handshakes", m["no_resumption"], m["per_hostname_resumption"], m["across_hostnames"]),
                   ("mean longest path", lp["no_resumption"], lp["per_hostname_resumption"], lp["across_hostnames"])], "-means")
    ctx.sample(r["sites"], "sites")
    ctx.compare("mean full handshakes, default (Table 5.4)", 20.24, round(m["per_hostname_resumption"], 2))
    ctx.compare("mean full handshakes, across hostnames (Table 5.4)", 8.35, round(m["across_hostnames"], 2))
    ctx.compare("mean longest path, default (Table 5.5)", 4.04, round(lp["no_resumption"], 2))
    ctx.compare("mean longest path, across hostnames (Table 5.5)", 2.46, round(lp["across_hostnames"], 2))


def _two_sites_table(ctx: FigureContext, two: dict) -> None:
    """Table 5.6 as NAME-5_6.csv/.tex/.png: our pairs of sites beside the thesis's top lists."""
    head = ["sites_visited", "pairs", "without_tls_resumption", "with_tls_resumption",
            "with_tls_resumption_across_hostnames", "source"]
    rows: list[list] = []
    if two.get("pairs"):
        rows.append(["two of our sites (every pair)", two["pairs"], round(two["mean_full_no_resumption"], 2),
                     round(two["mean_full_per_hostname"], 2), round(two["mean_full_across"], 2), "ours"])
    rows += [[k, None, *v, "thesis (line 1656-1658)"] for k, v in TABLE_5_6.items()]
    ctx.write_csv(head, rows, "-5_6")
    from .figures import latex_table

    tex = ctx.out_dir / f"{ctx.name}-5_6.tex"
    tex.write_text(latex_table(head, rows))
    ctx.written.append(tex)
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7.5, 0.9 + 0.3 * len(rows)))
    ax.axis("off")
    cells = [["" if c is None else (f"{c:g}" if isinstance(c, float) else str(c)) for c in r] for r in rows]
    t = ax.table(cellText=cells, colLabels=["sites visited", "pairs", "without\nresumption", "with\nresumption",
                                            "resumption across\nhostnames", "source"], loc="center", cellLoc="left")
    t.auto_set_font_size(False)
    t.set_fontsize(7)
    t.auto_set_column_width(list(range(len(head))))
    for j in range(len(head)):
        t[0, j].set_height(t[0, j].get_height() * 2)
    ax.set_title("Table 5.6: mean full TLS handshakes to different hostnames for two websites\n"
                 "(trust relations from TLS certificates only)", fontsize=8)
    ctx.save(fig, "-5_6")
    if two.get("pairs"):
        ctx.sample(two["pairs"], "pairs of sites (Table 5.6)")
        base = two["mean_full_no_resumption"]
        for k, (ph, ac) in TABLE_5_6_CONVERTED.items():
            ctx.compare(f"two sites: full handshakes converted by per-hostname resumption (Table 5.6, {k}; "
                        "line 1654)", ph, f"{1 - two['mean_full_per_hostname'] / base:.1%}" if base else None)
            ctx.compare(f"two sites: full handshakes converted by resumption across hostnames (Table 5.6, {k}; "
                        "line 1654)", ac, f"{1 - two['mean_full_across'] / base:.1%}" if base else None)


@figure("shared-address-validation", sources=["model_domain_tree_edge", "model_trust_pair"], thesis="Fig 7.3, 7.4")
def shared_validation_fig(ctx: FigureContext) -> None:
    """CDF of sites over initial QUIC handshakes with Retry, status quo vs shared address validation."""
    from .models.trust import shared_address_validation

    r = shared_address_validation(_sites_or_missing(ctx))
    for key, suffix, xl in (("distribution_retry_handshakes", "", "initial handshakes with Retry"),
                            ("distribution_longest_path", "-path", "sequential initial handshakes with Retry")):
        fig, ax = new_figure(xl, "CDF of sites")
        for (lab, dist), ls in zip(r[key].items(), ("r--", "g-")):
            ax.step([d["value"] for d in dist], [d["cdf"] for d in dist], ls, where="post", label=lab.replace("_", " "))
        ax.set_ylim(0, 1.02)
        ax.legend()
        ctx.save(fig, suffix)
        ctx.write_csv(["series", "value", "sites", "cdf"], [(lab, d["value"], d["sites"], d["cdf"])
                                                            for lab, dist in r[key].items() for d in dist], suffix)
    ctx.sample(r["sites"], "sites")
    ctx.compare("mean connections to different hostnames", 20.24, round(r["mean_retry_handshakes"]["status_quo"], 2))


@figure("prolongation", sources=["model_dns_query"], thesis="Fig 4.11, 4.12, 4.13")
def prolongation_fig(ctx: FigureContext) -> None:
    """Longest consecutive tracking period, permanently trackable users and revisit intervals over the lifetime."""
    from .models.prolongation import DB_VIEW, prolongation

    inputs.check_views(ctx.db, "prolongation")
    _view_runs(ctx, DB_VIEW)
    r = prolongation(ctx.db, DB_VIEW)
    L = r["lifetimes"]
    hours = [x["lifetime_s"] / 3600 for x in L]
    ctx.write_csv(["lifetime_s", "lcp_median_s", "lcp_mean_s", "share_permanently_trackable", "share_revisits_within"],
                  [(x["lifetime_s"], x["lcp_median_s"], x["lcp_mean_s"], x["share_permanently_trackable"],
                    x["share_revisits_within_lifetime"]) for x in L])
    fig, ax = new_figure("session resumption lifetime [h]", "longest consecutive tracking period [days]", logx=True)
    ax.plot(hours, [x["lcp_median_s"] / 86400 for x in L], "b:", label="median user")
    ax.plot(hours, [x["lcp_mean_s"] / 86400 for x in L], "g--", label="mean user")
    ax.legend()
    ctx.save(fig, "-4.11")
    fig, ax = new_figure("session resumption lifetime [h]", "share of users permanently trackable", logx=True)
    ax.step(hours, [x["share_permanently_trackable"] for x in L], where="post")
    ax.set_ylim(0, 1.02)
    ctx.save(fig, "-4.12")
    c = r["revisit_interval_cdf"]
    fig, ax = new_figure("time between two visits [h]", "CDF of revisits", logx=True)
    step_cdf(ax, [max(v, 1.0) / 3600 for v in c["values_s"]], c["probs"])
    ctx.save(fig, "-4.13")
    ctx.write_csv(["interval_s", "cdf"], list(zip(c["values_s"], c["probs"])), "-4.13")
    ctx.sample(r["users"], "users")
    ctx.sample(r["revisits"], "revisits")
    by = {x["lifetime_s"]: x for x in L}
    if 7 * 86400 in by:
        ctx.compare("users permanently trackable at 7 days", "65%", f"{by[7 * 86400]['share_permanently_trackable']:.1%}")
    if 86400 in by:
        ctx.compare("users permanently trackable at 24 h", "1.3%", f"{by[86400]['share_permanently_trackable']:.1%}")
    if 300 in by:
        ctx.compare("revisits within 5 min", "17.7%", f"{by[300]['share_revisits_within_lifetime']:.1%}")


@figure("pageload-validation", sources=["model_page_visit", "model_page_resource", "model_page_server"], thesis="BLAST Fig 5")
def pageload_validation(ctx: FigureContext) -> None:
    """Simulated vs recorded page load times of the logger's visits (Pearson r)."""
    from .models.pageload import pageload

    pages = inputs.pages_db(ctx.db, ctx.runs)
    _view_runs(ctx, "model_page_visit")
    r = pageload(pages, feature_steps=False)
    pts = [(p["recorded_plt_s"], p["plt_s"]) for p in r["per_page"] if p["recorded_plt_s"] is not None]
    ctx.write_csv(["page", "recorded_plt_s", "simulated_plt_s"],
                  [(p["page"], p["recorded_plt_s"], p["plt_s"]) for p in r["per_page"]])
    fig, ax = new_figure("recorded page load time [s]", "simulated page load time [s]")
    ax.scatter([a for a, _ in pts], [b for _, b in pts], s=8)
    ctx.save(fig)
    ctx.sample(len(pages), "page visits")
    ctx.compare("Pearson r simulated vs recorded", 0.63, r["validation"]["pearson_r"])
