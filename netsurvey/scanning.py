"""The contract every scanner shares (after zgrab2's modules/<proto>/scanner.go).

A scanner is a class with a ``name`` (the ``scan_run.kind``), an options dataclass, an
``init(options, ctx)`` and an async ``scan(target) -> ScanOutcome`` that probes one target
and returns a status and a typed, frozen result record. Everything else — resolution
(``resolve.py``), the allow/block policy and rate limits (``etiquette.py``), concurrency,
progress bars, run bookkeeping, resumption and storage through ``ResultWriter`` — is done
by :func:`run_scan`, so every scanner behaves the same way.

Scanners with their own packet engine (e.g. raw-socket TFO probing) override
``scan_many`` instead and still return one ``ScanOutcome`` per target.
"""
from __future__ import annotations

import asyncio
import contextlib
import enum
import gc
from abc import ABC, abstractmethod
from collections import deque
from dataclasses import dataclass, field
from typing import Any, AsyncIterator, Callable, ClassVar, Iterable, Iterator, Optional, Sequence

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn, TimeRemainingColumn

from .config import SurveyConfig
from .db import Database
from .etiquette import RateLimiter, TargetPolicy
from .runctx import Terminated
from .runs import Run


class ScanStatus(str, enum.Enum):
    """Outcome of probing one target (zgrab2's status vocabulary plus resolution/policy)."""

    SUCCESS = "success"
    CONNECTION_REFUSED = "connection-refused"   # RST to the SYN / ICMP unreachable
    CONNECTION_TIMEOUT = "connection-timeout"   # no answer to the connection attempt
    CONNECTION_CLOSED = "connection-closed"     # peer closed / reset mid-protocol
    IO_TIMEOUT = "io-timeout"                   # connected, then silence
    PROTOCOL_ERROR = "protocol-error"           # peer spoke something unexpected
    APPLICATION_ERROR = "application-error"     # e.g. TLS alert, HTTP error
    RESOLUTION_FAILED = "resolution-failed"     # NXDOMAIN, no address, DNS timeout
    BLOCKED = "blocked"                         # refused by the allow/block policy: never contacted
    UNKNOWN_ERROR = "unknown-error"


@dataclass(frozen=True)
class ScanTarget:
    """One thing to probe. ``rank``/``hostname`` come from the top list (None for bare
    addresses); ``address`` is filled in after resolution; ``port`` is a TCP/UDP port."""

    hostname: Optional[str]
    address: Optional[str]
    port: int
    rank: Optional[int] = None


class NameStream:
    """A list's names as ScanTargets (no address yet) followed (with ``extra_first``:
    preceded) by ``extra`` ones, read as the scan goes (issue 26): ``names`` is a
    :class:`~netsurvey.targets.TargetStream` (server-side cursor, counted in SQL), so only
    ``extra`` (names given on the command line) is held. ``len()`` is counted, never iterated; the dry-run plan reads it with
    :meth:`plan_view` / :meth:`addressed` (nothing contacted)."""

    def __init__(self, names, port: int, extra: Sequence[ScanTarget] = (), *, extra_first: bool = False):
        self.names, self.port, self.extra, self.extra_first = names, port, _own_shard(extra), extra_first

    def __len__(self) -> int:
        return (len(self.names) if self.names is not None else 0) + len(self.extra)

    def __iter__(self) -> Iterator[ScanTarget]:
        port = self.port
        if self.extra_first:
            yield from self.extra
        if self.names is not None:
            for t in self.names:
                yield ScanTarget(t.hostname, None, port, t.rank)
        if not self.extra_first:
            yield from self.extra

    def plan_view(self) -> "NameStream":
        return self

    def addressed(self) -> list[ScanTarget]:
        """The targets that carry an address as they are: the only ones :func:`run_scan`
        judges by the policy when it reads this stream unresolved (the list's names have
        none; a measurement that asks about names, as the DNS ones do, never contacts a
        name, also one that spells an address). Wrapped in a :class:`ResolvingStream`, every
        name is judged by the address it resolves to instead (:meth:`ResolvingStream.plan_resolved`)."""
        return [t for t in self.extra if t.address]


def _own_shard(extra: Sequence[ScanTarget]) -> list[ScanTarget]:
    """In a shard of a queued run: only the targets of this shard (by hostname, else
    address: the key the list's names are sharded by), so a --target given with --shards is
    probed once, not once per shard."""
    from . import shard

    spec = shard.current()
    if spec is None:
        return list(extra)
    shard.mark_filtered()
    return [t for t in extra if shard.shard_of(t.hostname or t.address or "", spec.count) == spec.index]


#: Names resolved together by :class:`ResolvingStream` (two batches are held at once).
RESOLVE_BATCH = 2_000

ResolveBatch = Callable[[list[ScanTarget]], tuple[list[ScanTarget], list["ScanOutcome"]]]


class ResolvingStream:
    """Targets without an address (a :class:`NameStream`) -> targets with addresses,
    resolved ``RESOLVE_BATCH`` names at a time while the scan reads it (issue 26: resolving
    a whole list up front held every name, its answer and its targets before the first
    probe). ``resolve`` maps one batch of address-less targets to (targets with an address,
    RESOLUTION_FAILED outcomes) - each measurement says which addresses it probes; it runs
    in a helper thread (with its own event loop if it needs one) while the batch before is
    probed; :func:`run_scan` reads it through :meth:`waiting` for the default engine, which
    awaits a batch not resolved yet instead of holding the event loop (and every probe under
    way) until it is. Targets that already have an address pass through. Failed names go to
    ``on_failed`` as they are found. ``len()`` is the number of names (counted in SQL for a
    list). The dry-run plan resolves the names as the run does (:meth:`plan_resolved`: the
    same ``resolve``, so the same resolver, and nothing sent to a target) and judges every
    address by the policy. Iterating again resolves again (a new round asks afresh)."""

    def __init__(self, names, resolve: ResolveBatch):
        self.names, self.resolve = names, resolve
        self.on_failed: Callable[["ScanOutcome"], None] = lambda o: None

    def __len__(self) -> int:
        return len(self.names)

    def plan_view(self):
        return self.names.plan_view() if hasattr(self.names, "plan_view") else self.names

    def plan_resolved(self, on_failed: Callable[["ScanOutcome"], None]) -> Iterator[ScanTarget]:
        """The targets as the run reads them (resolved batch by batch, by the run's own
        ``resolve``), names without an address to ``on_failed``: for the dry-run plan."""
        saved, self.on_failed = self.on_failed, on_failed
        try:
            yield from self._read(waits=False)
        finally:
            self.on_failed = saved

    def _resolve(self, batch: list[ScanTarget]) -> tuple[list[ScanTarget], list["ScanOutcome"]]:
        fixed = [t for t in batch if t.address]
        todo = [t for t in batch if not t.address]
        if not todo:
            return fixed, []
        out, failed = self.resolve(todo)
        return fixed + list(out), list(failed)

    def __iter__(self) -> Iterator[ScanTarget]:
        return self._read(waits=False)

    def waiting(self) -> Iterator:
        """The targets, with a :class:`Resolving` wherever the next batch is not resolved
        yet, instead of waiting for it (for ``Scanner.scan_many``, which awaits those: a
        wait here stood the scan's event loop still, and every probe under way with it)."""
        return self._read(waits=True)

    def _read(self, waits: bool) -> Iterator:
        import itertools

        names = iter(self.names)
        n = RESOLVE_BATCH
        helper = _Resolver(self._resolve)
        try:
            batch = list(itertools.islice(names, n))
            fut = helper.submit(batch) if batch else None
            while fut is not None:
                batch = list(itertools.islice(names, n))
                nxt = helper.submit(batch) if batch else None
                if waits and not fut.done():
                    pending = Resolving(fut)
                    while not fut.done():
                        yield pending
                out, failed = fut.result()
                for o in failed:
                    self.on_failed(o)
                yield from out
                fut = nxt
        finally:
            helper.stop()


class ResolvedOnce(list):
    """Targets a run resolves all at once before it probes them (a list it holds anyway:
    tls-lifetime, tls-shared, tls-zgrab, tfo-lb): the list is what the run starts from (names,
    with an address where one was given), ``resolve()`` what the run makes of it - (targets
    with an address, RESOLUTION_FAILED outcomes), computed by the run's own code. The
    dry-run plan calls it (:meth:`plan_resolved`) to judge the addresses the run would
    contact; the run itself resolves afresh when it probes."""

    def __init__(self, targets: Iterable[ScanTarget],
                 resolve: Callable[[], tuple[Sequence[ScanTarget], Sequence["ScanOutcome"]]],
                 plan_note: Optional[str] = None):
        super().__init__(targets)
        self.resolve = resolve
        #: what the plan's counts do not cover (printed with the plan)
        self.plan_note = plan_note

    def plan_resolved(self, on_failed: Callable[["ScanOutcome"], None]) -> Iterator[ScanTarget]:
        out, failed = self.resolve()
        for o in failed:
            on_failed(o)
        yield from out


class Resolving:
    """Yielded by :meth:`ResolvingStream.waiting` while its next batch resolves: the reader
    awaits :meth:`wait`, then reads on. It has no address, so the policy and the
    interleaving by address pass it through as it is."""

    __slots__ = ("future", "_aio")
    address = hostname = None
    ends_window = True   # spread.interleave_windows: probe what it holds while this batch resolves

    def __init__(self, future):
        self.future, self._aio = future, None

    async def wait(self) -> None:
        import asyncio

        if self._aio is None:
            self._aio = asyncio.wrap_future(self.future)
            # its failure is raised where the stream is read on (fut.result()), not logged here
            self._aio.add_done_callback(lambda f: f.cancelled() or f.exception())
        await asyncio.wait((self._aio,))   # a cancelled reader leaves the batch be


class _Resolver:
    """The daemon thread resolving a :class:`ResolvingStream`'s batches one after the other.
    :meth:`stop` (the stream was read to its end, or the scan stopped) drops the batches not
    started and leaves the one under way to a thread nobody waits for (session-32
    adversary: SIGTERM while a batch resolved waited for it and the batch queued after it,
    ~5 s, asking the resolver after the signal)."""

    def __init__(self, resolve):
        import queue
        import threading

        self.resolve, self.queue = resolve, queue.SimpleQueue()
        threading.Thread(target=self._run, name="resolve", daemon=True).start()

    def submit(self, batch: list):
        from concurrent.futures import Future

        fut: Future = Future()
        self.queue.put((fut, batch))
        return fut

    def _run(self) -> None:
        while (item := self.queue.get()) is not None:
            fut, batch = item
            if not fut.set_running_or_notify_cancel():
                continue
            try:
                fut.set_result(self.resolve(batch))
            except BaseException as exc:
                fut.set_exception(exc)

    def stop(self) -> None:
        import queue

        while True:
            try:
                item = self.queue.get_nowait()
            except queue.Empty:
                break
            if item is not None:
                item[0].cancel()
        self.queue.put(None)


@dataclass(frozen=True)
class ScanOutcome:
    """Result of one probe: the target, a status, the scanner's typed record (or None) and
    a short error text for anything but success."""

    target: ScanTarget
    status: ScanStatus
    result: Any = None
    error: Optional[str] = None


@dataclass
class ScanContext:
    """What ``init`` receives: the database, the open run, config and etiquette."""

    db: Database
    run: Run
    config: SurveyConfig
    policy: TargetPolicy
    limiter: RateLimiter
    console: Console = field(default_factory=lambda: Console(stderr=True))

    @property
    def counts(self) -> dict:
        """The run's counts, recorded by the run path when the run ends (finished or failed):
        a measurement adds to this dict and returns."""
        return self.run.counts


class Scanner(ABC):
    """Base class of every scanner (see module docstring)."""

    #: scan_run.kind, e.g. "tfo", "tls", "quic", "dns-ttl".
    name: ClassVar[str]
    #: Whether run_scan interleaves the targets by address before ``scan_many`` (names
    #: sharing an address would queue behind each other under the per-destination limit).
    #: False for an engine that probes each address once whatever its names (TFO).
    spread_by_address: ClassVar[bool] = True
    #: Run with the garbage collector quieted (see ``_quiet_gc``): for scanners that build
    #: few reference cycles (not aioquic's connections, which rely on frequent collections).
    quiet_gc: ClassVar[bool] = False

    def init(self, options: Any, ctx: ScanContext) -> None:
        self.options = options
        self.ctx = ctx

    @abstractmethod
    async def scan(self, target: ScanTarget) -> ScanOutcome:
        """Probe one allowed target (policy already checked by the runner)."""

    async def scan_many(self, targets: Iterable[ScanTarget], concurrency: int) -> AsyncIterator[ScanOutcome]:
        """Default engine: ``scan`` with bounded concurrency and the per-destination limit.
        ``concurrency`` worker coroutines take the next target in turn (no task, semaphore
        or wait set per target: ~10 us less per target); outcomes come in completion order.
        ``targets`` may be a stream (read once; a worker that finds it ended stops)."""
        limiter = self.ctx.limiter
        scan = self.scan
        it = iter(targets)
        ready: deque[ScanOutcome] = deque()
        wake = asyncio.Event()
        live = 0

        failed: list[BaseException] = []  # what a worker could not record (e.g. the limiter failing)
        stopping = False  # set when this generator ends: only then is a worker's cancellation ours
        busy: dict[int, ScanTarget] = {}  # worker -> the target it is probing (run_scan records them if stopped)
        self.in_flight = busy

        async def worker() -> None:
            nonlocal live
            me = asyncio.current_task()
            assert me is not None   # ensure_future(worker()): a task
            key = id(me)
            try:
                for t in it:
                    if type(t) is Resolving:   # the stream's next batch: awaited, the loop goes on
                        await t.wait()
                        continue
                    await limiter.acquire(t.address)
                    busy[key] = t   # contacted from here on
                    try:
                        o = await scan(t)
                    except Exception as exc:  # a failing target is recorded, the scan continues
                        o = ScanOutcome(t, ScanStatus.UNKNOWN_ERROR, None, f"{type(exc).__name__}: {exc}"[:300])
                    except asyncio.CancelledError:
                        if stopping or me.cancelling():
                            raise
                        # a cancellation from inside scan() (e.g. a shared future): recorded
                        o = ScanOutcome(t, ScanStatus.UNKNOWN_ERROR, None, "CancelledError inside the scan")
                    del busy[key]
                    ready.append(o)
                    wake.set()
            except asyncio.CancelledError:
                if stopping or me.cancelling():
                    raise
                failed.append(RuntimeError("a scan worker was cancelled from outside"))
            except BaseException as exc:
                failed.append(exc)
            finally:
                live -= 1
                wake.set()

        n = max(1, min(concurrency, len(targets)) if hasattr(targets, "__len__") else concurrency)  # type: ignore[arg-type]  # has __len__
        workers = []
        for _ in range(n):
            live += 1
            workers.append(asyncio.ensure_future(worker()))
        try:
            while True:
                while ready:
                    yield ready.popleft()
                if failed:
                    raise failed[0]
                if not live:
                    break
                wake.clear()
                await wake.wait()
        finally:
            stopping = True
            for w in workers:
                w.cancel()

    def close(self) -> None:  # noqa: B027 - an optional hook, not abstract: a scanner holding nothing to release keeps it
        """Release sockets, flush writers."""


async def run_scan(
    scanner: Scanner,
    targets: Iterable[ScanTarget],
    store: Callable[[ScanOutcome], None],
    *,
    concurrency: int = 100,
    description: str | None = None,
    show_progress: bool = True,
) -> dict[str, int]:
    """Check the policy for every target, probe the allowed ones through ``scan_many``, hand
    every outcome (blocked ones included) to ``store``; return counts per status.

    ``targets`` may be a stream (issue 26: a list's names read from the database as they
    are probed, :class:`~netsurvey.targets.TargetStream`): it is read once, lazily; the
    policy is checked per target as it comes, names sharing an address are interleaved
    window by window (netsurvey/spread.py) and the progress bar's total is ``len(targets)``
    when the stream knows it (counted in SQL). Nothing here keeps a per-target object
    beyond one window."""
    ctx = scanner.ctx
    counts: dict[str, int] = {}

    def record(o: ScanOutcome) -> None:
        counts[o.status.value] = counts.get(o.status.value, 0) + 1
        store(o)

    reason_blocked = ctx.policy.reason_blocked
    # names resolved while the scan goes: the default engine awaits each batch (Resolving)
    source = targets.waiting() if isinstance(targets, ResolvingStream) and \
        type(scanner).scan_many is Scanner.scan_many else targets

    def allowed_only() -> Iterator[ScanTarget]:
        for t in source:
            why = reason_blocked(t.address) if t.address else None
            if why:
                record(ScanOutcome(t, ScanStatus.BLOCKED, None, why))
            else:
                yield t

    total = len(targets) if hasattr(targets, "__len__") else None  # type: ignore[arg-type]  # has __len__
    allowed: Iterable[ScanTarget] = allowed_only()
    if scanner.spread_by_address and getattr(ctx.limiter, "per_destination", None):   # issue 26
        from .spread import WINDOW, interleave_windows
        # a list the caller holds anyway is interleaved whole (as before streams); a stream by windows
        window = max(1, len(targets)) if isinstance(targets, (list, tuple)) else WINDOW
        allowed = interleave_windows(allowed, lambda t: t.address, window)
    # a dry run never gets here: open_scan stopped it (netsurvey.measure's run path)
    if not scanner.quiet_gc:
        return await _scan_all(scanner, allowed, total, record, counts, concurrency, description, show_progress)
    with _quiet_gc():
        return await _scan_all(scanner, allowed, total, record, counts, concurrency, description, show_progress)


_gc_holds = 0  # scans inside _quiet_gc now (two may overlap in one loop)
_gc_saved: tuple = ()  # the thresholds before the first of them


@contextlib.contextmanager
def _quiet_gc():
    """While a scanner with ``quiet_gc`` runs: the targets, modules and config live until
    the end, so keep the cyclic garbage collector from walking them again and again (a DNS
    scan of 100,000 names spent ~15 % of its time there) and collect the young generation
    less often (such a scanner allocates per packet but makes few cycles). Freezes only if
    nothing else froze; the outermost use restores the thresholds."""
    global _gc_holds, _gc_saved
    froze = gc.get_freeze_count() == 0
    if froze:
        gc.freeze()
    if _gc_holds == 0:
        _gc_saved = gc.get_threshold()
        gc.set_threshold(max(_gc_saved[0], 50_000), *_gc_saved[1:])
    _gc_holds += 1
    try:
        yield
    finally:
        _gc_holds -= 1
        if _gc_holds == 0:
            gc.set_threshold(*_gc_saved)
        if froze:
            gc.unfreeze()


async def _scan_all(scanner: Scanner, allowed: Iterable[ScanTarget], total: Optional[int], record,
                    counts: dict[str, int], concurrency: int, description: str | None,
                    show_progress: bool) -> dict[str, int]:
    ctx = scanner.ctx
    with Progress("[progress.description]{task.description}", BarColumn(), MofNCompleteColumn(),
                  TimeElapsedColumn(), TimeRemainingColumn(), console=ctx.console, transient=True,
                  disable=not show_progress) as prog:
        task = prog.add_task(description or f"{scanner.name} scan", total=total)
        done = 0
        try:
            async for outcome in scanner.scan_many(allowed, concurrency):
                record(outcome)
                done += 1
                if not done & 63:  # the bar redraws ~10 times a second anyway; advancing costs ~3 us
                    prog.update(task, completed=sum(counts.values()))  # blocked ones included
        except (asyncio.CancelledError, KeyboardInterrupt, Terminated):
            # stopped (SIGTERM, Ctrl-C): the targets being probed were contacted, so each
            # gets a row saying so instead of vanishing; the run itself ends 'failed'
            for t in list(getattr(scanner, "in_flight", {}).values()):
                record(ScanOutcome(t, ScanStatus.UNKNOWN_ERROR, None, INTERRUPTED))
            raise
        prog.update(task, completed=sum(counts.values()))
    return counts


#: ScanOutcome.error of a target whose probe was under way when the run was stopped.
INTERRUPTED = "interrupted: the run was stopped while this target was being probed"


def scan_server(scanner: "Scanner", options: Any, target: ScanTarget, *,
                etiquette: Optional[Any] = None) -> ScanOutcome:
    """One target through one scanner, with no database, no run and no command line
    (sslyze's ``scan_server()``): for tests against a local listener and for library use.
    The etiquette still holds: ``etiquette`` (an :class:`~netsurvey.config.EtiquetteConfig`,
    default the configured one's defaults) decides whether the address may be contacted
    and paces the probes; a refused target is an outcome with status ``blocked``, never
    contacted. Nothing is written."""
    import asyncio

    from .config import EtiquetteConfig, SurveyConfig
    from .etiquette import TargetPolicy, limiter_from_config

    cfg = etiquette if etiquette is not None else EtiquetteConfig()
    policy = TargetPolicy.from_config(cfg)
    if target.address is None:
        raise ValueError("scan_server takes a resolved target (ScanTarget with an address)")
    why = policy.reason_blocked(target.address)
    if why is not None:
        return ScanOutcome(target, ScanStatus.BLOCKED, None, why)
    ctx = ScanContext(db=None, run=None, config=SurveyConfig(etiquette=cfg), policy=policy,  # type: ignore[arg-type]  # no storage
                      limiter=limiter_from_config(cfg))
    scanner.init(options, ctx)
    try:
        return asyncio.run(scanner.scan(target))
    finally:
        scanner.close()
