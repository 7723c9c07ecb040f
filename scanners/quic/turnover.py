"""Turnover: what one host address showed over a ``netsurvey scan quic-turnover`` run, and
the per-address summary (``quic_turnover_host``).

The connections are made by the scheduler (schedule.py): a *fresh* sample every
``every_s`` (key series), and per lifetime search (ticket; token where Retry makes token
acceptance visible) *establish* connections whose state is presented exactly once, at one
age, by a *represent* connection; the first accepted state is presented once more
(*reuse*). Nothing is kept in memory: :func:`host_summaries` reads one address at a time
back from quic_connection / quic_token / quic_ticket.

Key identifiers are inferred, not assumed (tokens of a layout recognised by tokens.py - the
testbed's server, ngtcp2, quic-go, quinn - take the key id length from that layout instead, so a
constant format byte is not read as a key id): the longest prefix shared by the tokens (tickets)
issued within one round (all connections of one ``every_s`` interval) is their key
identifier; its most common length over all rounds is used for the host, and a change of
that prefix between consecutive items is a key change. Periods are the median time between
changes and are accurate to one interval.
"""
from __future__ import annotations

import statistics
from collections import Counter
from dataclasses import dataclass, field
from typing import Iterator, Optional, Sequence

from .tokens import classify_token, common_key_prefix_len


@dataclass
class _Sample:
    """One issued identifier: round, arrival (unix s) and bytes."""

    round_no: int
    at: float
    data: bytes


@dataclass
class HostTurnover:
    """Everything one host address showed during a turnover run (ages in s)."""

    rounds: int = 0
    first_at: Optional[float] = None
    last_at: Optional[float] = None
    connections_ok: int = 0
    fresh_retry: list[bool] = field(default_factory=list)
    tokens: list[_Sample] = field(default_factory=list)
    tickets: list[_Sample] = field(default_factory=list)
    ticket_lifetimes: list[int] = field(default_factory=list)
    ticket_early: list[Optional[int]] = field(default_factory=list)
    token_presentations: list[tuple[float, bool]] = field(default_factory=list)   # (age s, accepted)
    ticket_presentations: list[tuple[float, bool]] = field(default_factory=list)
    zero_rtt: list[tuple[float, bool]] = field(default_factory=list)
    token_reuse: Optional[bool] = None      # the first accepted token accepted again
    ticket_reuse: Optional[bool] = None


def common_prefix_len(items: Sequence[bytes]) -> int:
    """Length of the longest prefix all ``items`` share (bytes)."""
    if len(items) < 2:
        return 0
    n = min(len(x) for x in items)
    first = items[0]
    for i in range(n):
        if any(x[i] != first[i] for x in items[1:]):
            return i
    return n


def key_prefix_len(samples: Sequence[_Sample]) -> int:
    """Most common per-round shared-prefix length (ties: the shorter); 0 if unknown."""
    by_round: dict[int, list[bytes]] = {}
    for s in samples:
        by_round.setdefault(s.round_no, []).append(s.data)
    lens = [common_prefix_len(v) for v in by_round.values() if len(v) >= 2]
    if not lens:
        return 0
    counts = Counter(lens)
    best = max(counts.values())
    return min(n for n, c in counts.items() if c == best)


def key_changes(samples: Sequence[_Sample], plen: int) -> tuple[int, int, Optional[float]]:
    """(distinct keys, changes, median period between changes in s) for key prefix length
    ``plen``; period None with fewer than two changes."""
    if plen <= 0 or not samples:
        return (1 if samples else 0), 0, None
    ordered = sorted(samples, key=lambda s: s.at)
    keys = [s.data[:plen] for s in ordered]
    change_times = [ordered[i].at for i in range(1, len(keys)) if keys[i] != keys[i - 1]]
    period = None
    if len(change_times) >= 2:
        period = statistics.median(b - a for a, b in zip(change_times, change_times[1:]))
    return len(set(keys)), len(change_times), period


def _bounds(pres: Sequence[tuple[float, bool]]) -> tuple[Optional[float], Optional[float]]:
    acc = [a for a, ok in pres if ok]
    rej = [a for a, ok in pres if not ok]
    return (max(acc) if acc else None), (min(rej) if rej else None)


def summarize(h: HostTurnover, every_s: float) -> tuple:
    """The quic_turnover_host columns after (run_id, rank, hostname, address)."""
    retry_on_fresh = any(h.fresh_retry) if h.fresh_retry else None
    tok_format, tok_known_plen = token_format(h.tokens)
    tok_plen = key_prefix_len(h.tokens) if tok_known_plen is None else tok_known_plen
    tik_plen = key_prefix_len(h.tickets)
    tok_keys, tok_changes, tok_period = key_changes(h.tokens, tok_plen)
    tik_keys, tik_changes, tik_period = key_changes(h.tickets, tik_plen)
    tok_acc, tok_rej = _bounds(h.token_presentations) if retry_on_fresh else (None, None)
    tik_acc, tik_rej = _bounds(h.ticket_presentations)
    z_acc, z_rej = _bounds(h.zero_rtt)
    early = [e for e in h.ticket_early if e is not None]
    observed = (h.last_at - h.first_at) if h.first_at is not None else 0.0  # type: ignore[operator]  # set together
    return (every_s, h.rounds, observed, h.connections_ok, retry_on_fresh,
            bool(h.tokens), sorted({len(s.data) for s in h.tokens}), tok_plen if h.tokens else None,
            tok_keys if h.tokens else None, tok_changes if h.tokens else None, tok_period, tok_acc, tok_rej,
            bool(h.tickets), max(h.ticket_lifetimes) if h.ticket_lifetimes else None,
            max(early) if early else None, sorted({len(s.data) for s in h.tickets}),
            tik_plen if h.tickets else None, tik_keys if h.tickets else None,
            tik_changes if h.tickets else None, tik_period, tik_acc, tik_rej, z_acc, z_rej, tok_format,
            h.token_reuse if retry_on_fresh else None, h.ticket_reuse,
            len(h.token_presentations) if retry_on_fresh else None, len(h.ticket_presentations))


def token_format(samples: Sequence[_Sample]) -> tuple[Optional[str], Optional[int]]:
    """(layout name, key prefix length) of a host's tokens: the one recognised layout they
    all share, with its key prefix length; ('mixed' | 'unknown', None) otherwise; (None,
    None) without tokens."""
    if not samples:
        return None, None
    lays = [classify_token(s.data) for s in samples]
    fams = {x.family for x in lays}
    plen = common_key_prefix_len(lays)
    return (fams.pop() if len(fams) == 1 else "mixed"), plen



def _host_turnover(conn, run_id: int, hostname: Optional[str], address: str, port: int,
                   every_s: float) -> HostTurnover:
    """One target's observations, read back from the run's rows."""
    out = HostTurnover()
    conns = conn.execute(
        """SELECT conn_id, purpose, round, status = 'success', extract(epoch FROM started_at)::float8, retry,
                  presented_token_len IS NOT NULL, presented_token_age_s, presented_ticket_prefix IS NOT NULL,
                  presented_ticket_age_s, session_resumed, early_data_sent, early_data_accepted
           FROM quic_connection WHERE run_id = %s AND hostname IS NOT DISTINCT FROM %s AND address = %s
             AND port = %s ORDER BY started_at, conn_id""", (run_id, hostname, address, port)).fetchall()
    fresh_at = [at for _, purpose, _, _, at, *_ in conns if purpose == "fresh"]
    out.rounds = len({rnd for _, purpose, rnd, *_ in conns if purpose == "fresh"})
    if fresh_at:
        out.first_at, out.last_at = min(fresh_at), max(fresh_at)
    anchor = out.first_at if out.first_at is not None else (conns[0][4] if conns else 0.0)
    for (_cid, purpose, _rnd, ok, _at, retry, tok_p, tok_age, tik_p, tik_age, resumed, early_sent,
         early_ok) in conns:
        if not ok:
            continue
        out.connections_ok += 1
        if purpose in ("fresh", "establish"):
            out.fresh_retry.append(bool(retry))
        elif purpose == "represent":
            if tok_p:
                out.token_presentations.append((tok_age, not retry))
            if tik_p:
                out.ticket_presentations.append((tik_age, bool(resumed)))
                if early_sent:
                    out.zero_rtt.append((tik_age, bool(early_ok)))
        elif purpose == "reuse":
            if tok_p and out.token_reuse is None:
                out.token_reuse = not retry
            if tik_p and out.ticket_reuse is None:
                out.ticket_reuse = bool(resumed)
    bucket = (lambda at: int((at - anchor) // every_s)) if every_s > 0 else (lambda at: 0)
    for (at, data) in conn.execute(
            """SELECT extract(epoch FROM t.received_at)::float8, t.token FROM quic_token t
               JOIN quic_connection c USING (run_id, conn_id)
               WHERE t.run_id = %s AND c.hostname IS NOT DISTINCT FROM %s AND c.address = %s AND c.port = %s
               ORDER BY t.received_at""", (run_id, hostname, address, port)).fetchall():
        out.tokens.append(_Sample(bucket(at), at, bytes(data)))
    for (at, data, life, early) in conn.execute(
            """SELECT extract(epoch FROM t.received_at)::float8, t.ticket, t.lifetime_s, t.max_early_data
               FROM quic_ticket t JOIN quic_connection c USING (run_id, conn_id)
               WHERE t.run_id = %s AND c.hostname IS NOT DISTINCT FROM %s AND c.address = %s AND c.port = %s
               ORDER BY t.received_at""", (run_id, hostname, address, port)).fetchall():
        out.tickets.append(_Sample(bucket(at), at, bytes(data)))
        out.ticket_lifetimes.append(life)
        out.ticket_early.append(early)
    return out


def host_summaries(conn, run_id: int, every_s: float, targets) -> Iterator[tuple[tuple, HostTurnover]]:
    """Per target of ``targets`` (ScanTargets: this process's, not another shard's) that made
    a connection, one at a time (memory is one target's rows): ((rank, hostname, address,
    port), observations)."""
    seen = set()
    for t in targets:
        key = (t.hostname, t.address, t.port)
        if key in seen:
            continue
        seen.add(key)
        h = _host_turnover(conn, run_id, t.hostname, t.address, t.port, every_s)
        if h.rounds or h.connections_ok or h.fresh_retry:
            yield (t.rank, t.hostname, t.address, t.port), h
