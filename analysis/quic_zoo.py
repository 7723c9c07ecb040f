"""The QUIC zoo's rows of `plot zoo-table`: per QUIC zoo server (quic-go, ngtcp2, quinn) and
fact, the implementation's documented default (cited; recorded in zoo_documented_default by
`netsurvey testbed zoo-record`), netsurvey's measurement (scan quic-discover: Version
Negotiation; scan quic: Retry, NEW_TOKEN, tickets, resumption, 0-RTT) and ngtcp2's own
client's verdict (scan quic-second-opinion, Debian ngtcp2-client: not aioquic, which
netsurvey's QUIC scanners use). Rows have the shape of the TLS zoo rows (analysis/tls.py
zoo_table) plus a note: why a value differs from the documented one, or why there is no
second opinion. Values of both addresses of a host are pooled: booleans by OR (any
connection saw it), the rest as their distinct values joined by '|'. ngtcp2's stock server
is on UDP 443; its --validate-addr instance on the real clock (UDP 4444) gives the one
Retry fact."""
from __future__ import annotations

#: ngtcp2's --validate-addr instance on the real clock (testbed/zoo_quic.py NGTCP2_VALIDATE_RT_PORT)
VALIDATE_PORT = 4444
STOCK_PORT = 443


def _reserved(v: int) -> bool:
    return v & 0x0F0F0F0F == 0x0A0A0A0A


def _txt(v) -> str | None:
    if v is None:
        return None
    if isinstance(v, bool):
        return "true" if v else "false"
    return str(v)


def _join(values) -> str | None:
    vals = sorted({v for v in values if v is not None})
    return "|".join(vals) if vals else None


def _hexlist(vs) -> str:
    return "|".join(f"{v:#010x}" for v in vs)


#: fact -> why ngtcp2's client gives no verdict on it
NO_SECOND_OPINION = {
    "token_format": "ngtcp2's client does not classify tokens (netsurvey's layout parser is not a second opinion)",
    "token_key_id_len": "as token_format",
}

#: (host label, fact) -> why netsurvey's value (or the client's) differs from the documented one
NOTES = {
    ("quinn", "new_token_count_per_connection"):
        "quinn queues its 2 NEW_TOKENs per client Handshake packet it processes (quinn-proto "
        "connection/mod.rs:2547-2559, QUINN_FACTS new_token): a client sees a multiple of 2 that depends on how "
        "its Handshake packets fall (aioquic, netsurvey's client: mostly 4; ngtcp2's client: 2, 4 or 8 from run "
        "to run)",
    ("ngtcp2", "zero_rtt"):
        "GnuTLS's anti-replay window refuses early data for tickets issued before its latest rollover "
        "(lib/tls13/anti_replay.c:156-167, NGTCP2_FACTS zero_rtt): a single resumption may be refused; pooled "
        "over both addresses at least one is accepted",
}


def _latest(rows, key):
    """rows of the latest run per key (host, or host and port)."""
    last: dict = {}
    for r in rows:
        last[key(r)] = max(last.get(key(r), 0), r[0])
    return [r for r in rows if last[key(r)] == r[0]]


def zoo_rows(conn, discover_runs: list[int], quic_runs: list[int], so_runs: list[int]) -> list[tuple]:
    from .zoo_documented import servers

    hosts = servers(conn, "quic")     # recorded by `netsurvey testbed zoo-record`
    facts = {h.label: h.facts for h in hosts}
    names = [h.hostname for h in hosts if h.label in ("quicgo", "ngtcp2", "quinn")]
    if not names:
        return []
    vn = _latest(conn.execute(
        "SELECT run_id, hostname, vn_versions FROM quic_discovery WHERE run_id = ANY(%s) AND hostname = ANY(%s)"
        " AND port = %s AND vn_answer = 'version-negotiation'", (discover_runs, names, STOCK_PORT)).fetchall(),
        lambda r: r[1])
    conns = _latest(conn.execute(
        "SELECT run_id, hostname, port, purpose, retry, n_tokens, n_tickets, session_resumed, early_data_accepted,"
        " conn_id FROM quic_connection WHERE run_id = ANY(%s) AND hostname = ANY(%s) AND status = 'success'",
        (quic_runs, names)).fetchall(), lambda r: (r[1], r[2]))
    stock = {(r[0], r[9]) for r in conns if r[2] == STOCK_PORT}
    toks = [r[1:] for r in conn.execute(
        "SELECT run_id, conn_id, hostname, token_format, key_id_len FROM quic_token WHERE run_id = ANY(%s)"
        " AND hostname = ANY(%s)", (quic_runs, names)).fetchall() if (r[0], r[1]) in stock]
    tiks = [r[1:] for r in conn.execute(
        "SELECT t.run_id, t.conn_id, t.hostname, t.lifetime_s, t.max_early_data FROM quic_ticket t"
        " JOIN quic_connection c USING (run_id, conn_id) WHERE t.run_id = ANY(%s) AND t.hostname = ANY(%s)"
        " AND c.purpose = 'fresh'", (quic_runs, names)).fetchall() if (r[0], r[1]) in stock]
    so = _latest(conn.execute(
        "SELECT run_id, hostname, port, fact, value, client FROM quic_second_opinion WHERE run_id = ANY(%s)"
        " AND hostname = ANY(%s) AND status = 'success'", (so_runs, names)).fetchall(), lambda r: (r[1], r[2]))
    rows = []
    for h in hosts:
        if h.hostname not in names:
            continue
        f = facts[h.label]
        mine_vn = [list(r[2]) for r in vn if r[1] == h.hostname]
        cs = [r for r in conns if r[1] == h.hostname]
        fresh = [r for r in cs if r[2] == STOCK_PORT and r[3] == "fresh"]
        resume = [r for r in cs if r[2] == STOCK_PORT and r[3] == "resume"]
        va = [r for r in cs if r[2] == VALIDATE_PORT and r[3] == "fresh"]
        theirs: dict = {}
        for r in so:
            if r[1] == h.hostname:
                theirs.setdefault((r[2], r[3]), []).append((r[4], r[5]))
        if not (mine_vn or cs or theirs):
            continue

        def other(fact: str, port: int = STOCK_PORT, conv=None):
            vals = [(conv(v) if conv else v, c) for v, c in theirs.get((port, fact)) or []]
            if not vals:
                return None, None
            if all(v in ("true", "false") for v, _ in vals):
                return ("true" if any(v == "true" for v, _ in vals) else "false"), vals[0][1]
            return _join(v for v, _ in vals), vals[0][1]

        def add(fact, doc_entry, doc_value, mine, so_fact=None, port=STOCK_PORT, conv=None):
            doc, mine = _txt(doc_value), _txt(mine)
            theirs_v, client = other(so_fact, port, conv) if so_fact else (None, None)
            matches = None if doc is None or mine is None else ("yes" if doc == mine else "NO")
            agree = None if theirs_v is None or mine is None else ("yes" if theirs_v == mine else "NO")
            note = None
            if "NO" in (matches, agree) or (theirs_v is not None and doc is not None and theirs_v != doc):
                note = NOTES.get((h.label, fact))
            if theirs_v is None:
                ran = any(p == port for p, _ in theirs)
                why = NO_SECOND_OPINION.get(fact) if not so_fact else (
                    "ngtcp2's client gave none (quic_second_opinion.error says why)" if ran else
                    "no quic-second-opinion run of this host" + (f" and port {port}" if port != STOCK_PORT else "")
                    + " among the runs")
                note = "; ".join(x for x in (note, f"no second opinion: {why}" if why else None) if x)
            rows.append((h.hostname if port == STOCK_PORT else f"{h.hostname}:{port}", fact, doc,
                         (doc_entry or {}).get("source"), matches, mine, theirs_v, client, agree, note or None))

        any_of = (lambda xs: None if not xs else any(xs))
        if mine_vn or theirs.get((STOCK_PORT, "vn_versions")):
            plain = {_hexlist([v for v in vs if not _reserved(v)]) for vs in mine_vn}
            greased = {str(sum(map(_reserved, vs))) for vs in mine_vn}
            e = f["vn_versions"]
            add("vn_versions", e, _hexlist(e["value"]), _join(plain), "vn_versions")
            add("vn_greased_count", e, e.get("greased_extra"), _join(greased), "vn_greased_count")
        if fresh or theirs:
            add("retry", f["retry"], f["retry"]["value"], any_of([r[4] for r in fresh]), "retry")
            add("new_token", f["new_token"], f["new_token"]["value"], any_of([r[5] > 0 for r in fresh]),
                "new_token_count", conv=lambda v: _txt(int(v) > 0))
            add("new_token_count_per_connection", f["new_token"], f["new_token"].get("count_per_connection"),
                _join(str(r[5]) for r in fresh), "new_token_count")
            t = [x for x in toks if x[1] == h.hostname]
            tf = f.get("token_format") or {}
            add("token_format", tf, tf.get("value"), _join(x[2] for x in t))
            add("token_key_id_len", tf, tf.get("key_id_len"), _join(_txt(x[3]) for x in t))
            add("tickets", f["tickets"], f["tickets"]["value"], any_of([r[6] > 0 for r in fresh]), "tickets")
            add("ticket_count_per_connection", f["tickets"], f["tickets"].get("count_per_connection"),
                _join(str(r[6]) for r in fresh), "ticket_count")
            k = [x for x in tiks if x[1] == h.hostname]
            add("ticket_lifetime_s", f["ticket_lifetime_s"], f["ticket_lifetime_s"]["value"],
                _join(_txt(x[2]) for x in k), "ticket_lifetime_s")
            e = f["ticket_max_early_data"]
            add("ticket_max_early_data", e, "none" if e["value"] is None else e["value"],
                _join("none" if x[3] is None else str(x[3]) for x in k) if k else None, "ticket_max_early_data")
            add("resumption", f["resumption"], f["resumption"]["value"], any_of([r[7] for r in resume]), "resumption")
            add("zero_rtt", f["zero_rtt"], f["zero_rtt"]["value"], any_of([r[8] for r in resume]), "zero_rtt")
        if "retry_with_validate_addr" in f and (va or theirs.get((VALIDATE_PORT, "retry"))):
            e = f["retry_with_validate_addr"]
            add("retry", e, e["value"], any_of([r[4] for r in va]), "retry", port=VALIDATE_PORT)
    return rows
