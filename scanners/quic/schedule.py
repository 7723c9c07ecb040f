"""``scan quic-turnover`` as a scheduler of future connections (issues 24 and 26).

Per target address two things run side by side:

- **Samples** (key turnover): every ``every_s`` for ``duration_s`` one *fresh* connection
  (round r at start + r x every_s). Its tokens and tickets, with every other connection's,
  feed the key-identifier inference (turnover.py); it also shows whether the server forces
  Retry. Nothing of a sample is held: its rows are written and the summary is computed from
  the database when the target is done.
- **Lifetime searches**, one per kind (``ticket``; ``token`` only where a fresh connection
  got a Retry, since token acceptance is invisible elsewhere): the grid of ages a = k x
  every_s (k = 1 .. n, n = duration_s / every_s) is searched in rounds of a k-ary search
  (netsurvey/agesearch.py, as ``scan tls-lifetime``). Each age is tried with state that was
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

import asyncio
import datetime as dt
import json
import math
import time
from dataclasses import dataclass, field
from typing import Callable, Iterable, Optional

from aioquic.tls import CipherSuite, SessionTicket

from netsurvey.agesearch import DueQueue, decided_index, default_slots, next_points
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
class Held:
    """A state waiting for its one presentation (all that is kept of its establish connection).

    :ivar arrived_w: its arrival, unix s (the age counts from here).
    """

    conn_id: int
    arrived_w: float
    state: object          # SessionTicket (ticket) or bytes (token)


@dataclass
class Chain:
    """Search state of one (target, kind)."""

    host: "HostPlan"
    kind: str
    n: int
    lo: int = 0
    hi: int = 0
    round: int = 0
    pending: dict = field(default_factory=dict)      # grid index -> Held
    establishing: int = 0
    bracket_at_round_start: tuple = (0, 0)
    finished: bool = False
    planned_any: bool = False
    stalls: int = 0
    reuse_done: bool = False

    def __post_init__(self):
        if not self.hi:
            self.hi = self.n + 1


@dataclass
class HostPlan:
    """One target: its sample series and its searches."""

    target: ScanTarget
    anchor_w: float            # sample round 0, unix s
    rounds: int                # sample rounds in all
    next_round: int = 0
    chains: dict = field(default_factory=dict)     # kind -> Chain
    samples_done: bool = False

    @property
    def key(self) -> tuple:
        return (self.target.hostname, self.target.address, self.target.port)


@dataclass(frozen=True)
class PriorChain:
    """What the event log says about a search of an interrupted run."""

    lo: int
    hi: int
    round: int
    finished: bool
    reuse_done: bool


@dataclass(frozen=True)
class PriorHost:
    anchor_w: float
    rounds_done: frozenset
    chains: dict               # kind -> PriorChain
    restored: tuple            # (kind, round, grid_index, due_w, conn_id, state bytes)
    samples_finished: bool


#: log(host, kind, round, grid_index, event, due_w, detail, conn_id, state) appends an event
EventLog = Callable[..., None]
#: record(target, conn_id, purpose, round, err, result, presented) writes one connection
Recorder = Callable[..., None]


def _wall_to_mono(w: float) -> float:
    return time.monotonic() + (w - time.time())


class TurnoverScheduler:
    """Drives samples and lifetime searches of many targets with bounded held state.

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
        self.n = max(1, int(opts.duration_s / opts.every_s + 1e-9))
        self.rounds = self.n + 1
        self.slots = slots or default_slots(self.n)
        self.window = max(1, hosts_in_flight)
        self.connect, self.record, self.next_conn_id, self.log = connect, record, next_conn_id, log
        self.on_host_done = on_host_done
        self.tick = tick
        self.sem = asyncio.Semaphore(max(1, concurrency))
        self.q = DueQueue(per_destination, self.window)
        self.wake = asyncio.Event()
        self.open: dict[tuple, HostPlan] = {}
        self.tasks: set = set()
        self.held = 0
        self.peak_held = 0
        self.peak_held_target = 0
        self._held_by: dict[tuple, int] = {}
        self.rounds_max = 0
        self.counts = {"connections": 0, "samples": 0, "attempts": 0, "accepted": 0}

    # ------------------------------------------------------------------ bookkeeping
    def _hold(self, c: Chain, delta: int) -> None:
        k = c.host.key
        self.held += delta
        self._held_by[k] = self._held_by.get(k, 0) + delta
        self.peak_held = max(self.peak_held, self.held)
        self.peak_held_target = max(self.peak_held_target, self._held_by[k])
        if self._held_by[k] == 0:
            del self._held_by[k]

    def _push(self, due_m: float, kind: str, item) -> None:
        self.q.push(due_m, kind, item)
        self.wake.set()

    def _open(self, t: ScanTarget, prior: dict) -> None:
        ph: Optional[PriorHost] = prior.get((t.hostname, t.address, t.port))
        now_w = time.time()
        hp = HostPlan(t, ph.anchor_w if ph else now_w, self.rounds)
        if ph is None:
            self.log(hp, "sample", None, None, "started", None, None, None, None)
        self.open[hp.key] = hp
        # samples: the next round not done whose time has not passed by more than half a step
        if ph is not None:
            late = max(0, math.ceil((now_w - hp.anchor_w) / self.step - 0.5)) if now_w > hp.anchor_w else 0
            done = ph.rounds_done
            hp.next_round = max([late] + [r + 1 for r in done])
            hp.samples_done = ph.samples_finished or hp.next_round >= self.rounds
        if not hp.samples_done:
            self._push(_wall_to_mono(hp.anchor_w + hp.next_round * self.step), "establish", ("sample", hp, None))
        restored: dict = {}
        for kind, rnd, k, due_w, conn_id, state in (ph.restored if ph else ()):
            restored.setdefault(kind, []).append((rnd, k, due_w, conn_id, state))
        for kind in KINDS:
            c = Chain(hp, kind, self.n)
            pc = ph.chains.get(kind) if ph else None
            if pc is not None:
                if pc.finished:
                    continue
                c.lo, c.hi, c.round, c.reuse_done = pc.lo, pc.hi or self.n + 1, pc.round, pc.reuse_done
            hp.chains[kind] = c
            back = [r for r in restored.get(kind, ()) if r[0] == c.round and c.lo < r[1] < c.hi]
            if not back:
                self._start_round(c)
                continue
            c.planned_any = True
            c.bracket_at_round_start = (c.lo, c.hi)
            for _, k, due_w, conn_id, state in back:
                held = Held(conn_id, due_w - k * self.step,
                            ticket_from_bytes(state) if kind == "ticket" else bytes(state))
                c.pending[k] = held
                self._hold(c, +1)
                self._push(_wall_to_mono(due_w), "attempt", ("attempt", c, k))
        self._maybe_done(hp)

    def _start_round(self, c: Chain) -> None:
        pts = next_points(c.lo, c.hi, self.slots)
        if not pts:
            self._finish(c, self._why_done(c))
            return
        c.round += 1
        self.rounds_max = max(self.rounds_max, c.round)
        c.bracket_at_round_start = (c.lo, c.hi)
        for k in sorted(pts, reverse=True):      # largest ages first
            c.establishing += 1
            self._push(self.q.slot(c.host.target.address), "establish", ("establish", c, k))  # type: ignore[arg-type]  # resolved

    def _why_done(self, c: Chain) -> str:
        if c.lo >= self.n:
            return "accepted-at-max-age"
        if c.hi <= 1:
            return "refused-at-first-step"
        return "bracketed"

    def _finish(self, c: Chain, why: str) -> None:
        if c.finished:
            return
        c.finished = True
        for k in list(c.pending):
            self._drop(c, k)
        self.log(c.host, c.kind, c.round, None, "finished", None, why, None, None)
        self._maybe_done(c.host)
        self.wake.set()

    def _maybe_done(self, hp: HostPlan) -> None:
        if hp.key in self.open and hp.samples_done and all(c.finished for c in hp.chains.values()):
            del self.open[hp.key]
            self.on_host_done(hp.target)

    def _drop(self, c: Chain, k: int) -> None:
        if c.pending.pop(k, None) is not None:
            self._hold(c, -1)
            self.log(c.host, c.kind, c.round, k, "dropped", None, None, None, None)

    def _round_over(self, c: Chain) -> None:
        if c.finished or c.establishing or c.pending:
            return
        if (c.lo, c.hi) == c.bracket_at_round_start:
            c.stalls += 1
            if c.stalls >= 2:
                self._finish(c, "no-progress")
                return
        else:
            c.stalls = 0
        self._start_round(c)

    # ------------------------------------------------------------------ the jobs
    async def _sample(self, hp: HostPlan) -> None:
        r = hp.next_round
        hp.next_round += 1
        if hp.next_round < self.rounds:
            self._push(_wall_to_mono(hp.anchor_w + hp.next_round * self.step), "establish", ("sample", hp, None))
        cid = self.next_conn_id()
        h, _, err = await self.connect(hp.target)
        self.record(hp.target, cid, "fresh", r, err, h, None)
        self.counts["connections"] += 1
        self.counts["samples"] += 1
        self.log(hp, "sample", r, None, "sampled", None, None, cid, None)
        if hp.next_round >= self.rounds:
            hp.samples_done = True
            self._maybe_done(hp)

    async def _establish(self, c: Chain, k: int) -> None:
        try:
            if c.finished or not c.lo < k < c.hi:
                return
            cid = self.next_conn_id()
            h, raw, err = await self.connect(c.host.target)
            self.record(c.host.target, cid, "establish", c.round, err, h, None)
            self.counts["connections"] += 1
            if c.finished:
                return
            if err is not None:
                return
            lacking = None
            if c.kind == "ticket" and not raw:
                lacking = "not-offered"
            elif c.kind == "token" and not (h.retry and h.tokens):
                # token acceptance shows only as "no Retry": unobservable where fresh
                # connections get no Retry (or no token comes)
                lacking = "no-retry" if not h.retry else "not-offered"
            if lacking is not None:
                # decisive only before anything was planned: the first token-chain connection
                # without Retry, or the last round-1 connection without a ticket; later (a
                # ticket that came too late, a Retry under load only) the age stays undecided
                if not c.planned_any and (lacking == "no-retry" or (c.round == 1 and c.establishing == 1)):
                    self._finish(c, lacking)
                return
            if c.kind == "ticket":
                state, arrived = raw[-1], h.tickets[-1].received_at.timestamp()
            else:
                state, arrived = h.tokens[-1].token, h.tokens[-1].received_at.timestamp()
            c.pending[k] = Held(cid, arrived, state)
            self._hold(c, +1)
            c.planned_any = True
            due_w = arrived + k * self.step
            self.log(c.host, c.kind, c.round, k, "planned", due_w, None, cid,
                     ticket_bytes(state) if c.kind == "ticket" else state)
            self._push(_wall_to_mono(due_w), "attempt", ("attempt", c, k))
        finally:
            if not c.finished and c.establishing > 0:
                c.establishing -= 1
                self._round_over(c)

    async def _present(self, c: Chain, held: Held, purpose: str, rnd: Optional[int]):
        """One connection presenting ``held``: (accepted or None if it failed, result, err, age s)."""
        t = c.host.target
        cid = self.next_conn_id()
        tok = held.state if c.kind == "token" else None
        tik = held.state if c.kind == "ticket" else None
        h, _, err = await self.connect(t, token=tok, ticket=tik)
        age = h.started_at.timestamp() - held.arrived_w
        presented = (held.conn_id, age, None, None) if c.kind == "token" else (None, None, held.conn_id, age)
        self.record(t, cid, purpose, rnd, err, h, presented)
        self.counts["connections"] += 1
        if err is not None:
            return None, h, err, age
        return (not h.retry) if c.kind == "token" else h.session_resumed, h, err, age

    async def _attempt(self, c: Chain, k: int) -> None:
        held = c.pending.get(k)
        if held is None or c.finished:
            return
        ok, h, err, age = await self._present(c, held, "represent", c.round)
        if c.pending.pop(k, None) is None:
            return        # dropped while in flight: its outcome is not needed
        self._hold(c, -1)
        self.counts["attempts"] += 1
        if ok is None:
            self.log(c.host, c.kind, c.round, k, "failed", None, str(err)[:200], None, None)
            self._round_over(c)
            return
        j = decided_index(ok, k, age, self.step, self.n)
        detail = f"decided-as:{j}" if j != k else None
        self.log(c.host, c.kind, c.round, k, "accepted" if ok else "refused", None, detail, None, None)
        if ok:
            self.counts["accepted"] += 1
            if not c.reuse_done:
                c.reuse_done = True
                self._push(self.q.slot(c.host.target.address), "attempt", ("reuse", c, held))  # type: ignore[arg-type]  # resolved
            if j > c.lo:
                c.lo = j
                for i in [i for i in c.pending if i <= j]:
                    self._drop(c, i)
        elif j < c.hi:
            c.hi = j
            for i in [i for i in c.pending if i >= j]:
                self._drop(c, i)
        if c.hi - c.lo <= 1:
            self._finish(c, self._why_done(c))
            return
        self._round_over(c)

    async def _reuse(self, c: Chain, held: Held) -> None:
        """The state accepted first, presented once more: is it single-use?"""
        ok, _, err, _ = await self._present(c, held, "reuse", c.round)
        self.log(c.host, c.kind, c.round, None, "reuse", None,
                 "failed" if ok is None else ("accepted" if ok else "refused"), None, None)

    async def _run_job(self, kind: str, item) -> None:
        try:
            what, a, b = item
            if what == "sample":
                await self._sample(a)
            elif what == "establish":
                await self._establish(a, b)
            elif what == "attempt":
                await self._attempt(a, b)
            else:
                await self._reuse(a, b)
        finally:
            self.sem.release()
            self.wake.set()

    # ------------------------------------------------------------------ the loop
    async def run(self, targets: Iterable[ScanTarget], prior: Optional[dict] = None) -> None:
        prior = prior or {}
        it = iter(targets)
        more = True
        last_tick = time.monotonic()

        def dead(item) -> bool:
            what, c, k = item
            return what == "attempt" and (c.finished or k not in c.pending)

        while True:
            while more and len(self.open) < self.window:
                t = next(it, None)
                if t is None:
                    more = False
                    break
                self._open(t, prior)
            now = time.monotonic()
            if now - last_tick >= 1.0:
                self.tick()
                last_tick = now
            self.q.prune(dead)
            if not self.q:
                if not more and not self.open and not self.tasks:
                    break
                if not self.tasks and self.open:
                    raise RuntimeError(f"turnover scheduler stalled with {len(self.open)} targets open")
                await self._sleep(1.0)
                continue
            job = self.q.pop_due(now)
            if job is None:
                await self._sleep(min(1.0, self.q.next_due() - now))  # type: ignore[operator]  # q not empty
                continue
            await self.sem.acquire()
            task = asyncio.ensure_future(self._run_job(*job))
            self.tasks.add(task)
            task.add_done_callback(self.tasks.discard)
        self.tick()

    async def _sleep(self, s: float) -> None:
        self.wake.clear()
        try:
            await asyncio.wait_for(self.wake.wait(), max(0.0, s))
        except asyncio.TimeoutError:
            pass


def prior_state(conn, run_id: int, now_w: float) -> tuple[dict, int]:
    """Targets of run ``run_id`` from its event log -> ({(host, address, port): PriorHost},
    planned attempts logged as lost now (their due time passed while no process ran: the dead
    process may have presented them, and state is presented only once))."""
    hosts: dict = {}
    for h, a, p, at in conn.execute(
            "SELECT hostname, host(address), port, min(at) FROM quic_turnover_event WHERE run_id = %s AND "
            "event = 'started' GROUP BY 1, 2, 3", (run_id,)).fetchall():
        hosts[(h, a, p)] = {"anchor": at.timestamp(), "rounds": set(), "chains": {}, "restored": [],
                            "samples_finished": False}
    for h, a, p, rnd in conn.execute(
            "SELECT hostname, host(address), port, round FROM quic_turnover_event WHERE run_id = %s AND "
            "event = 'sampled'", (run_id,)).fetchall():
        if (h, a, p) in hosts:
            hosts[(h, a, p)]["rounds"].add(rnd)
    for h, a, p, kind, lo, hi, rnd, fin, reuse in conn.execute(
            """SELECT hostname, host(address), port, kind,
                      coalesce(max(decided) FILTER (WHERE event = 'accepted'), 0),
                      min(decided) FILTER (WHERE event = 'refused'), max(round), bool_or(event = 'finished'),
                      bool_or(event = 'reuse')
               FROM (SELECT *, CASE WHEN detail LIKE 'decided-as:%%' THEN split_part(detail, ':', 2)::int
                                    ELSE grid_index END AS decided
                     FROM quic_turnover_event WHERE run_id = %s AND kind <> 'sample') e
               GROUP BY 1, 2, 3, 4""", (run_id,)).fetchall():
        if (h, a, p) in hosts:
            hosts[(h, a, p)]["chains"][kind] = PriorChain(lo, hi or 0, rnd or 0, bool(fin), bool(reuse))
    pending = """FROM quic_turnover_event pl
           WHERE pl.run_id = %s AND pl.event = 'planned' AND NOT EXISTS (
               SELECT 1 FROM quic_turnover_event o
               WHERE o.run_id = pl.run_id AND o.hostname IS NOT DISTINCT FROM pl.hostname
                 AND o.address = pl.address AND o.port = pl.port AND o.kind = pl.kind AND o.round = pl.round
                 AND o.grid_index = pl.grid_index AND o.event <> 'planned')"""
    now = dt.datetime.fromtimestamp(now_w, dt.timezone.utc)
    for h, a, p, kind, rnd, k, due, cid, state in conn.execute(
            "SELECT pl.hostname, host(pl.address), pl.port, pl.kind, pl.round, pl.grid_index, pl.due_at, pl.conn_id, "
            "pl.state " + pending + " AND pl.due_at > %s AND pl.state IS NOT NULL", (run_id, now)).fetchall():
        if (h, a, p) in hosts:
            hosts[(h, a, p)]["restored"].append((kind, rnd, k, due.timestamp(), cid, bytes(state)))
    lost = conn.execute(
        "INSERT INTO quic_turnover_event (run_id, hostname, address, port, kind, round, grid_index, event, at) "
        "SELECT pl.run_id, pl.hostname, pl.address, pl.port, pl.kind, pl.round, pl.grid_index, 'lost', %s "
        + pending + " AND (pl.due_at <= %s OR pl.state IS NULL)", (now, run_id, now)).rowcount
    out = {k: PriorHost(v["anchor"], frozenset(v["rounds"]), v["chains"], tuple(v["restored"]), False)
           for k, v in hosts.items()}
    return out, lost
