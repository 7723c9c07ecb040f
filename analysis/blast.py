"""BLAST's analyses (issue 25, item 5) from the page-load logger's stored events and from the
page-load simulator, with the paper's published values beside ours.

Source: Tao Wang, "Designing a Better Browser for Tor with BLAST", NDSS 2020
(/work/shared/seeds/000_6322d17e2de7bf06.txt). The figures there are not in the text
extraction; the values drawn beside ours are the ones its text states, each with its section:

- Fig 2 (sec. III-D2, ``pipeline`` data set): mean page load time 16.4 s (sec. III-D1), of it
  ~5.8 s (36%) queue wait, ~5.8 s server wait, 0.91 s (5.6%) transfer; mean resource load
  time 2.85 s, of it 1.56 s (55%) queue wait and 0.079 s (2.7%) transfer.
- Fig 3 (sec. III-D2): queue wait per resource - around a third did not wait, more than half
  waited > 0.5 s, 30% waited > 1 s.
- Fig 4 / sec. IV-C3 (``http2``): server wait 0.99 s and transfer 0.15 s per resource overall;
  resources sent on an HTTP/2 connection already loading others (5,651): 1.38 s and 0.40 s.
- Fig 6 (sec. V-D): simulated mean page load time 18.0 s with HTTP/2, 7.1 s with every
  feature (-61%); the prefetching database alone -35%; TFO helped 18% of connections.
- Fig 8 (sec. VI-B): RTT 0.8 s and 164 kB/s per resource; doubling the bandwidth 18.0 s ->
  17.0 s (-5.6%); halving the RTT halves the page load time (linear).

Our data are testbed page loads (no Tor, link delay of the active profile), so absolute
times differ by design: shares and relative changes are what compare.
"""
from __future__ import annotations

import math
from dataclasses import replace
from statistics import mean, median

from psycopg import sql

from .engine import cdf
from .figures import FigureContext, figure

CATEGORIES = ["queue_ms", "connection_ms", "server_wait_ms", "transfer_ms"]
LABELS = {"queue_ms": "queue wait", "connection_ms": "connection + TLS", "server_wait_ms": "server wait",
          "transfer_ms": "transfer", "uncategorized_ms": "non-categorized", "unstated": "not stated separately"}
COLORS = {"queue_ms": "#4477aa", "connection_ms": "#ee6677", "server_wait_ms": "#228833", "transfer_ms": "#ccbb44",
          "uncategorized_ms": "#bbbbbb", "unstated": "#dddddd"}

#: BLAST Fig 2 (pipeline), seconds; None = not stated separately in the text
BLAST_FIG2_PAGE_S = {"total": 16.4, "queue_ms": 5.8, "server_wait_ms": 5.8, "transfer_ms": 0.91}
BLAST_FIG2_RESOURCE_S = {"total": 2.85, "queue_ms": 1.56, "transfer_ms": 0.079}
#: BLAST sec. IV-C3 (http2): per-resource means, seconds
BLAST_H2_ALL_S = {"server_wait_ms": 0.99, "transfer_ms": 0.15}
BLAST_H2_BUSY_S = {"server_wait_ms": 1.38, "transfer_ms": 0.40, "n": 5651}
#: BLAST's simulator parameters (sec. V-B): RTT and per-resource bandwidth of http2
BLAST_RTT_S = 0.8
BLAST_BANDWIDTH_BPS = 164_000.0


def _runs(ctx: FigureContext) -> tuple[int, ...]:
    if ctx.runs:
        return ctx.runs_of_kind("browser-pageload")
    return ctx.runs_of_kind("browser-pageload", all_finished=True)


def _excluded(ctx: FigureContext, runs) -> tuple[int, int]:
    """(resources with their five events in order, resources whose events are out of order)."""
    with ctx.db.connect() as conn:
        ok, bad = conn.execute("SELECT count(*) FILTER (WHERE events_ordered), count(*) FILTER (WHERE NOT events_ordered)"
                               " FROM blast_resource_time WHERE run_id = ANY(%s)", (list(runs),)).fetchone()
    return int(ok), int(bad)


@figure("blast-load-breakdown", sources=["blast_resource_time", "blast_page_time"], thesis="BLAST Figs 2, 4")
def load_breakdown(ctx: FigureContext) -> None:
    """Mean resource and page load time split into queue wait, connection + TLS, server wait and
    transfer (page: along the resource tree, plus non-categorized time), per browser, as shares
    beside BLAST's Fig 2 (pipeline) shares; absolute means (ms) in the CSV and on the bars."""
    from netsurvey.errors import UsageError

    runs = _runs(ctx)
    with ctx.db.connect() as conn:
        means = sql.SQL(", ").join(sql.SQL("avg({})").format(sql.Identifier(c)) for c in CATEGORIES)
        res = conn.execute(sql.SQL("SELECT browser, count(*)::int, {}, avg(load_ms) FROM blast_resource_time"
                                   " WHERE run_id = ANY(%s) AND events_ordered GROUP BY 1 ORDER BY 1").format(means),
                           (list(runs),)).fetchall()
        pages = conn.execute(sql.SQL("SELECT browser, count(*)::int, {}, avg(uncategorized_ms), avg(path_end_ms),"
                                     " avg(page_load_time_ms) FROM blast_page_time WHERE run_id = ANY(%s)"
                                     " GROUP BY 1 ORDER BY 1").format(means), (list(runs),)).fetchall()
    if not res:
        raise UsageError(f"{ctx.name}: no resource with all five BLAST events in run(s) {', '.join(map(str, runs))}")
    ok, bad = _excluded(ctx, runs)
    rows = []
    for b, n, *vals, total in res:
        rows.append(("resource", b, n, *[round(v, 3) for v in vals], None, round(total, 3)))
    for b, n, *vals, unc, end, _plt in pages:
        rows.append(("page", b, n, *[round(v, 3) for v in vals], round(unc, 3), round(end, 3)))
    ctx.write_csv(["level", "browser", "n", *CATEGORIES, "uncategorized_ms", "mean_total_ms"], rows)

    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(10, 4.2))
    for ax, level, blast in ((axes[0], "resource", BLAST_FIG2_RESOURCE_S), (axes[1], "page", BLAST_FIG2_PAGE_S)):
        bars = [(f"ours: {r[1]}\n(n={r[2]})", dict(zip(CATEGORIES + ["uncategorized_ms"], r[3:8])), r[8], "ms")
                for r in rows if r[0] == level]
        stated = {k: v for k, v in blast.items() if k != "total"}
        rest = blast["total"] - sum(stated.values())
        bars.append(("BLAST Fig 2\n(pipeline, Tor)", {**stated, "unstated": rest}, blast["total"], "s"))
        keys = CATEGORIES + (["uncategorized_ms"] if level == "page" else []) + ["unstated"]
        for x, (_label, parts, total, unit) in enumerate(bars):
            bottom = 0.0
            for k in keys:
                v = parts.get(k) or 0.0
                share = v / total if total else 0.0
                ax.bar(x, share, bottom=bottom, color=COLORS[k], hatch="//" if k == "unstated" else None)
                bottom += share
            ax.text(x, 1.01, f"{total:.3g} {unit}", ha="center", va="bottom", fontsize=7)
        ax.set_xticks(range(len(bars)), [b[0] for b in bars], fontsize=7)
        ax.set_ylim(0, 1.12)
        ax.set_ylabel(f"share of mean {level} load time")
        ax.set_title(f"{level} load time" + (" (along the resource tree)" if level == "page" else ""), fontsize=9)
    from matplotlib.patches import Patch

    keys = CATEGORIES + ["uncategorized_ms", "unstated"]
    axes[1].legend([Patch(facecolor=COLORS[k], hatch="//" if k == "unstated" else None) for k in keys],
                   [LABELS[k] for k in keys], fontsize=7, loc="lower right")
    fig.tight_layout()
    ctx.save(fig)
    ctx.sample(sum(r[2] for r in rows if r[0] == "resource"), "resources with the five events in order")
    ctx.sample(bad, "resources left out: events out of order (timing of an earlier load)")
    ctx.sample(sum(r[2] for r in rows if r[0] == "page"), "complete visits (page breakdown)")
    for r in rows:
        total = r[8] or 0.0
        if r[0] == "resource" and total:
            ctx.compare(f"{r[1]}: queue wait share of resource load time (Fig 2)", "55%", f"{r[3] / total:.1%}")
            ctx.compare(f"{r[1]}: transfer share of resource load time (Fig 2)", "2.7%", f"{r[6] / total:.1%}")
            ctx.compare(f"{r[1]}: mean server wait per resource (sec. IV-C3, http2)", 990, r[5], "ms")
            ctx.compare(f"{r[1]}: mean transfer per resource (sec. IV-C3, http2)", 150, r[6], "ms")
        elif r[0] == "page" and total:
            ctx.compare(f"{r[1]}: queue wait share of page load time (Fig 2)", "36%", f"{r[3] / total:.1%}")
            # BLAST states no share of its own for server wait: "the same amount" as the queue
            # wait's ~5.8 s (36%), not a 5.8 / 16.4 = 35% of ours
            ctx.compare(f"{r[1]}: server wait share of page load time (Fig 2)",
                        "~36% (the same amount as queue wait)", f"{r[5] / total:.1%}",
                        quote="Roughly 5.8 s (36%) of page load time was due to resources waiting in queue for "
                              "connections; the same amount was incurred again waiting for servers to respond to "
                              "resource requests (as Tor has a high latency).")
            ctx.compare(f"{r[1]}: transfer share of page load time (Fig 2)", "5.6%", f"{r[6] / total:.1%}")
            ctx.compare(f"{r[1]}: mean page load time (Fig 2: pipeline on Tor)", 16400, total, "ms")
    ctx.notes["rows"] = rows


@figure("blast-queue-wait-cdf", sources=["blast_resource_time"], thesis="BLAST Fig 3")
def queue_wait_cdf(ctx: FigureContext) -> None:
    """CDF of the queue wait time per resource (request created -> dispatched, ms) per browser,
    with the three points BLAST's text gives for its Fig 3 (pipeline on Tor)."""
    runs = _runs(ctx)
    src = ("SELECT browser AS grp, queue_ms AS value FROM blast_resource_time "
           "WHERE run_id = ANY(%s) AND events_ordered")
    curves = cdf(ctx.db, src, (list(runs),))
    fig, ax = ctx.cdf_figure(curves, "queue wait time per resource [ms]", "share of resources",
                             ["browser", "queue_ms", "cdf"], save=False)
    # BLAST Fig 3: ~1/3 did not wait; more than half waited > 0.5 s; 30% waited > 1 s
    ax.plot([0, 500, 1000], [1 / 3, 0.5, 0.7], "kx", markersize=8, label="BLAST Fig 3 (pipeline, Tor; text)")
    ax.set_xlim(left=0)
    ax.legend()
    ctx.save(fig)
    ok, bad = _excluded(ctx, runs)
    ctx.sample(bad, "resources left out: events out of order (timing of an earlier load)")
    with ctx.db.connect() as conn:
        for b, _n, zero, half, one in conn.execute(
                "SELECT browser, count(*), avg((queue_ms < 1)::int), avg((queue_ms > 500)::int),"
                " avg((queue_ms > 1000)::int) FROM blast_resource_time WHERE run_id = ANY(%s) AND events_ordered"
                " GROUP BY 1 ORDER BY 1", (list(runs),)):
            ctx.compare(f"{b}: resources that did not wait (< 1 ms)", "~33%", f"{zero:.1%}")
            ctx.compare(f"{b}: resources waiting > 0.5 s", "> 50%", f"{half:.1%}")
            ctx.compare(f"{b}: resources waiting > 1 s", "30%", f"{one:.1%}")


@figure("blast-head-of-line", sources=["blast_resource_time"], thesis="BLAST sec. IV-C3 (head-of-line blocking)")
def head_of_line(ctx: FigureContext) -> None:
    """CDFs of server wait and transfer time (ms) of resources sent on a connection that was
    already loading another resource (HTTP/2 multiplexing; HTTP/1.1 without pipelining never
    does) against all resources with a known connection, beside BLAST's means."""
    import matplotlib.pyplot as plt

    from .style import series_style, step_cdf

    runs = _runs(ctx)
    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    rows = []
    counts = {}
    for ax, col in zip(axes, ("server_wait_ms", "transfer_ms")):
        src = (f"SELECT CASE WHEN on_busy_connection THEN 'on a busy connection' ELSE 'all others' END AS grp,"
               f" {col} AS value FROM blast_resource_time WHERE run_id = ANY(%s) AND events_ordered"
               f" AND on_busy_connection IS NOT NULL")
        curves = cdf(ctx.db, src, (list(runs),))
        for i, c in enumerate(curves):
            step_cdf(ax, list(c.values), list(c.probs), label=f"{c.group} (n={c.n})", **series_style(i))
            rows += [(col, c.group, v, p) for v, p in zip(c.values, c.probs)]
            counts[c.group] = c.n
        ax.axvline(BLAST_H2_ALL_S[col] * 1000, color="k", linestyle=":", label="BLAST mean, all (http2)")
        ax.axvline(BLAST_H2_BUSY_S[col] * 1000, color="k", linestyle="--", label="BLAST mean, busy connection")
        ax.set_xlabel(f"{LABELS[col]} per resource [ms]")
        ax.set_ylabel("share of resources")
        ax.set_xscale("symlog", linthresh=1.0)
        ax.legend(fontsize=7)
    fig.tight_layout()
    ctx.write_csv(["quantity", "group", "value_ms", "cdf"], rows)
    ctx.save(fig)
    ctx.sample(counts.get("on a busy connection", 0), "resources sent on a busy connection")
    ctx.sample(counts.get("all others", 0), "other resources with a connection id")
    with ctx.db.connect() as conn:
        means = {g: (sw, tr) for g, sw, tr in conn.execute(
            "SELECT on_busy_connection, avg(server_wait_ms), avg(transfer_ms) FROM blast_resource_time"
            " WHERE run_id = ANY(%s) AND events_ordered AND on_busy_connection IS NOT NULL GROUP BY 1", (list(runs),))}
    for busy, blast in ((True, BLAST_H2_BUSY_S), (False, BLAST_H2_ALL_S)):
        what = "busy connection" if busy else "all others"
        sw, tr = means.get(busy, (None, None))
        ctx.compare(f"mean server wait, {what}", blast["server_wait_ms"] * 1000, None if sw is None else round(sw, 2), "ms")
        ctx.compare(f"mean transfer, {what}", blast["transfer_ms"] * 1000, None if tr is None else round(tr, 2), "ms")


# -- the simulator (analysis/models/pageload.py) on the logged resource trees ------------------

def _sim_means(pages, opts) -> tuple[float, float, int, int]:
    from .models.pageload import simulate_page

    sims = [simulate_page(p, opts) for p in pages]
    return (mean(s["plt_s"] for s in sims), mean(s["mean_resource_load_s"] for s in sims),
            sum(s["connections"] for s in sims), sum(s["tfo_connections"] for s in sims))


def _pages(ctx: FigureContext):
    """The logged resource trees of the selected (else every finished) page-load run."""
    from .models import inputs

    return inputs.pages_db(ctx.db, _runs(ctx))


@figure("blast-feature-steps", sources=["model_page_visit", "model_page_resource", "model_page_server"],
        thesis="BLAST Fig 6")
def feature_steps(ctx: FigureContext) -> None:
    """Simulated mean page and resource load time of the logged pages per proposed feature,
    cumulative (a, c) and one at a time (b, d), at BLAST's RTT 0.8 s and 164 kB/s. Baseline:
    BLAST's (Tor Browser 8.5 with HTTP/2: ALPN one round trip after TLS); steps in BLAST's
    order (sec. V-D) with resumption across hostnames (thesis) after 0-RTT; one at a time
    also HTTP/1.1 pipelining (depth 6) and ALPN in the TLS handshake (today's browsers).
    The prefetch database holds only resources seen in >= 90% of >= 2 visits of the page."""
    import matplotlib.pyplot as plt

    from .models.pageload import FEATURE_STEPS, INDIVIDUAL_STEPS, PageOptions

    pages = _pages(ctx)
    base = PageOptions(rtt_s=BLAST_RTT_S, bandwidth_Bps=BLAST_BANDWIDTH_BPS)
    rows = []
    for mode, steps in (("cumulative", FEATURE_STEPS), ("individual", INDIVIDUAL_STEPS)):
        for name, feats in steps:
            plt_s, res_s, conns, tfo = _sim_means(pages, replace(base, features=feats))
            rows.append((mode, name, round(plt_s, 4), round(res_s, 4), conns, tfo))
    ctx.write_csv(["mode", "step", "mean_plt_s", "mean_resource_load_s", "connections", "tfo_connections"], rows)
    fig, axes = plt.subplots(2, 2, figsize=(10, 7))
    for j, mode in enumerate(("cumulative", "individual")):
        sel = [r for r in rows if r[0] == mode]
        for i, (col, ylabel) in enumerate(((2, "mean page load time [s]"), (3, "mean resource load time [s]"))):
            ax = axes[i][j]
            ax.bar(range(len(sel)), [r[col] for r in sel], color="#4477aa")
            ax.set_xticks(range(len(sel)), [r[1] for r in sel], rotation=35, ha="right", fontsize=7)
            ax.set_ylabel(ylabel)
            ax.set_title(f"({'abcd'[i * 2 + j]}) {mode}", fontsize=9)
    axes[0][0].axhline(7.1 / 18.0 * rows[0][2], color="k", linestyle="--",
                       label="BLAST: all features = 39% of baseline (18.0 -> 7.1 s)")
    axes[0][0].legend(fontsize=7)
    fig.tight_layout()
    ctx.save(fig)
    ctx.sample(len(pages), "page visits (resource trees), simulated at RTT 0.8 s, 164 kB/s")
    cum = {r[1]: r for r in rows if r[0] == "cumulative"}
    ind = {r[1]: r for r in rows if r[0] == "individual"}
    b = cum["baseline"][2]
    ctx.compare("mean page load time, baseline (Tor pages vs ours)", 18.0, cum["baseline"][2], "s")
    ctx.compare("all features combined: decrease of mean page load time", "61%",
                f"{1 - cum['prefetch_db'][2] / b:.1%}" if b else None)
    ctx.compare("prefetching database alone: decrease", "35%",
                f"{1 - ind['prefetch_db'][2] / ind['baseline'][2]:.1%}" if ind["baseline"][2] else None)
    c = ind["tfo"]
    ctx.compare("connections that TCP Fast Open shortened", "18%", f"{c[5] / c[4]:.1%}" if c[4] else None)
    ctx.notes["rows"] = rows


@figure("blast-sweeps", sources=["model_page_visit", "model_page_resource", "model_page_server"],
        thesis="BLAST Fig 8")
def sweeps(ctx: FigureContext) -> None:
    """Simulated mean page load time of the logged pages (BLAST's baseline: HTTP/2 browser with
    the ALPN round trip, no new features) over the per-resource bandwidth at RTT 0.8 s (a) and
    over the RTT at 164 kB/s (b), 100 points each."""
    import matplotlib.pyplot as plt

    from .models.pageload import BLAST_BASELINE, PageOptions as _PO

    def PageOptions(**kw):  # noqa: N802 - every sweep point on BLAST's baseline browser
        return _PO(features=BLAST_BASELINE, **kw)

    pages = _pages(ctx)
    bws = [BLAST_BANDWIDTH_BPS * 10 ** (-1 + 2 * i / 99) for i in range(100)]     # 16.4 kB/s .. 1.64 MB/s
    rtts = [0.02 * (i + 1) for i in range(100)]                                   # 0.02 .. 2.0 s
    a = [(bw, _sim_means(pages, PageOptions(rtt_s=BLAST_RTT_S, bandwidth_Bps=bw))[0]) for bw in bws]
    b = [(rtt, _sim_means(pages, PageOptions(rtt_s=rtt, bandwidth_Bps=BLAST_BANDWIDTH_BPS))[0]) for rtt in rtts]
    ref = _sim_means(pages, PageOptions(rtt_s=BLAST_RTT_S, bandwidth_Bps=BLAST_BANDWIDTH_BPS))[0]
    dbl = _sim_means(pages, PageOptions(rtt_s=BLAST_RTT_S, bandwidth_Bps=2 * BLAST_BANDWIDTH_BPS))[0]
    half = _sim_means(pages, PageOptions(rtt_s=BLAST_RTT_S / 2, bandwidth_Bps=BLAST_BANDWIDTH_BPS))[0]
    ctx.write_csv(["sweep", "rtt_s", "bandwidth_Bps", "mean_plt_s"],
                  [("bandwidth", BLAST_RTT_S, round(bw, 1), round(p, 5)) for bw, p in a]
                  + [("rtt", round(r, 3), BLAST_BANDWIDTH_BPS, round(p, 5)) for r, p in b])
    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    axes[0].plot([x / 1000 for x, _ in a], [p for _, p in a], ".", markersize=3)
    axes[0].plot([BLAST_BANDWIDTH_BPS / 1000], [ref], "rx", markersize=9, label="164 kB/s (BLAST's setting)")
    from .style import set_log_axis

    set_log_axis(axes[0].xaxis)
    axes[0].set_xlabel("per-resource bandwidth [kB/s] (RTT 0.8 s)")
    axes[1].plot([x for x, _ in b], [p for _, p in b], ".", markersize=3)
    axes[1].plot([BLAST_RTT_S], [ref], "rx", markersize=9, label="0.8 s (BLAST's setting)")
    axes[1].set_xlabel("round-trip time [s] (164 kB/s)")
    for ax in axes:
        ax.set_ylabel("mean page load time [s]")
        ax.set_ylim(bottom=0)
        ax.legend(fontsize=7)
    fig.tight_layout()
    ctx.save(fig)
    ctx.sample(len(pages), "page visits (resource trees), 200 simulations each")
    ctx.compare("mean page load time when the bandwidth doubles (relative)", "94.4% (18.0 -> 17.0 s)",
                f"{dbl / ref:.1%}")
    ctx.compare("mean page load time when the RTT halves (relative)", "~50% (linear)", f"{half / ref:.1%}")
    # linearity in the RTT: Pearson r over the sweep
    from .models.pageload import pearson

    r = pearson([x for x, _ in b], [p for _, p in b])
    ctx.compare("linearity of page load time in RTT (Pearson r over the sweep)", "almost entirely linear",
                None if r is None or math.isnan(r) else round(r, 4))
    ctx.notes["reference_plt_s"] = ref
    ctx.notes["double_bandwidth_plt_s"] = dbl
    ctx.notes["half_rtt_plt_s"] = half


def calibration(ctx: FigureContext, runs) -> tuple[float, float, int, int]:
    """The simulator's two constants measured from the runs' own events, as BLAST did
    (sec. V-B: "the same numbers we measured from real data"): RTT = mean server wait per
    resource (BLAST sec. II-C: ideally one round trip); per-resource bandwidth = bytes over
    transfer time of the resources of at least 50 kB (BLAST: over 500 kB; ours are scaled
    down), all resources if none is that large. Returns (rtt_s, bandwidth_Bps, n_rtt, n_bw,
    floor_bytes)."""
    from netsurvey.errors import UsageError

    with ctx.db.connect() as conn:
        rtt, n_rtt = conn.execute("SELECT avg(server_wait_ms), count(*) FROM blast_resource_time"
                                  " WHERE run_id = ANY(%s) AND events_ordered", (list(runs),)).fetchone()
        bw = None
        for floor in (50_000, 0):
            b, t, n_bw = conn.execute("SELECT sum(encoded_bytes), sum(transfer_ms), count(*) FROM blast_resource_time"
                                      " WHERE run_id = ANY(%s) AND events_ordered AND encoded_bytes >= %s"
                                      " AND transfer_ms > 0", (list(runs), floor)).fetchone()
            if b and t:
                bw = float(b) / (float(t) / 1000.0)
                break
        floor_used = floor
    if rtt is None or bw is None:
        raise UsageError(f"{ctx.name}: the runs hold no resource with server wait and transfer times")
    return float(rtt) / 1000.0, bw, int(n_rtt), int(n_bw), floor_used


def _link_groups(ctx: FigureContext, runs) -> list[tuple[str, tuple[int, ...], "float | None", "float | None"]]:
    """The runs grouped by the link profile they ran under (``browser pageload`` in the timing
    vantage records it: parameters link_profile / link_rtt_ms / link_rate_kbit): [(label,
    runs, rtt_ms, rate_kbit)]; runs without one form the group 'unrecorded'."""
    with ctx.db.connect() as conn:
        rows = conn.execute("SELECT id, parameters->>'link_profile', (parameters->>'link_rtt_ms')::float,"
                            " (parameters->>'link_rate_kbit')::float FROM scan_run WHERE id = ANY(%s) ORDER BY id",
                            (list(runs),)).fetchall()
    groups: dict = {}
    for rid, name, rtt, rate in rows:
        key = (name or "unrecorded", rtt, rate)
        groups.setdefault(key, []).append(rid)
    return [(k[0], tuple(v), k[1], k[2]) for k, v in sorted(groups.items(), key=lambda kv: (kv[0][1] or 0, kv[0][0]))]


def parse_gap(ctx: FigureContext, runs) -> tuple[float, int]:
    """Median time (s) from a parent's last byte to its child's creation (negative gaps,
    children found while the parent still streamed, count as 0) over the runs' resources
    with a logged parent: the browser's own time per tree level, which BLAST's simulator
    neglects (parsing time 0; appendix C-2: "usually did not exceed" 0.05 s)."""
    with ctx.db.connect() as conn:
        med, n = conn.execute(
            "SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY greatest(c.created_ms - p.last_byte_received_ms, 0)),"
            " count(*) FROM browser_resource c JOIN browser_resource p ON p.visit_id = c.visit_id"
            " AND p.resource_no = c.parent_no WHERE c.run_id = ANY(%s) AND c.created_ms IS NOT NULL"
            " AND p.last_byte_received_ms IS NOT NULL AND c.redirected_from_no IS DISTINCT FROM p.resource_no",
            (list(runs),)).fetchone()
    return (float(med) / 1000.0 if med is not None else 0.0), int(n)


@figure("blast-validation", sources=["model_page_visit", "model_page_resource", "model_page_server",
                                     "blast_resource_time"], thesis="BLAST Fig 5")
def validation(ctx: FigureContext) -> None:
    """Simulated vs recorded page load time per visit, per link profile and browser: Pearson r
    and the CDF of the relative error (simulated - recorded) / recorded, beside BLAST's Fig 5
    (r = 0.63; means 18.0 vs 18.4 s). The simulator (today's browsers: ALPN in the TLS
    handshake, no pipelining, no new feature) runs at the profile's configured RTT and rate
    (ground truth of the timing testbed's delay line) where the runs recorded one; otherwise
    at the RTT and per-resource bandwidth measured from the runs' own events (BLAST sec. V-B).
    Second variant (``*_parse`` in the CSV and the notes; not BLAST's): each tree level also
    costs the browser's median parent-to-child gap measured from the same runs."""
    import matplotlib.pyplot as plt

    from .models import inputs
    from .models.pageload import PageOptions, pearson, simulate_page

    runs = _runs(ctx)
    rows, groups = [], {}
    for label, gruns, rtt_ms, rate_kbit in _link_groups(ctx, runs):
        pages = inputs.pages_db(ctx.db, gruns)
        with ctx.db.connect() as conn:
            browsers = [b for (b,) in conn.execute(
                "SELECT v.browser FROM model_page_visit m JOIN browser_visit v ON v.id = m.visit_id"
                " WHERE m.scan_run_id = ANY(%s) ORDER BY m.visit_id", (list(gruns),))]
        c_rtt, c_bw, n_rtt, n_bw, floor = calibration(ctx, gruns)
        rtt_s, rtt_src = (rtt_ms / 1000.0, "profile") if rtt_ms else (c_rtt, "measured (mean server wait)")
        bw, bw_src = (rate_kbit * 125.0, "profile") if rate_kbit else (c_bw, f"measured (resources >= {floor} bytes)")
        parse_s, n_parse = parse_gap(ctx, gruns)
        groups[label] = {"runs": list(gruns), "rtt_s": rtt_s, "rtt_source": rtt_src, "bandwidth_Bps": bw,
                         "parse_s": parse_s, "n_parse": n_parse,
                         "bandwidth_source": bw_src, "measured_rtt_s": c_rtt, "measured_bandwidth_Bps": c_bw,
                         "n_rtt": n_rtt, "n_bw": n_bw, "stats": {}}
        # three simulations per visit: the profile's constants (the main one), BLAST's method
        # (constants measured from the same runs), and that plus the time per tree level
        variants = {"profile": PageOptions(rtt_s=rtt_s, bandwidth_Bps=bw),
                    "measured": PageOptions(rtt_s=c_rtt, bandwidth_Bps=c_bw),
                    "measured_parse": PageOptions(rtt_s=c_rtt, bandwidth_Bps=c_bw, parse_s=parse_s)}
        for b, p in zip(browsers, pages):
            if p.recorded_plt_s:
                sims = {v: simulate_page(p, o)["plt_s"] for v, o in variants.items()}
                rec = p.recorded_plt_s
                rows.append((label, b, p.name, rec, sims["profile"], (sims["profile"] - rec) / rec,
                             sims["measured"], sims["measured_parse"]))
    ctx.write_csv(["profile", "browser", "page", "recorded_plt_s", "simulated_plt_s", "relative_error",
                   "simulated_measured_plt_s", "simulated_measured_parse_plt_s"],
                  [(g, b, n, round(r, 4), round(s, 4), round(e, 4), round(sm, 4), round(sp, 4))
                   for g, b, n, r, s, e, sm, sp in rows])
    fig, axes = plt.subplots(1, 2, figsize=(10, 4.2))
    for g, gd in groups.items():
        for b in sorted({r[1] for r in rows if r[0] == g}):
            sel = [r for r in rows if r[0] == g and r[1] == b]
            rec, sim, err = [r[3] for r in sel], [r[4] for r in sel], sorted(r[5] for r in sel)
            rr = pearson(rec, sim)
            gd["stats"][b] = {"n": len(sel), "r": rr, "mean_recorded_s": mean(rec), "mean_simulated_s": mean(sim),
                              "median_abs_error": median(abs(e) for e in err), "median_error": median(err),
                              "p10_error": err[int(0.1 * (len(err) - 1))], "p90_error": err[int(0.9 * (len(err) - 1))]}
            for v, col in (("measured", 6), ("measured_parse", 7)):
                vs = [r[col] for r in sel]
                ve = [(x - y) / y for x, y in zip(vs, rec)]
                gd["stats"][b][v] = {"r": pearson(rec, vs), "mean_simulated_s": mean(vs),
                                     "median_abs_error": median(abs(e) for e in ve), "median_error": median(ve)}
            lab = f"{g} {gd['rtt_s'] * 1000:.0f} ms, {b} (n={len(sel)}" + (f", r={rr:.2f})" if rr is not None else ")")
            axes[0].scatter(rec, sim, s=10, label=lab)
            axes[1].step(err, [(k + 1) / len(err) for k in range(len(err))], where="post", label=lab)
    hi = max([max(r[3], r[4]) for r in rows] or [1.0])
    axes[0].plot([0, hi], [0, hi], "k:", linewidth=0.8, label="simulated = recorded")
    axes[0].set_xlabel("recorded page load time [s]")
    axes[0].set_ylabel("simulated page load time [s]")
    axes[0].set_title("simulator at each profile's RTT (BLAST Fig 5: r = 0.63, http2 on Tor)", fontsize=8)
    axes[0].legend(fontsize=6)
    axes[1].axvline(0, color="k", linestyle=":", linewidth=0.8)
    axes[1].axvline(18.0 / 18.4 - 1, color="k", linestyle="--", linewidth=0.8,
                    label="BLAST: mean simulated / recorded - 1 (-2.2%)")
    axes[1].set_xlabel("relative error (simulated - recorded) / recorded")
    axes[1].set_ylabel("share of page visits")
    axes[1].legend(fontsize=6)
    fig.tight_layout()
    ctx.save(fig)
    ctx.sample(len(rows), "page visits with a recorded page load time")
    for g, gd in groups.items():
        ctx.sample(gd["n_rtt"], f"{g}: resources behind the measured RTT (mean server wait)")
        ctx.sample(gd["n_bw"], f"{g}: resources behind the measured bandwidth")
        for b, st in gd["stats"].items():
            ctx.compare(f"{g}/{b}: Pearson r simulated vs recorded (Fig 5, http2)", 0.63,
                        None if st["r"] is None else round(st["r"], 3))
            ctx.compare(f"{g}/{b}: mean simulated / mean recorded page load time (sec. V-B: 18.0 / 18.4 s)",
                        "97.8%", f"{st['mean_simulated_s'] / st['mean_recorded_s']:.1%}")
            ctx.compare(f"{g}/{b}: median absolute relative error per page (not stated by BLAST)", None,
                        f"{st['median_abs_error']:.1%}")
            for v, what in (("measured", f"at the measured RTT {gd['measured_rtt_s'] * 1000:.0f} ms and "
                                          f"{gd['measured_bandwidth_Bps'] / 1000:.0f} kB/s (BLAST's method)"),
                            ("measured_parse", f"same + {gd['parse_s'] * 1000:.0f} ms per tree level (not BLAST's)")):
                vs = st[v]
                r_txt = "-" if vs["r"] is None else f"{vs['r']:.3f}"
                ctx.compare(f"{g}/{b}: {what}: r / mean sim/rec / median |error|", None,
                            f"{r_txt} / {vs['mean_simulated_s'] / st['mean_recorded_s']:.1%} / "
                            f"{vs['median_abs_error']:.1%}")
    ctx.notes["groups"] = groups
    if len(groups) == 1:   # one profile: its numbers at the top level too
        (gd,) = groups.values()
        ctx.notes.update(stats=gd["stats"], rtt_s=gd["rtt_s"], bandwidth_Bps=gd["bandwidth_Bps"])
