"""Turnover: repeated connections to one host address (``netsurvey scan quic-turnover``).

Every ``every_s`` seconds (a *round*) two connections are made side by side:

1. *fresh*: no state presented. Shows whether Retry is forced, and yields a new token and
   ticket (their key identifiers, lengths, advertised lifetime).
2. *represent*: presents the oldest token and the oldest ticket still held (obtained in an
   earlier round), at their current age. A token counts as accepted when no Retry follows
   (observable only on servers that force Retry without a valid token); a ticket when the
   session is resumed; 0-RTT when the early data is accepted. A refused token/ticket ends its
   chain: everything held is dropped except the state of the current round, so the next
   chain starts one interval later and every chain yields one lifetime sample.

Key identifiers are inferred, not assumed (tokens of a layout recognised by tokens.py - the
testbed's server, ngtcp2, quic-go - take the key id length from that layout instead, so a
constant format byte is not read as a key id): the longest prefix shared by the tokens (tickets)
issued within one round is their key identifier; its most common length over all rounds is
used for the host, and a change of that prefix between rounds is a key change. Periods are
the median time between changes and are accurate to one interval.
"""
from __future__ import annotations

import asyncio
import statistics
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Callable, Optional, Sequence

from aioquic.tls import SessionTicket

from .handshake import HandshakeFailed, quic_connect
from .records import ConnectOptions, HandshakeResult, TurnoverOptions
from .tokens import classify_token, common_key_prefix_len


@dataclass
class _Held:
    """A token or ticket held for later presentation; ``at`` is its arrival (unix s)."""

    conn_id: int
    round_no: int
    at: float
    value: object  # bytes (token) or aioquic SessionTicket


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
    observed = (h.last_at - h.first_at) if h.first_at is not None else 0.0
    return (every_s, h.rounds, observed, h.connections_ok, retry_on_fresh,
            bool(h.tokens), sorted({len(s.data) for s in h.tokens}), tok_plen if h.tokens else None,
            tok_keys if h.tokens else None, tok_changes if h.tokens else None, tok_period, tok_acc, tok_rej,
            bool(h.tickets), max(h.ticket_lifetimes) if h.ticket_lifetimes else None,
            max(early) if early else None, sorted({len(s.data) for s in h.tickets}),
            tik_plen if h.tickets else None, tik_keys if h.tickets else None,
            tik_changes if h.tickets else None, tik_period, tik_acc, tik_rej, z_acc, z_rej, tok_format)


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


#: record(conn_id, purpose, round, status, error, result, presented(token_conn, token_age,
#: ticket_conn, ticket_age)) stores one connection.
Recorder = Callable[..., None]


async def _connect(hostname, address, port, opts: ConnectOptions, token=None, ticket=None):
    try:
        h, raw = await quic_connect(hostname, address, port, opts, token=token, ticket=ticket)
        return h, raw, None
    except HandshakeFailed as exc:
        return exc.partial, [], exc


async def run_host(hostname: Optional[str], address: str, port: int, opts: TurnoverOptions, start: float,
                   next_conn_id: Callable[[], int], record: Recorder, pace=None) -> HostTurnover:
    """Run every round for one address, starting at monotonic time ``start``. ``pace()``
    (the run's limiter for this address) is awaited before every connection but the first,
    which the run path paced."""
    out = HostTurnover()
    tokens: list[_Held] = []
    tickets: list[_Held] = []
    rounds = max(1, int(opts.duration_s // opts.every_s) + 1)
    for r in range(rounds):
        delay = start + r * opts.every_s - time.monotonic()
        if delay > 0:
            await asyncio.sleep(delay)
        now = time.monotonic()
        out.rounds += 1
        out.first_at = now if out.first_at is None else out.first_at
        out.last_at = now
        # the fresh and the represent connection run side by side
        tok = next((x for x in tokens if x.round_no < r), None)
        tik = next((x for x in tickets if x.round_no < r), None)
        fresh_id = next_conn_id()
        if pace is not None and r > 0:
            await pace()
        jobs = [_connect(hostname, address, port, opts.connect)]
        if tok is not None or tik is not None:
            if pace is not None:
                await pace()
            rep_id = next_conn_id()
            t_present = time.time()
            tok_age = t_present - tok.at if tok else None
            tik_age = t_present - tik.at if tik else None
            jobs.append(_connect(hostname, address, port, opts.connect,
                                 token=tok.value if tok else None, ticket=tik.value if tik else None))
        results = await asyncio.gather(*jobs)
        h, raw, err = results[0]
        record(fresh_id, "fresh", r, err, h, None)
        if err is None:
            out.connections_ok += 1
            out.fresh_retry.append(h.retry)
            _collect(out, h, raw, fresh_id, r, tokens, tickets)
        if len(results) < 2:
            continue
        h, raw, err = results[1]
        record(rep_id, "represent", r, err, h, (tok.conn_id if tok else None, tok_age,
                                                tik.conn_id if tik else None, tik_age))
        if err is not None:
            continue
        out.connections_ok += 1
        if tok is not None:
            out.token_presentations.append((tok_age, not h.retry))
            if h.retry and any(out.fresh_retry):
                tokens[:] = [x for x in tokens if x.round_no >= r]  # chain ends
        if tik is not None:
            out.ticket_presentations.append((tik_age, h.session_resumed))
            if h.early_data_sent:
                out.zero_rtt.append((tik_age, h.early_data_accepted))
            if not h.session_resumed:
                tickets[:] = [x for x in tickets if x.round_no >= r]
        _collect(out, h, raw, rep_id, r, tokens, tickets)
    return out


def _collect(out: HostTurnover, h: HandshakeResult, raw: list[SessionTicket], cid: int, r: int,
             tokens: list[_Held], tickets: list[_Held]) -> None:
    for tok in h.tokens:
        at = tok.received_at.timestamp()
        out.tokens.append(_Sample(r, at, tok.token))
        tokens.append(_Held(cid, r, at, tok.token))
    for seen, t in zip(h.tickets, raw):
        at = seen.received_at.timestamp()
        out.tickets.append(_Sample(r, at, seen.ticket))
        out.ticket_lifetimes.append(seen.lifetime_s)
        out.ticket_early.append(seen.max_early_data)
        tickets.append(_Held(cid, r, at, t))
