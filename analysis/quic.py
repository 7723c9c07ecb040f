"""QUIC figures and tables (thesis ch. 6.4.2): support per top-list cut (Table 6.2),
token/ticket acceptance lifetimes and key turnover periods (CDFs; the IETF-QUIC analogue of
the STTL and server-config turnover), and the per-host tracking summary. Everything is
computed in PostgreSQL from the views of schema/0004_quic.sql."""
from __future__ import annotations

from psycopg import sql

from . import thesis_overlay
from .engine import cdf
from .figures import FigureContext, figure
from .style import new_figure, series_style, step_cdf
from .thesis_reference import for_figure


@figure("quic-support", sources=["quic_support_by_cut"], thesis="Table 6.2")
def quic_support(ctx: FigureContext) -> None:
    """Share of hostnames with QUIC support (and Alt-Svc h3 / HTTPS-record h3) per top-list cut."""
    runs = ctx.run_ids("quic-discover")
    with ctx.db.connect() as conn:
        rows = conn.execute(
            """SELECT cut, sum(hosts)::int, sum(quic_hosts)::int,
                      sum(quic_share * hosts) / sum(hosts), sum(alt_svc_h3_share * hosts) / sum(hosts),
                      sum(https_rr_h3_share * hosts) / sum(hosts)
               FROM quic_support_by_cut WHERE run_id = ANY(%s) GROUP BY cut ORDER BY cut""",
            (list(runs),)).fetchall()
    # cuts past the list size repeat the whole list: keep the first of them only
    total = max((r[1] for r in rows), default=0)
    rows = [r for k, r in enumerate(rows) if k == 0 or rows[k - 1][1] < total]
    # Table 6.2 by cut; it applies only to a real cut (ranks 1..cut all in the list)
    thesis = {int(r.x): r.value for r in for_figure(ctx.name)}
    real = [r[0] for r in rows if r[0] <= total]
    ctx.write_csv(["top_cut", "hosts", "quic_hosts", "quic_share", "alt_svc_h3_share", "https_rr_h3_share",
                   "thesis_quic_share_percent"],
                  [(c, n, q, round(s, 6), round(a, 6), round(h, 6), thesis.get(c) if c in real else None)
                   for c, n, q, s, a, h in rows])
    fig, ax = new_figure("top-list cut [hostnames] (n = hostnames in the cut)", "share of hostnames [%]",
                         logx=len(rows) > 1)
    cuts = [r[0] for r in rows]
    for i, (label, col) in enumerate((("QUIC (Version Negotiation)", 3), ("Alt-Svc h3", 4), ("HTTPS RR h3", 5))):
        style = series_style(i)
        style.pop("markevery")
        style["markersize"] = 7 - 2 * i      # coinciding points stay visible: big, medium, small
        ax.plot(cuts, [100 * r[col] for r in rows], label=label, **style)
    ax.set_xticks(cuts, [f"{'all ' if n == total and c > n else 'top '}{n if c > n else c}\n(n={n})"
                         for c, n, *_ in rows])
    ax.minorticks_off()
    ax.set_ylim(0, 105)
    ax.legend()
    for c, n, *_ in rows:
        ctx.sample(n, f"hostnames in the top {c}")
    thesis_overlay.apply(ctx, ax, ours={f"quic_share_top_{r[0]}": 100 * r[3] for r in rows if r[0] in real},
                         position=lambda ref: ("marker", ref.x, ref.value) if int(ref.x) in real else None)
    ctx.save(fig)


def _lifetime_cdfs(ctx: FigureContext, column: str, xlabel: str) -> None:
    runs = list(ctx.run_ids("quic-turnover"))
    curves = cdf(ctx.db, f"SELECT kind AS grp, {column} AS value FROM quic_lifetimes WHERE run_id = ANY(%s)",
                 (runs,))
    ctx.write_csv(["kind", "n_hosts", "value_s", "cdf"],
                  [(c.group, c.n, v, p) for c in curves for v, p in zip(c.values, c.probs)])
    fig, ax = new_figure(xlabel, "CDF of host addresses")
    for c in curves:
        step_cdf(ax, list(c.values), list(c.probs), label=f"{c.group} (n={c.n})")
    if curves:
        ax.legend()
    # the thesis's gQUIC STTL / server-config turnover (hours) beside our largest value, in hours
    with ctx.db.connect() as conn:
        top = conn.execute(sql.SQL("SELECT max({})::float8 / 3600 FROM quic_lifetimes WHERE run_id = ANY(%s)")
                           .format(sql.Identifier(column)), (runs,)).fetchone()[0]
    thesis_overlay.apply(ctx, ax, ours={r.key: top for r in for_figure(ctx.name)})
    ctx.save(fig)


@figure("quic-lifetimes", sources=["quic_lifetimes"], thesis="STTL (ch. 6.4.2)")
def quic_lifetimes(ctx: FigureContext) -> None:
    """CDF per host of the largest age at which a token (no Retry) / ticket (resumption) was accepted."""
    _lifetime_cdfs(ctx, "accept_max_age_s", "largest accepted age [s]")


@figure("quic-turnover", sources=["quic_lifetimes"], thesis="server config turnover (ch. 6.4.2)")
def quic_turnover(ctx: FigureContext) -> None:
    """CDF per host of the token / ticket key turnover period (hosts that rotated twice or more)."""
    _lifetime_cdfs(ctx, "key_period_s", "key turnover period [s]")


@figure("quic-tracking", sources=["quic_tracking_summary"], thesis="ch. 6.4.1/6.4.2")
def quic_tracking(ctx: FigureContext) -> None:
    """Per host address: which identifiers persist and for how long (table for the report)."""
    runs = list(ctx.run_ids("quic-turnover"))
    with ctx.db.connect() as conn:
        cur = conn.execute(
            """SELECT hostname, host(address), token_linkability, token_key_period_s, ticket_lifetime_s,
                      ticket_accept_max_age_s, ticket_reject_min_age_s, ticket_key_period_s,
                      zero_rtt_accept_max_age_s, ticket_key_visible_to_observers, observed_s
               FROM quic_tracking_summary WHERE run_id = ANY(%s) ORDER BY hostname, address""", (runs,))
        header = [d.name for d in cur.description]
        rows = [tuple(round(v, 1) if isinstance(v, float) else v for v in r) for r in cur.fetchall()]
    ctx.write_csv(header, rows)


#: (row label, SQL aggregate over one run's quic_connection rows: addresses, i.e. distinct
#: (hostname, address) pairs, with the property: a pair probed twice in a run - a name in the
#: list and given with --target - counts once). ``f`` is the fresh connection, ``r`` the
#: one presenting its token and ticket (scan quic --resume).
_PAIRS = "count(DISTINCT (f.hostname, f.address)) FILTER (WHERE {})"
_STATE_ROWS = (
    # contacted: a name that did not resolve has no address, a blocked address was never probed
    ("probed", _PAIRS.format("f.status NOT IN ('resolution-failed', 'blocked')")),
    ("handshake succeeded", _PAIRS.format("f.status = 'success'")),
    ("Retry sent (address validated before the handshake)", _PAIRS.format("f.status = 'success' AND f.retry")),
    ("NEW_TOKEN token issued", _PAIRS.format("f.status = 'success' AND f.n_tokens > 0")),
    ("session ticket issued", _PAIRS.format("f.status = 'success' AND f.n_tickets > 0")),
    ("revisit resumed the session (ticket accepted)", _PAIRS.format("r.status = 'success' AND r.session_resumed")),
    ("revisit's 0-RTT data accepted", _PAIRS.format("r.early_data_accepted")),
)


@figure("quic-state", sources=["quic_connection"], thesis="ch. 6.4 (IETF QUIC: the state a server hands out)")
def quic_state(ctx: FigureContext) -> None:
    """Per `scan quic` run: how many addresses (hostname, address pairs) completed a handshake
    and handed out state that links a revisit to the first visit (NEW_TOKEN tokens, session
    tickets), and how many accepted it on the revisit (resumption, 0-RTT; empty for a run
    without revisits, --no-resume). "probed" counts the addresses contacted (not names that
    did not resolve, nor blocked addresses). Retry, tokens and tickets count among the
    addresses with a successful handshake, so every share is of those (at most 1); counted
    in PostgreSQL."""
    runs = list(ctx.run_ids("quic"))
    cols = ", ".join(expr for _, expr in _STATE_ROWS)
    with ctx.db.connect() as conn:
        got = conn.execute(
            f"""SELECT f.run_id, {cols}
                FROM quic_connection f
                LEFT JOIN quic_connection r ON r.run_id = f.run_id AND r.purpose = 'resume'
                     AND coalesce(r.presented_ticket_conn_id, r.presented_token_conn_id) = f.conn_id
                WHERE f.run_id = ANY(%s) AND f.purpose = 'fresh' GROUP BY f.run_id ORDER BY f.run_id""",
            (runs,)).fetchall()
        # scan quic --no-resume made no revisit: its revisit rows stay empty, not "0 resumed"
        revisited = dict(conn.execute("SELECT id, coalesce((parameters->>'resume')::boolean, true) FROM scan_run "
                                      "WHERE id = ANY(%s)", (runs,)).fetchall())
    rows = []
    for run_id, *counts in got:
        ok = counts[1]
        for (label, _), n in zip(_STATE_ROWS, counts):
            if label.startswith("revisit") and not revisited.get(run_id, True):
                rows.append((run_id, label, None, None))
                continue
            rows.append((run_id, label, n, round(n / ok, 6) if ok and label != "probed" else None))
    ctx.write_csv(["run_id", "addresses_with", "addresses", "share_of_handshakes"], rows)
