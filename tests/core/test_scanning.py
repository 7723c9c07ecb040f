"""The default scan engine (Scanner.scan_many): every target yields exactly one outcome,
never more than `concurrency` scans at once, a scan that raises is recorded, and a failure
outside any one scan (the limiter) stops the run instead of hanging it."""
from __future__ import annotations

import asyncio
import gc

import pytest

from netsurvey.config import SurveyConfig
from netsurvey.etiquette import RateLimiter, TargetPolicy
from netsurvey.scanning import ScanContext, Scanner, ScanOutcome, ScanStatus, ScanTarget, run_scan


@pytest.fixture(autouse=True)
def _testbed_routes(routes_as_in_testbed):
    """The policy sees routes as in the testbed's vantage (these tests contact nothing)."""


class Flaky(Scanner):
    """Sleeps a little; targets whose port is odd raise."""

    name = "flaky"

    def __init__(self):
        self.active = self.peak = 0

    async def scan(self, target):
        self.active += 1
        self.peak = max(self.peak, self.active)
        try:
            await asyncio.sleep(0.001 * (target.port % 7))
            if target.port % 2:
                raise RuntimeError(f"port {target.port}")
            return ScanOutcome(target, ScanStatus.SUCCESS, target.port)
        finally:
            self.active -= 1


def _scanner(limiter=None) -> Flaky:
    cfg = SurveyConfig()
    s = Flaky()
    s.init(None, ScanContext(db=None, run=None, config=cfg, policy=TargetPolicy.from_config(cfg.etiquette),
                             limiter=limiter or RateLimiter(1e9, 1e9)))
    return s


@pytest.mark.parametrize("concurrency,quiet_gc", [(1, False), (7, True), (100, False), (5000, True)])
def test_every_target_once_and_concurrency_bounded(concurrency, quiet_gc):
    s = _scanner()
    s.quiet_gc = quiet_gc
    targets = [ScanTarget(f"h{i}.test", "198.18.2.20", i) for i in range(1000)]
    stored: list[ScanOutcome] = []
    thresholds = gc.get_threshold()
    seen_gc = []
    s.scan = _watching(s.scan, seen_gc)
    counts = asyncio.run(run_scan(s, targets, stored.append, concurrency=concurrency, show_progress=False))
    assert sorted(o.target.port for o in stored) == list(range(1000))
    assert counts == {"success": 500, "unknown-error": 500}
    assert all(o.error == f"RuntimeError: port {o.target.port}" for o in stored if o.status is not ScanStatus.SUCCESS)
    assert s.peak == min(concurrency, 1000)
    assert gc.get_threshold() == thresholds and gc.get_freeze_count() == 0  # restored after the scan
    assert seen_gc[0] == ((max(thresholds[0], 50_000), *thresholds[1:]) if quiet_gc else thresholds)


def _watching(scan, seen: list):
    async def watched(target):
        seen.append(gc.get_threshold())
        return await scan(target)
    return watched


def test_a_cancellation_inside_one_scan_is_recorded_not_lost():
    s = _scanner()
    inner = s.scan

    async def scan(target):
        if target.port == 4:
            fut = asyncio.get_running_loop().create_future()
            fut.cancel()
            await fut  # e.g. a shared future someone else cancelled
        return await inner(target)

    s.scan = scan
    stored: list[ScanOutcome] = []
    targets = [ScanTarget(f"h{i}.test", "198.18.2.20", 2 * i) for i in range(10)]
    counts = asyncio.run(run_scan(s, targets, stored.append, concurrency=3, show_progress=False))
    assert sorted(o.target.port for o in stored) == [2 * i for i in range(10)]
    assert counts == {"success": 9, "unknown-error": 1}


def test_a_failure_outside_the_scans_stops_the_run():
    class Broken(RateLimiter):
        async def acquire(self, dest):
            raise OSError("limiter broke")

    s = _scanner(Broken(10, 10))
    targets = [ScanTarget(f"h{i}.test", "198.18.2.20", 2 * i) for i in range(50)]

    async def main():
        return await asyncio.wait_for(run_scan(s, targets, lambda o: None, concurrency=5, show_progress=False), 10)

    with pytest.raises(OSError, match="limiter broke"):
        asyncio.run(main())


@pytest.mark.parametrize("how", ["cancel", "signal"])
def test_a_stopped_run_records_the_targets_in_flight(how):
    """SIGTERM (the run path's signal handler raises Terminated in the main thread, then
    asyncio.run cancels the scan) or a cancellation: every target already handed to
    ``scan`` gets a row saying it was interrupted; nothing not yet contacted gets one."""
    import os
    import signal

    from netsurvey.runctx import Terminated
    from netsurvey.scanning import INTERRUPTED

    class Slow(Scanner):
        name = "slow"

        async def scan(self, target):
            if target.port < 3:
                return ScanOutcome(target, ScanStatus.SUCCESS, target.port)
            await asyncio.sleep(3600)

    s = Slow()
    cfg = SurveyConfig()
    s.init(None, ScanContext(db=None, run=None, config=cfg, policy=TargetPolicy.from_config(cfg.etiquette),
                             limiter=RateLimiter(1e9, 1e9)))
    targets = [ScanTarget(f"h{i}.test", "198.18.2.20", i) for i in range(20)]
    stored: list[ScanOutcome] = []

    async def main():
        task = asyncio.ensure_future(run_scan(s, targets, stored.append, concurrency=5, show_progress=False))
        await asyncio.sleep(0.2)
        if how == "cancel":
            task.cancel()
        else:
            os.kill(os.getpid(), signal.SIGTERM)
        await task

    def raise_terminated(signum, frame):
        raise Terminated(signum)

    old = signal.signal(signal.SIGTERM, raise_terminated)
    try:
        with pytest.raises((asyncio.CancelledError, Terminated)):
            asyncio.run(main())
    finally:
        signal.signal(signal.SIGTERM, old)
    done = sorted(o.target.port for o in stored if o.status is ScanStatus.SUCCESS)
    cut = sorted(o.target.port for o in stored if o.error == INTERRUPTED)
    assert done == [0, 1, 2]
    assert cut == [3, 4, 5, 6, 7]          # the 5 workers' targets, each once; 8..19 never contacted


def test_a_signal_stops_a_busy_scan_whose_workers_catch_everything():
    """Issue 26: under load the run path's SIGTERM handler ran inside a scan worker's frame,
    the worker recorded Terminated as its failure and the others scanned on (a 10K-target
    `scan tls` ignored SIGTERM). The handler now raises it from a loop callback of its own:
    asyncio.run ends within a moment, whatever the tasks catch."""
    import os
    import signal
    import time

    from netsurvey.measure import _signals_raise
    from netsurvey.runctx import Terminated

    swallowed = []

    async def busy():                       # a worker as scan_many's: records any BaseException
        end = time.monotonic() + 5
        while time.monotonic() < end:
            try:
                for _ in range(2000):
                    pass
                await asyncio.sleep(0)
            except asyncio.CancelledError:
                raise
            except BaseException as exc:    # noqa: BLE001 - the point of the test
                swallowed.append(exc)

    async def main():
        asyncio.get_running_loop().call_later(0.3, os.kill, os.getpid(), signal.SIGTERM)
        await asyncio.gather(*(busy() for _ in range(20)))

    t0 = time.monotonic()
    with _signals_raise(), pytest.raises(Terminated):
        asyncio.run(main())
    assert time.monotonic() - t0 < 2.5
    assert swallowed == []


class Quick(Scanner):
    name = "quick"

    async def scan(self, target):
        await asyncio.sleep(0)   # as a probe does: the loop runs the consumer meanwhile
        return ScanOutcome(target, ScanStatus.SUCCESS, None)


def test_a_stream_is_read_lazily_with_bounded_memory():
    """Issue 26: run_scan reads a stream of targets as it probes (policy per target,
    interleaved by address per window); the memory it holds does not grow with the number
    of targets. On the old code (the allowed targets collected in a list and interleaved
    whole) the peak grew with the list (~36 MB for 300K targets)."""
    import tracemalloc

    from netsurvey.spread import WINDOW

    cfg = SurveyConfig()
    blocked, allowed_addr = "192.0.2.1", "198.18.2.20"

    class Policy:   # the run path's policy, reduced to its one call (no routes, no config)
        def reason_blocked(self, address):
            return "blocklisted" if address == blocked else None

    policy = Policy()

    def peak_bytes(n: int) -> int:
        s = Quick()
        s.init(None, ScanContext(db=None, run=None, config=cfg, policy=policy,
                                 limiter=RateLimiter(1e12, 1e12)))
        counts = {"n": 0}

        def stream():
            for i in range(n):   # 16 names per address, one address in 1000 blocked
                yield ScanTarget(f"n{i}.test", blocked if i % 1000 == 999 else allowed_addr, i)

        def store(o):
            counts["n"] += 1

        tracemalloc.start()
        try:
            got = asyncio.run(run_scan(s, stream(), store, concurrency=50, show_progress=False))
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        assert counts["n"] == n and got.get("blocked") == n // 1000
        return peak

    small, large = peak_bytes(WINDOW), peak_bytes(8 * WINDOW)
    assert large < 1.5 * small, (small, large)
