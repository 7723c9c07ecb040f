"""``scan tls-lifetime`` as a scheduler of future attempts with bounded memory (issue 26).

The thesis's probe (ch. 4.4.1) opens one fresh session per age a = step, 2 step, ...,
max_age up front and presents each exactly once, a seconds after its handshake: at 24 h /
5 min that is 288 sessions per (host, mechanism, version) held for up to a day. Here the
same grid of ages is searched with at most ``slots`` sessions per (host, mechanism,
version) ("chain") at any time:

- **Rounds of a k-ary search.** A chain knows ``lo`` (largest grid index resumed, 0 =
  none) and ``hi`` (smallest index refused, N+1 = none). A round establishes up to
  ``slots`` fresh sessions for indices spread over the open bracket (always including
  ``hi - 1``, so a host that resumes at max_age needs one round) and presents each
  once, at its age. With ``slots = ceil(sqrt(N))`` (the default) two rounds always
  bracket the lifetime to one step: 17 sessions instead of 288 at 24 h / 5 min.
- **Sessions dropped as soon as they can answer nothing.** A refusal at index k drops
  every pending session of the chain for an index > k (under the thesis's own
  monotonicity: a session refused at age a is refused at every larger age), a
  resumption at k drops those < k. A round ends when nothing of it is pending.
- **A window of hosts.** At most ``hosts_in_flight`` targets have chains open, so the
  sessions held are bounded by hosts_in_flight x chains x slots whatever the list size.
- **Etiquette.** Every handshake (initial and attempt) waits for the run's limiter
  (global and per-destination rate); attempts are spread in time because each session's
  age counts from its own handshake, which the limiter already spread.
- **Attempts first.** A due attempt is sent before any due initial handshake: when the
  machine handshakes slower than a full window plans, hosts take longer, but no session is
  presented later than the loop can help (the ages stay the measurement).
- **Resumable.** Every planned attempt, outcome, drop and finished chain is appended to
  ``tls_lifetime_event`` (see :func:`prior_state`): a restarted run reads the brackets back,
  logs the pending attempts as ``lost`` (their ``ssl.SSLSession`` objects lived only in the
  dead process: Python can neither serialise nor re-create one) and re-tries their ages
  with fresh sessions in a new round.

What differs from the thesis's definition (the result rows and ``tls_lifetime_measured_v``
are the same: the largest age resumed and the smallest refused, at the grid's
resolution): the ages of one chain are tried with sessions established at up to
``rounds`` different times (the thesis: all at the start), so a server whose lifetime
changes during the measurement (e.g. a ticket key rotating between rounds) can be
bracketed differently; the search assumes monotonicity (with ``--keep-going`` every age
is tried instead, in rounds of ``slots`` ages: far slower); and the probe takes about
rounds x the lifetime instead of one lifetime.
"""
from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from typing import Callable, Iterable, Optional

from netsurvey.agesearch import DueQueue, decided_index, default_slots, exhaustive_points, next_points  # noqa: F401
from netsurvey.scanning import ScanStatus, ScanTarget

from .sessions import StoredSession


@dataclass(frozen=True)
class Held:
    """A session waiting for its attempt (all that is kept of its initial handshake)."""

    session: object            # ssl.SSLSession
    completed_at: float        # time.monotonic() at the initial handshake's completion
    key_name: Optional[bytes]  # of the newest ticket (ticket mechanism), for the result row


@dataclass
class Chain:
    """Search state of one (target, mechanism, version)."""

    target: ScanTarget
    mechanism: str
    version: str
    n: int
    lo: int = 0
    hi: int = 0                      # set to n + 1 in __post_init__ unless given
    round: int = 0
    decided: set = field(default_factory=set)    # --keep-going only
    pending: dict = field(default_factory=dict)  # grid index -> Held
    establishing: int = 0
    bracket_at_round_start: tuple = (0, 0)
    finished: bool = False
    planned_any: bool = False
    stalls: int = 0                  # consecutive rounds that decided nothing

    def __post_init__(self):
        if not self.hi:
            self.hi = self.n + 1

    @property
    def key(self) -> tuple:
        return (self.target.hostname, self.target.address, self.mechanism, self.version)


@dataclass
class PriorChain:
    """What the event log says about a chain of an interrupted run."""

    lo: int
    hi: int
    round: int
    finished: bool
    decided: frozenset = frozenset()


EventLog = Callable[..., None]   # (chain, grid_index, event, due_at_wall_s, detail[, session_der])


class LifetimeScheduler:
    """Drives the lifetime search of many targets with bounded sessions.

    :param probe: a :class:`~scanners.tls.lifetime.LifetimeProbe` (handshakes through the
        run's limiter, contexts, result emission).
    :param slots: sessions per chain at most.
    :param hosts_in_flight: targets with open chains at most.
    :param log: ``log(chain, grid_index, event, due_at_wall_s, detail)`` appends to the
        event log.
    :param tick: called about once a second (flush the writers).
    """

    def __init__(self, probe, *, slots: int, hosts_in_flight: int, log: EventLog,
                 tick: Callable[[], None] = lambda: None, concurrency: int = 100):
        self.p = probe
        self.o = probe.o
        self.n = int(self.o.max_age // self.o.step + 1e-9)
        self.slots = max(1, slots)
        self.window = max(1, hosts_in_flight)
        self.log = log
        self.tick = tick
        self.sem = asyncio.Semaphore(max(1, concurrency))
        # attempts and initial handshakes in two heaps (netsurvey.agesearch.DueQueue): a due
        # attempt goes before any due handshake (its age is the measurement; a handshake only
        # delays its host). One heap
        # made every attempt wait behind the thousands of handshakes a full window plans at
        # once whenever the machine handshook slower than planned: in the 10K rehearsal on a
        # loaded machine every attempt came minutes late, none resumed (issue 26).
        self.wake = asyncio.Event()
        self.open_targets: dict[tuple, int] = {}     # (host, address) -> chains still open
        self.tasks: set = set()
        #: sessions held now / at most (all chains) / at most by one target
        self.held = 0
        self.peak_held = 0
        self.peak_held_target = 0
        self._held_by_target: dict[tuple, int] = {}
        self.rounds_max = 0
        pdp = getattr(probe.limiter, "per_destination", None) if probe.limiter is not None else None
        #: seconds between two initial handshakes planned for one address
        self.q = DueQueue(pdp, self.window)

    # ------------------------------------------------------------------ bookkeeping
    def _age(self, k: int) -> float:
        return self.o.step * k

    def _hold(self, c: Chain, delta: int) -> None:
        t = (c.target.hostname, c.target.address)
        self.held += delta
        self._held_by_target[t] = self._held_by_target.get(t, 0) + delta
        self.peak_held = max(self.peak_held, self.held)
        self.peak_held_target = max(self.peak_held_target, self._held_by_target[t])
        if self._held_by_target[t] == 0:
            del self._held_by_target[t]

    def _push(self, due: float, kind: str, c: Chain, k: int) -> None:
        self.q.push(due, kind, (c, k))
        self.wake.set()

    def _chains(self, t: ScanTarget) -> list[tuple[str, str]]:
        return [(m, v) for v in self.o.versions for m in self.o.mechanisms if not (m == "id" and v == "1.3")]

    def _open(self, t: ScanTarget, prior: dict, restored: dict) -> None:
        chains = []
        for m, v in self._chains(t):
            c = Chain(t, m, v, self.n)
            pc = prior.get(c.key)
            if pc is not None:
                if pc.finished:
                    continue
                c.lo, c.hi, c.round, c.decided = pc.lo, pc.hi or self.n + 1, pc.round, set(pc.decided)
            chains.append(c)
        if not chains:
            return
        self.open_targets[(t.hostname, t.address)] = len(chains)
        for c in chains:
            back = [r for r in restored.get(c.key, ()) if r[0] == c.round and c.lo < r[1] < c.hi]
            if not back:
                self._start_round(c)
                continue
            # the interrupted round goes on: its stored sessions are presented at their ages
            c.planned_any = True
            c.bracket_at_round_start = (c.lo, c.hi, len(c.decided))
            now_m, now_w = time.monotonic(), time.time()
            for _, k, due_wall, der in back:
                done_m = now_m + (due_wall - self._age(k) - now_w)     # the initial handshake, on this clock
                c.pending[k] = Held(StoredSession(der, True), done_m, None)
                self._hold(c, +1)
                self._push(done_m + self._age(k), "attempt", c, k)

    def _points(self, c: Chain) -> list[int]:
        if self.o.stop_on_refusal:
            return next_points(c.lo, c.hi, self.slots)
        return exhaustive_points(c.decided, self.n, self.slots)

    def _start_round(self, c: Chain) -> None:
        pts = self._points(c)
        if not pts:
            self._finish(c, self._why_done(c))
            return
        c.round += 1
        self.rounds_max = max(self.rounds_max, c.round)
        c.bracket_at_round_start = (c.lo, c.hi, len(c.decided))
        # largest ages first; initial handshakes to one address are spaced by the per-destination
        # interval, so the limiter rarely has to hold a worker (and the attempts, each due at its
        # session's age, inherit the spacing)
        for k in sorted(pts, reverse=True):
            c.establishing += 1
            self._push(self.q.slot(c.target.address), "establish", c, k)  # type: ignore[arg-type]  # resolved

    def _why_done(self, c: Chain) -> str:
        if not self.o.stop_on_refusal:
            return "all-ages-tried"
        if c.lo >= self.n:
            return "resumed-at-max-age"
        if c.hi <= 1:
            return "refused-at-first-step"
        return "bracketed"

    def _finish(self, c: Chain, why: str) -> None:
        if c.finished:
            return
        c.finished = True
        for k in list(c.pending):
            self._drop(c, k)
        self.log(c, None, "finished", None, why)
        t = (c.target.hostname, c.target.address)
        self.open_targets[t] -= 1
        if self.open_targets[t] == 0:
            del self.open_targets[t]
        self.wake.set()

    def _drop(self, c: Chain, k: int) -> None:
        if c.pending.pop(k, None) is not None:
            self._hold(c, -1)
            self.log(c, k, "dropped", None, None)

    def _round_over(self, c: Chain) -> None:
        if c.finished or c.establishing or c.pending:
            return
        if (c.lo, c.hi, len(c.decided)) == c.bracket_at_round_start:
            c.stalls += 1
            if c.stalls >= 2:     # two rounds in a row where every handshake failed: give up
                self._finish(c, "no-progress")
                return
        else:
            c.stalls = 0
        self._start_round(c)

    # ------------------------------------------------------------------ the two jobs
    async def _establish(self, c: Chain, k: int) -> None:
        try:
            if c.finished or k in c.decided or (self.o.stop_on_refusal and not c.lo < k < c.hi):
                return
            h = await self.p._hs(c.target, self.p.contexts[(c.version, c.mechanism)])
            if c.finished:
                return
            if not self.p._offered(h, c.mechanism):
                if c.round == 1 and not c.pending and c.establishing == 1 and not c.planned_any:
                    # no session could be established in the first round: record why, as the thesis probe
                    self.p._attempt(c.target, c.mechanism, c.version, 0.0, h, 0, None,
                                    status=None if not h.ok else ScanStatus.APPLICATION_ERROR.value,
                                    error=None if not h.ok else (h.session_error or "not-offered"))
                    c.establishing -= 1
                    self._finish(c, "initial-failed" if not h.ok else "not-offered")
                    return
                return
            # keep only what the attempt needs (not the certificate, tickets, ...): the session
            c.pending[k] = Held(h.session, h.completed_at, self.p._key(h) if c.mechanism == "ticket" else None)
            self._hold(c, +1)
            c.planned_any = True
            due = h.completed_at + self._age(k)
            self.log(c, k, "planned", time.time() + (due - time.monotonic()), None,
                     h.session.der if isinstance(h.session, StoredSession) else None)
            self._push(due, "attempt", c, k)
        finally:
            if not c.finished and c.establishing > 0:
                c.establishing -= 1
                self._round_over(c)

    async def _attempt(self, c: Chain, k: int) -> None:
        h = c.pending.get(k)
        if h is None or c.finished:
            return
        r = await self.p._hs(c.target, self.p.contexts[(c.version, c.mechanism)], session=h.session)
        if c.pending.pop(k, None) is None:
            return    # dropped while this attempt was in flight: its outcome is not needed
        self._hold(c, -1)
        real_age = (time.monotonic() - h.completed_at) if r.completed_at is None else (
            r.completed_at - (r.handshake_ms or 0) / 1000 - h.completed_at)
        self.p._attempt(c.target, c.mechanism, c.version, round(real_age, 3), r, 0, h.key_name)
        if r.ok and r.resumed:
            # decided by the age actually reached: an attempt the loop or the limiter made late
            # still says the lifetime exceeds that age
            j = decided_index(True, k, real_age, self.o.step, self.n)
            self.log(c, k, "resumed", None, f"decided-as:{j}" if j != k else None)
            c.decided.add(k)
            if j > c.lo:
                c.lo = j
                if self.o.stop_on_refusal:
                    for i in [i for i in c.pending if i <= j]:
                        self._drop(c, i)
        elif r.ok:
            j = decided_index(False, k, real_age, self.o.step, self.n)
            self.log(c, k, "refused", None, f"decided-as:{j}" if j != k else None)
            c.decided.add(k)
            if j < c.hi:
                c.hi = j
                if self.o.stop_on_refusal:
                    for i in [i for i in c.pending if i >= j]:
                        self._drop(c, i)
        else:
            self.log(c, k, "failed", None, (r.error or r.status.value)[:200])
        if self.o.stop_on_refusal and c.hi - c.lo <= 1:
            self._finish(c, self._why_done(c))
            return
        self._round_over(c)

    async def _run_job(self, kind: str, c: Chain, k: int) -> None:
        try:
            await (self._establish(c, k) if kind == "establish" else self._attempt(c, k))
        finally:
            self.sem.release()
            self.wake.set()

    # ------------------------------------------------------------------ the loop
    async def run(self, targets: Iterable[ScanTarget], prior: Optional[dict] = None,
                  restored: Iterable[tuple] = ()) -> None:
        """``prior``: chains of an interrupted run (:func:`prior_state`); ``restored``: its
        pending attempts with stored sessions, (key, round, grid_index, due_at_wall_s, der)."""
        prior = prior or {}
        back: dict = {}
        for key, rnd, k, due, der in restored:
            back.setdefault(key, []).append((rnd, k, due, der))
        it = iter(targets)
        more = True
        last_tick = time.monotonic()
        while True:
            while more and len(self.open_targets) < self.window:
                t = next(it, None)
                if t is None:
                    more = False
                    break
                self._open(t, prior, back)
            now = time.monotonic()
            if now - last_tick >= 1.0:
                self.tick()
                last_tick = now
            self.q.prune(lambda item: item[0].finished or item[1] not in item[0].pending)  # dropped
            if not self.q:
                if not more and not self.open_targets and not self.tasks:
                    break
                if not self.tasks and self.open_targets:
                    raise RuntimeError(f"lifetime scheduler stalled with {len(self.open_targets)} targets open")
                self.wake.clear()
                try:
                    await asyncio.wait_for(self.wake.wait(), 1.0)
                except asyncio.TimeoutError:
                    pass
                continue
            job = self.q.pop_due(now)
            if job is None:
                self.wake.clear()
                try:
                    await asyncio.wait_for(self.wake.wait(), min(1.0, self.q.next_due() - now))  # type: ignore[operator]  # q not empty
                except asyncio.TimeoutError:
                    pass
                continue
            kind, (c, k) = job
            await self.sem.acquire()
            task = asyncio.ensure_future(self._run_job(kind, c, k))
            self.tasks.add(task)
            task.add_done_callback(self.tasks.discard)
        self.tick()


def prior_state(conn, run_id: int) -> tuple[dict, int, list]:
    """Chains of run ``run_id`` from its event log -> ({(host, address, mech, version):
    PriorChain}, number of pending attempts without a stored session, logged as lost now,
    [pending attempts with their stored session: (key, round, grid_index, due_at_wall_s,
    der)]). Decided indices are only needed for --keep-going runs, but cheap to read."""
    import datetime as dt

    rows = conn.execute(
        """SELECT origin_host, host(origin_address), mechanism, version,
                  coalesce(max(decided) FILTER (WHERE event = 'resumed'), 0),
                  min(decided) FILTER (WHERE event = 'refused'),
                  max(round), bool_or(event = 'finished'),
                  array_agg(grid_index) FILTER (WHERE event IN ('resumed', 'refused'))
           FROM (SELECT *, CASE WHEN detail LIKE 'decided-as:%%' THEN split_part(detail, ':', 2)::int
                                ELSE grid_index END AS decided
                 FROM tls_lifetime_event WHERE run_id = %s) e
           GROUP BY 1, 2, 3, 4""", (run_id,)).fetchall()
    out = {}
    for host, addr, m, v, lo, hi, rnd, fin, decided in rows:
        out[(host, addr, m, v)] = PriorChain(lo=lo, hi=hi or 0, round=rnd or 0, finished=bool(fin),
                                             decided=frozenset(decided or ()))
    pending = """FROM tls_lifetime_event p
           WHERE p.run_id = %s AND p.event = 'planned' AND NOT EXISTS (
               SELECT 1 FROM tls_lifetime_event o
               WHERE o.run_id = p.run_id AND o.origin_host = p.origin_host AND o.origin_address = p.origin_address
                 AND o.mechanism = p.mechanism AND o.version = p.version AND o.round = p.round
                 AND o.grid_index = p.grid_index AND o.event <> 'planned')"""
    restored = [((h, a, m, v), rnd, k, due.timestamp(), bytes(der)) for h, a, m, v, rnd, k, due, der in conn.execute(
        "SELECT p.origin_host, host(p.origin_address), p.mechanism, p.version, p.round, p.grid_index, p.due_at, "
        "p.session " + pending + " AND p.session IS NOT NULL", (run_id,)).fetchall()]
    lost = conn.execute(
        # a lost attempt keeps the shard (vantage, round) that planned it: row_vantage reads shard_id
        "INSERT INTO tls_lifetime_event (run_id, origin_host, origin_address, mechanism, version, round, grid_index, "
        "event, at, shard_id) SELECT p.run_id, p.origin_host, p.origin_address, p.mechanism, p.version, p.round, "
        "p.grid_index, 'lost', %s, p.shard_id " + pending + " AND p.session IS NULL",
        (dt.datetime.now(dt.timezone.utc), run_id)).rowcount
    return out, lost, restored
