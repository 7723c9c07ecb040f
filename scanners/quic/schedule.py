"""``scan quic-turnover`` as a scheduler of future connections (issues 24 and 26).

Per target address two things run side by side:

- **Samples** (key turnover): every ``every_s`` for ``duration_s`` one *fresh* connection
  (round r at start + r x every_s). Its tokens and tickets, with every other connection's,
  feed the key-identifier inference (turnover.py); it also shows whether the server forces
  Retry. Nothing of a sample is held: its rows are written and the summary is computed from
  the database when the target is done.
- **Lifetime searches**, one per kind (``ticket``; ``token`` only where a fresh connection
  got a Retry, since token acceptance is invisible elsewhere): the grid of ages a = k x
  every_s (k = 1 .. n, n = duration_s / every_s) is searched by the age search
  (netsurvey/agesearch: rounds of a k-ary search, as ``scan tls-lifetime``); this module
  is its QUIC :class:`~netsurvey.agesearch.Probe`. Each age is tried with state that was
  **never presented before**: one *establish* connection per age yields a ticket (token),
  which one *represent* connection presents exactly once, k x every_s after its arrival.
  Single-use tickets (quinn, aioquic's own server) therefore read as their real lifetime;
  re-presenting one ticket at growing ages, as this probe did before, read quinn's 86400 s
  tickets as a 2-4 s lifetime (issue 24). Whether state is single-use is a fact of its own:
  the first state a search sees accepted is presented once more at once (*reuse*).
- **Bounded memory**: at most ``slots`` states per (target, kind) are held (the search
  drops states whose age another outcome decided), at most ``hosts_in_flight`` targets are
  open, and samples hold nothing.
- **Etiquette**: every connection waits for the run's limiter (global and per-destination);
  establish connections to one address are planned one per-destination interval apart, so
  the attempts, each due at its state's age, inherit the spacing.
- **Resumable**: every sample, planned attempt (with its state: the serialised ticket or the
  token), outcome, drop and finished search is appended to ``quic_turnover_event``
  (migration 0163). ``--resume RUN`` reads the brackets back, presents stored states that
  are still due at their ages, logs those whose due time passed while no process ran as
  ``lost`` (the dead process may have presented them: presenting them again would break
  "never presented before") and re-tries their ages with fresh state in a new round.
"""
from __future__ import annotations

import datetime as dt
import json
import math
import time
from dataclasses import dataclass
from typing import Callable, Iterable, Optional

from aioquic.tls import CipherSuite, SessionTicket

from netsurvey.agesearch import AgeSearch, Chain, Held, Host, Missing, Outcome, default_slots, prior_chains, unanswered
from netsurvey.scanning import ScanTarget

from .records import TurnoverOptions

KINDS = ("ticket", "token")


# ------------------------------------------------------------------ state to and from bytes
def ticket_bytes(t: SessionTicket) -> bytes:
    """An aioquic SessionTicket as JSON bytes (it includes the resumption secret)."""
    return json.dumps({
        "age_add": t.age_add, "cipher_suite": int(t.cipher_suite),
        "not_valid_after": t.not_valid_after.timestamp(), "not_valid_before": t.not_valid_before.timestamp(),
        "resumption_secret": t.resumption_secret.hex(), "server_name": t.server_name, "ticket": t.ticket.hex(),
        "max_early_data_size": t.max_early_data_size,
        "other_extensions": [[k, v.hex()] for k, v in t.other_extensions]}).encode()


def ticket_from_bytes(b: bytes) -> SessionTicket:
    d = json.loads(b)
    utc = dt.timezone.utc
    return SessionTicket(
        age_add=d["age_add"], cipher_suite=CipherSuite(d["cipher_suite"]),
        not_valid_after=dt.datetime.fromtimestamp(d["not_valid_after"], utc),
        not_valid_before=dt.datetime.fromtimestamp(d["not_valid_before"], utc),
        resumption_secret=bytes.fromhex(d["resumption_secret"]), server_name=d["server_name"],
        ticket=bytes.fromhex(d["ticket"]), max_early_data_size=d["max_early_data_size"],
        other_extensions=[(k, bytes.fromhex(v)) for k, v in d["other_extensions"]])


# ------------------------------------------------------------------ search state
@dataclass
class Samples:
    """A target's sample series: round r at anchor_w + r x every_s (unix s)."""

    anchor_w: float
    next_round: int = 0


@dataclass(frozen=True)
class PriorHost:
    """What the event log says about a target of an interrupted run."""

    anchor_w: float
    rounds_done: frozenset
    chains: dict               # kind -> netsurvey.agesearch.PriorChain
    restored: tuple            # (kind, round, grid_index, due_w, (conn_id, state bytes))
    samples_finished: bool
    reused: frozenset = frozenset()   # kinds whose first accepted state was presented again


#: log(target, kind, round, grid_index, event, due_w, detail, conn_id, state) appends an event
EventLog = Callable[..., None]
#: record(target, conn_id, purpose, round, err, result, presented) writes one connection
Recorder = Callable[..., None]


def _wall_to_mono(w: float) -> float:
    return time.monotonic() + (w - time.time())


class TurnoverScheduler:
    """Drives samples and lifetime searches of many targets with bounded held state (the
    QUIC :class:`~netsurvey.agesearch.Probe` of an :class:`~netsurvey.agesearch.AgeSearch`,
    plus the sample series).

    :param opts: every_s (sample interval and age step), duration_s (sample span, largest age).
    :param connect: ``await connect(target, token=, ticket=)`` -> (HandshakeResult, raw
        tickets, HandshakeFailed or None); waits for the run's limiter itself.
    :param record: writes a connection (see :data:`Recorder`); ``next_conn_id()`` numbers them.
    :param log: appends to the event log (see :data:`EventLog`).
    :param on_host_done: called with a target when its samples and searches are over.
    """

    def __init__(self, opts: TurnoverOptions, *, connect, record: Recorder, next_conn_id: Callable[[], int],
                 log: EventLog, on_host_done: Callable[[ScanTarget], None], slots: int = 0,
                 hosts_in_flight: int = 1000, concurrency: int = 100, per_destination: Optional[float] = None,
                 tick: Callable[[], None] = lambda: None):
        self.o = opts
        self.step = opts.every_s
        n = max(1, int(opts.duration_s / opts.every_s + 1e-9))
        self.rounds = n + 1
        self.slots = slots or default_slots(n)
        self.connect, self.record, self.next_conn_id, self.log = connect, record, next_conn_id, log
        self.counts = {"connections": 0, "samples": 0, "attempts": 0, "accepted": 0}
        self.reused: set[tuple] = set()      # (host key, kind): first accepted state presented again
        self.search = AgeSearch(self, n=n, step=self.step, slots=self.slots, hosts_in_flight=hosts_in_flight,
                                log=self._log, per_destination=per_destination, concurrency=concurrency, tick=tick,
                                on_host_done=lambda host: on_host_done(host.target), name="turnover scheduler")

    def _log(self, c: Chain, k: Optional[int], event: str, due_w: Optional[float], detail: Optional[str],
             held: Optional[Held]) -> None:
        conn_id, state = held.state if held is not None else (None, None)
        self.log(c.host.target, c.name, c.round, k, event, due_w, detail, conn_id,
                 ticket_bytes(state) if c.name == "ticket" and state is not None else state)

    def _admit(self, t: ScanTarget, prior: dict) -> None:
        ph: Optional[PriorHost] = prior.get((t.hostname, t.address, t.port))
        now_w = time.time()
        host = Host((t.hostname, t.address, t.port), t.address, t)  # type: ignore[arg-type]  # resolved
        s = Samples(ph.anchor_w if ph else now_w)
        done = False
        if ph is None:
            self.log(t, "sample", None, None, "started", None, None, None, None)
        else:
            # samples: the next round not done whose time has not passed by more than half a step
            late = max(0, math.ceil((now_w - s.anchor_w) / self.step - 0.5)) if now_w > s.anchor_w else 0
            s.next_round = max([late] + [r + 1 for r in ph.rounds_done])
            done = ph.samples_finished or s.next_round >= self.rounds
            self.reused.update((host.key, kind) for kind in ph.reused)
        if not done:
            host.busy = 1
            self.search.push(_wall_to_mono(s.anchor_w + s.next_round * self.step), "establish", self._sample, host, s)
        self.search.open(host, KINDS, ph.chains if ph else {}, ph.restored if ph else ())

    # ------------------------------------------------------------------ the samples
    async def _sample(self, host: Host, s: Samples) -> None:
        r = s.next_round
        s.next_round += 1
        if s.next_round < self.rounds:
            self.search.push(_wall_to_mono(s.anchor_w + s.next_round * self.step), "establish", self._sample, host, s)
        cid = self.next_conn_id()
        h, _, err = await self.connect(host.target)
        self.record(host.target, cid, "fresh", r, err, h, None)
        self.counts["connections"] += 1
        self.counts["samples"] += 1
        self.log(host.target, "sample", r, None, "sampled", None, None, cid, None)
        if s.next_round >= self.rounds:
            host.busy = 0
            self.search.settle(host)

    # ------------------------------------------------------------------ the probe
    async def establish(self, c: Chain, k: int) -> Held | Missing:
        t = c.host.target
        cid = self.next_conn_id()
        h, raw, err = await self.connect(t)
        self.record(t, cid, "establish", c.round, err, h, None)
        self.counts["connections"] += 1
        if err is not None:
            return Missing()
        # decisive only before anything was planned: the first token-chain connection without
        # Retry, or the last round-1 connection without a ticket; later (a ticket that came too
        # late, a Retry under load only) the age stays undecided
        if c.name == "ticket" and not raw:
            return Missing("not-offered")
        if c.name == "token" and not (h.retry and h.tokens):
            # token acceptance shows only as "no Retry": unobservable where fresh
            # connections get no Retry (or no token comes)
            return Missing("no-retry", any_round=True) if not h.retry else Missing("not-offered")
        if c.name == "ticket":
            state, arrived = raw[-1], h.tickets[-1].received_at.timestamp()
        else:
            state, arrived = h.tokens[-1].token, h.tokens[-1].received_at.timestamp()
        return Held((cid, state), _wall_to_mono(arrived), arrived)

    async def _present(self, c: Chain, held: Held, purpose: str, rnd: Optional[int]):
        """One connection presenting ``held``: (accepted or None if it failed, err, age s)."""
        t = c.host.target
        cid = self.next_conn_id()
        conn_id, state = held.state
        tok = state if c.name == "token" else None
        tik = state if c.name == "ticket" else None
        h, _, err = await self.connect(t, token=tok, ticket=tik)
        age = h.started_at.timestamp() - held.born_w
        presented = (conn_id, age, None, None) if c.name == "token" else (None, None, conn_id, age)
        self.record(t, cid, purpose, rnd, err, h, presented)
        self.counts["connections"] += 1
        if err is not None:
            return None, err, age
        return (not h.retry) if c.name == "token" else h.session_resumed, err, age

    async def present(self, c: Chain, k: int, held: Held) -> Outcome:
        ok, err, age = await self._present(c, held, "represent", c.round)

        def counted() -> None:
            self.counts["attempts"] += 1
            if ok:
                self.counts["accepted"] += 1
                if (c.host.key, c.name) not in self.reused:   # is the state single-use?
                    self.reused.add((c.host.key, c.name))
                    self.search.push(self.search.q.slot(c.host.address), "attempt", self._reuse, c, held)
        return Outcome(ok, age, str(err), then=counted)

    async def _reuse(self, c: Chain, held: Held) -> None:
        """The state accepted first, presented once more: is it single-use?"""
        ok, _, _ = await self._present(c, held, "reuse", c.round)
        self.log(c.host.target, c.name, c.round, None, "reuse", None,
                 "failed" if ok is None else ("accepted" if ok else "refused"), None, None)

    def thaw(self, c: Chain, stored: tuple) -> tuple:
        conn_id, state = stored
        return conn_id, ticket_from_bytes(state) if c.name == "ticket" else bytes(state)

    # ------------------------------------------------------------------ the loop
    async def run(self, targets: Iterable[ScanTarget], prior: Optional[dict] = None) -> None:
        prior = prior or {}
        await self.search.run(targets, lambda t: self._admit(t, prior))


def prior_state(conn, run_id: int, now_w: float) -> tuple[dict, int]:
    """Targets of run ``run_id`` from its event log -> ({(host, address, port): PriorHost},
    planned attempts logged as lost now (their due time passed while no process ran: the dead
    process may have presented them, and state is presented only once))."""
    hosts: dict = {}
    for h, a, p, at in conn.execute(
            "SELECT hostname, host(address), port, min(at) FROM quic_turnover_event WHERE run_id = %s AND "
            "event = 'started' GROUP BY 1, 2, 3", (run_id,)).fetchall():
        hosts[(h, a, p)] = {"anchor": at.timestamp(), "rounds": set(), "chains": {}, "restored": [], "reused": set()}
    for h, a, p, rnd in conn.execute(
            "SELECT hostname, host(address), port, round FROM quic_turnover_event WHERE run_id = %s AND "
            "event = 'sampled'", (run_id,)).fetchall():
        if (h, a, p) in hosts:
            hosts[(h, a, p)]["rounds"].add(rnd)
    for (h, a, p, kind), pc, (reuse,) in prior_chains(
            conn, "quic_turnover_event", ("hostname", "host(address)", "port", "kind"), run_id, accepted="accepted",
            where="kind <> 'sample'", extra=("bool_or(event = 'reuse')",)):
        if (h, a, p) in hosts:
            hosts[(h, a, p)]["chains"][kind] = pc
            if reuse:
                hosts[(h, a, p)]["reused"].add(kind)
    pending = unanswered("quic_turnover_event", ("hostname", "address", "port", "kind"), nullable=("hostname",))
    now = dt.datetime.fromtimestamp(now_w, dt.timezone.utc)
    for h, a, p, kind, rnd, k, due, cid, state in conn.execute(
            "SELECT p.hostname, host(p.address), p.port, p.kind, p.round, p.grid_index, p.due_at, p.conn_id, "
            "p.state " + pending + " AND p.due_at > %s AND p.state IS NOT NULL", (run_id, now)).fetchall():
        if (h, a, p) in hosts:
            hosts[(h, a, p)]["restored"].append((kind, rnd, k, due.timestamp(), (cid, bytes(state))))
    lost = conn.execute(
        "INSERT INTO quic_turnover_event (run_id, hostname, address, port, kind, round, grid_index, event, at) "
        "SELECT p.run_id, p.hostname, p.address, p.port, p.kind, p.round, p.grid_index, 'lost', %s "
        + pending + " AND (p.due_at <= %s OR p.state IS NULL)", (now, run_id, now)).rowcount
    out = {k: PriorHost(v["anchor"], frozenset(v["rounds"]), v["chains"], tuple(v["restored"]), False,
                        frozenset(v["reused"])) for k, v in hosts.items()}
    return out, lost
