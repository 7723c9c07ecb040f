"""The age search: one engine for every probe that establishes state and presents it once.

A *chain* is the search of one lifetime (tls-lifetime: a host x mechanism x version;
quic-turnover: a target x kind of state). Its grid of ages is a = k x step, k = 1 .. n:

- **Rounds of a k-ary search.** A chain knows ``lo`` (largest index accepted, 0 = none) and
  ``hi`` (smallest index refused, n + 1 = none). A round establishes up to ``slots`` fresh
  states for indices spread over the open bracket (always including ``hi - 1``, so a state
  accepted at the largest age needs one round) and presents each once, at its age. With
  ``slots = ceil(sqrt(n))`` (:func:`~.grid.default_slots`) two rounds bracket any lifetime
  to one step.
- **States dropped as soon as they can answer nothing.** A refusal at index j drops every
  held state of the chain for an index >= j (monotonicity: a state refused at age a is
  refused at every larger age), an acceptance at j drops those <= j. A round ends when
  nothing of it is held or being established; two rounds in a row that decide nothing end
  the chain (``no-progress``).
- **Exhaustive mode** (``exhaustive=True``, tls-lifetime's --keep-going): no monotonicity
  assumed, every age is tried, the ``slots`` largest undecided ones per round; nothing is
  dropped.
- **A window of hosts.** At most ``hosts_in_flight`` hosts have chains open, so the states
  held are bounded by hosts_in_flight x chains x slots whatever the list size.
- **Attempts first, spacing per destination** (:class:`~.grid.DueQueue`): a due attempt
  goes before any due initial handshake; initial handshakes to one address are planned one
  per-destination interval apart (largest ages first), the attempts inherit the spacing.
- **Resumable.** Every planned attempt (with what can be stored of its state), outcome,
  drop and finished chain goes to the event log (``log``); :meth:`AgeSearch.open` takes the
  brackets read back from it (:class:`PriorChain`, :func:`~.events.prior_chains`) and the
  stored states still due, which go on in their interrupted round.

What a protocol adds is a :class:`Probe` (establish a state, present it, revive a stored
one), the chain names of a host, and the event log's rows. Nothing here knows a protocol.
"""
from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable, Hashable, Iterable, Mapping, NamedTuple, Optional, Protocol, Union

from .grid import DueQueue, decided_index, exhaustive_points, next_points


@dataclass
class Held:
    """A state waiting for its one presentation.

    :ivar state: the probe's own (what :meth:`Probe.present` needs).
    :ivar born_m: when its age starts to count, time.monotonic() s.
    :ivar born_w: the same moment, unix s.
    """

    state: Any
    born_m: float
    born_w: float


@dataclass(frozen=True)
class Missing:
    """An establish connection that yielded no state to present.

    :ivar why: the chain's ``finished`` detail if this decides the chain; None: it never
        does (the age stays undecided, a later round tries it again).
    :ivar any_round: it decides the chain whenever nothing was planned yet; else only as the
        last establish connection of round 1 with nothing planned.
    :ivar then: called when it decides the chain, before the chain finishes.
    """

    why: Optional[str] = None
    any_round: bool = False
    then: Optional[Callable[[], None]] = None


@dataclass(frozen=True)
class Outcome:
    """A presentation's answer.

    :ivar accepted: True / False, or None when the connection itself failed.
    :ivar age_s: the age actually reached, s (decides the index when more than half a step late).
    :ivar error: for a failed connection, the event's detail (cut to 200 characters).
    :ivar then: called when the outcome counts (not for a state dropped while its
        presentation was in flight), before it is logged.
    """

    accepted: Optional[bool]
    age_s: float
    error: str = ""
    then: Optional[Callable[[], None]] = None


@dataclass(eq=False)
class Host:
    """One target with open chains.

    :ivar key: identifies the host (held-state counts, the window).
    :ivar address: initial handshakes to it are spaced by the per-destination interval.
    :ivar busy: work of the scanner's own that keeps the host open (quic-turnover: its samples).
    """

    key: Hashable
    address: str
    target: Any = None
    chains: list = field(default_factory=list)
    busy: int = 0


@dataclass(eq=False)
class Chain:
    """Search state of one lifetime of a host; ``name`` says which (a mechanism and version, a kind)."""

    host: Host
    name: Any
    n: int
    lo: int = 0
    hi: int = 0                      # n + 1 unless given
    round: int = 0
    decided: set = field(default_factory=set)    # indices decided (ages_once only)
    pending: dict = field(default_factory=dict)  # grid index -> Held
    establishing: int = 0
    bracket_at_round_start: tuple = ()
    finished: bool = False
    planned_any: bool = False
    stalls: int = 0                  # consecutive rounds that decided nothing

    def __post_init__(self):
        if not self.hi:
            self.hi = self.n + 1


@dataclass(frozen=True)
class PriorChain:
    """What the event log says about a chain of an interrupted run (hi 0: none refused)."""

    lo: int
    hi: int
    round: int
    finished: bool
    decided: frozenset = frozenset()


class Probe(Protocol):
    """The protocol's part of the search."""

    async def establish(self, chain: Chain, k: int) -> Union[Held, Missing]:
        """A fresh state, to be presented once at age k x step (its connection waits for the limiter)."""

    async def present(self, chain: Chain, k: int, held: Held) -> Outcome:
        """Present ``held`` (never presented before) once."""

    def thaw(self, chain: Chain, stored: Any) -> Any:
        """A :attr:`Held.state` from what the event log stored of it (resume)."""


#: log(chain, grid_index, event, due_w, detail, held) appends to the event log; ``held`` is
#: given for 'planned' only (its state to store), ``grid_index`` is None for 'finished'.
EventLog = Callable[[Chain, Optional[int], str, Optional[float], Optional[str], Optional[Held]], None]


class _Job(NamedTuple):
    run: Callable[[Any, Any], Awaitable[None]]
    a: Any
    b: Any


class AgeSearch:
    """Drives the chains of many hosts with bounded held state.

    :param probe: the protocol's :class:`Probe`.
    :param n: grid size (ages step .. n x step).
    :param step: age step, s.
    :param slots: states held per chain at most.
    :param hosts_in_flight: hosts with open chains at most.
    :param log: the event log (:data:`EventLog`).
    :param exhaustive: try every age (no monotonicity assumed).
    :param ages_once: an index once decided is not established again and deciding one counts
        as progress, even when the bracket stays (a late outcome decides another index).
    :param accepted: the event an acceptance is logged as (also in ``<accepted>-at-max-age``).
    :param per_destination: connections per second to one address (None: no spacing).
    :param concurrency: jobs running at once at most.
    :param tick: called about once a second (flush the writers).
    :param on_host_done: called with a :class:`Host` when its chains are finished and it is not busy.
    :param name: the scheduler's name in an internal error.
    """

    def __init__(self, probe: Probe, *, n: int, step: float, slots: int, hosts_in_flight: int, log: EventLog,
                 exhaustive: bool = False, ages_once: bool = False, accepted: str = "accepted",
                 per_destination: Optional[float] = None, concurrency: int = 100,
                 tick: Callable[[], None] = lambda: None, on_host_done: Callable[[Host], None] = lambda h: None,
                 name: str = "age search"):
        self.probe = probe
        self.n, self.step = n, step
        self.slots = max(1, slots)
        self.window = max(1, hosts_in_flight)
        self.log = log
        self.exhaustive, self.ages_once, self.accepted = exhaustive, ages_once, accepted
        self.tick = tick
        self.on_host_done = on_host_done
        self.name = name
        self.sem = asyncio.Semaphore(max(1, concurrency))
        # attempts and initial handshakes in two heaps: a due attempt goes before any due
        # handshake (its age is the measurement; a handshake only delays its host). One heap
        # made every attempt wait behind the thousands of handshakes a full window plans at
        # once whenever the machine handshook slower than planned: on a loaded machine every
        # attempt came minutes late.
        self.q = DueQueue(per_destination, self.window)
        self.wake = asyncio.Event()
        self.open_hosts: dict[Hashable, Host] = {}
        self.tasks: set = set()
        #: states held now / at most (all chains) / at most by one host
        self.held = 0
        self.peak_held = 0
        self.peak_held_target = 0
        self._held_by: dict[Hashable, int] = {}
        self.rounds_max = 0

    def age(self, k: int) -> float:
        return self.step * k

    # ------------------------------------------------------------------ bookkeeping
    def _hold(self, c: Chain, delta: int) -> None:
        key = c.host.key
        self.held += delta
        self._held_by[key] = self._held_by.get(key, 0) + delta
        self.peak_held = max(self.peak_held, self.held)
        self.peak_held_target = max(self.peak_held_target, self._held_by[key])
        if self._held_by[key] == 0:
            del self._held_by[key]

    def push(self, due_m: float, heap: str, run: Callable[[Any, Any], Awaitable[None]], a: Any, b: Any = None) -> None:
        """Run ``await run(a, b)`` once ``due_m`` (monotonic s) has come; ``heap`` 'attempt'
        (before any due 'establish')."""
        self.q.push(due_m, heap, _Job(run, a, b))
        self.wake.set()

    def _progress(self, c: Chain) -> tuple:
        return (c.lo, c.hi, len(c.decided))

    def open(self, host: Host, names: Iterable, prior: Optional[Mapping] = None, restored: Iterable = ()) -> None:
        """Open ``host`` with one chain per name (in this order). ``prior``: name ->
        :class:`PriorChain` of an interrupted run (finished chains are not opened again);
        ``restored``: its stored states still due, (name, round, grid_index, due_w, stored):
        those of a chain's current round are presented at their ages, the round goes on."""
        prior = prior or {}
        chains = []
        for name in names:
            c = Chain(host, name, self.n)
            pc = prior.get(name)
            if pc is not None:
                if pc.finished:
                    continue
                c.lo, c.hi, c.round = pc.lo, pc.hi or self.n + 1, pc.round
                if self.ages_once:
                    c.decided = set(pc.decided)
            chains.append(c)
        host.chains = chains
        self.open_hosts[host.key] = host
        back: dict = {}
        for name, rnd, k, due_w, stored in restored:
            back.setdefault(name, []).append((rnd, k, due_w, stored))
        for c in chains:
            mine = [r for r in back.get(c.name, ()) if r[0] == c.round and c.lo < r[1] < c.hi]
            if not mine:
                self._start_round(c)
                continue
            # the interrupted round goes on: its stored states are presented at their ages
            c.planned_any = True
            c.bracket_at_round_start = self._progress(c)
            now_m, now_w = time.monotonic(), time.time()
            for _, k, due_w, stored in mine:
                born_w = due_w - self.age(k)
                held = Held(self.probe.thaw(c, stored), now_m + (born_w - now_w), born_w)
                c.pending[k] = held
                self._hold(c, +1)
                self.push(held.born_m + self.age(k), "attempt", self._attempt, c, k)
        self.settle(host)

    def settle(self, host: Host) -> None:
        """Close ``host`` if its chains are finished and it is not busy."""
        if self.open_hosts.get(host.key) is host and not host.busy and all(c.finished for c in host.chains):
            del self.open_hosts[host.key]
            self.on_host_done(host)

    def _start_round(self, c: Chain) -> None:
        pts = exhaustive_points(c.decided, self.n, self.slots) if self.exhaustive else next_points(c.lo, c.hi,
                                                                                                   self.slots)
        if not pts:
            self._finish(c, self._why_done(c))
            return
        c.round += 1
        self.rounds_max = max(self.rounds_max, c.round)
        c.bracket_at_round_start = self._progress(c)
        # largest ages first; initial handshakes to one address are spaced by the per-destination
        # interval, so the limiter rarely has to hold a worker (and the attempts, each due at its
        # state's age, inherit the spacing)
        for k in sorted(pts, reverse=True):
            c.establishing += 1
            self.push(self.q.slot(c.host.address), "establish", self._establish, c, k)

    def _why_done(self, c: Chain) -> str:
        if self.exhaustive:
            return "all-ages-tried"
        if c.lo >= self.n:
            return f"{self.accepted}-at-max-age"
        if c.hi <= 1:
            return "refused-at-first-step"
        return "bracketed"

    def _finish(self, c: Chain, why: str) -> None:
        if c.finished:
            return
        c.finished = True
        for k in list(c.pending):
            self._drop(c, k)
        self.log(c, None, "finished", None, why, None)
        self.settle(c.host)
        self.wake.set()

    def _drop(self, c: Chain, k: int) -> None:
        if c.pending.pop(k, None) is not None:
            self._hold(c, -1)
            self.log(c, k, "dropped", None, None, None)

    def _round_over(self, c: Chain) -> None:
        if c.finished or c.establishing or c.pending:
            return
        if self._progress(c) == c.bracket_at_round_start:
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
            if c.finished or k in c.decided or (not self.exhaustive and not c.lo < k < c.hi):
                return
            got = await self.probe.establish(c, k)
            if c.finished:
                return
            if isinstance(got, Missing):
                if got.why is not None and not c.planned_any and (got.any_round or (c.round == 1 and
                                                                                    c.establishing == 1)):
                    if got.then is not None:
                        got.then()
                    self._finish(c, got.why)
                return
            c.pending[k] = got
            self._hold(c, +1)
            c.planned_any = True
            self.log(c, k, "planned", got.born_w + self.age(k), None, got)
            self.push(got.born_m + self.age(k), "attempt", self._attempt, c, k)
        finally:
            if not c.finished and c.establishing > 0:
                c.establishing -= 1
                self._round_over(c)

    async def _attempt(self, c: Chain, k: int) -> None:
        held = c.pending.get(k)
        if held is None or c.finished:
            return
        out = await self.probe.present(c, k, held)
        if c.pending.pop(k, None) is None:
            return    # dropped while this attempt was in flight: its outcome is not needed
        self._hold(c, -1)
        if out.then is not None:
            out.then()
        if out.accepted is None:
            self.log(c, k, "failed", None, out.error[:200], None)
        else:
            # decided by the age actually reached: an attempt the loop or the limiter made late
            # still says the lifetime exceeds (or not) that age
            j = decided_index(out.accepted, k, out.age_s, self.step, self.n)
            self.log(c, k, self.accepted if out.accepted else "refused", None, f"decided-as:{j}" if j != k else None,
                     None)
            if self.ages_once:
                c.decided.add(k)
            if out.accepted:
                if j > c.lo:
                    c.lo = j
                    if not self.exhaustive:
                        for i in [i for i in c.pending if i <= j]:
                            self._drop(c, i)
            elif j < c.hi:
                c.hi = j
                if not self.exhaustive:
                    for i in [i for i in c.pending if i >= j]:
                        self._drop(c, i)
        if not self.exhaustive and c.hi - c.lo <= 1:
            self._finish(c, self._why_done(c))
            return
        self._round_over(c)

    def _dead(self, job: _Job) -> bool:
        """An attempt whose state was dropped (or whose chain finished) before it came due."""
        return job.run == self._attempt and (job.a.finished or job.b not in job.a.pending)

    async def _run_job(self, job: _Job) -> None:
        try:
            await job.run(job.a, job.b)
        finally:
            self.sem.release()
            self.wake.set()

    # ------------------------------------------------------------------ the loop
    async def run(self, targets: Iterable, admit: Callable[[Any], None]) -> None:
        """Admit targets (``admit(target)`` opens its host, :meth:`open`) while fewer than
        ``hosts_in_flight`` hosts are open, and run every job when it is due, until all are done."""
        it = iter(targets)
        more = True
        last_tick = time.monotonic()
        while True:
            while more and len(self.open_hosts) < self.window:
                t = next(it, None)
                if t is None:
                    more = False
                    break
                admit(t)
            now = time.monotonic()
            if now - last_tick >= 1.0:
                self.tick()
                last_tick = now
            self.q.prune(self._dead)
            if not self.q:
                if not more and not self.open_hosts and not self.tasks:
                    break
                if not self.tasks and self.open_hosts:
                    raise RuntimeError(f"{self.name} stalled with {len(self.open_hosts)} targets open")
                await self._sleep(1.0)
                continue
            job = self.q.pop_due(now)
            if job is None:
                await self._sleep(min(1.0, self.q.next_due() - now))  # type: ignore[operator]  # q not empty
                continue
            await self.sem.acquire()
            task = asyncio.ensure_future(self._run_job(job[1]))
            self.tasks.add(task)
            task.add_done_callback(self.tasks.discard)
        self.tick()

    async def _sleep(self, s: float) -> None:
        self.wake.clear()
        try:
            await asyncio.wait_for(self.wake.wait(), max(0.0, s))
        except asyncio.TimeoutError:
            pass
