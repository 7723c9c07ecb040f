"""Scanner etiquette: allow/block policy (reserved ranges, files), rate limits, and the
shared runner never contacting blocked targets."""
import asyncio
import time

import pytest

from netsurvey.config import EtiquetteConfig
from netsurvey.errors import UsageError
from netsurvey.etiquette import RateLimiter, TargetPolicy, read_network_file


@pytest.fixture(autouse=True)
def _testbed_routes(routes_as_in_testbed):
    """The policy sees routes as in the testbed's vantage (these tests contact nothing)."""


def test_default_policy_allows_only_testbed():
    p = TargetPolicy.from_config(EtiquetteConfig())
    assert p.allowed("198.18.2.10") and p.allowed("198.19.255.1") and p.allowed("2001:2:0:2::10")
    for a in ("8.8.8.8", "127.0.0.1", "10.0.0.1", "2001:4860::8888", "::ffff:8.8.8.8", "192.168.1.1"):
        assert p.reason_blocked(a) == "not-allowed", a
    assert p.reason_blocked("not-an-ip") == "not-an-address"


def test_global_allow_still_blocks_reserved_and_blocklist(tmp_path):
    f = tmp_path / "optout.txt"
    f.write_text("# opt-outs\n203.0.113.0/24\n93.184.216.0/24  # example\n")
    p = TargetPolicy.from_config(EtiquetteConfig(allow=["0.0.0.0/0", "::/0"], block=["1.2.3.0/24"],
                                                 blocklist_files=[f]))
    assert p.allowed("9.9.9.9")
    assert p.reason_blocked("1.2.3.4") == "blocklisted"
    assert p.reason_blocked("93.184.216.34") == "blocklisted"
    for reserved in ("10.1.1.1", "127.0.0.1", "198.18.0.1", "192.168.0.1", "fe80::1", "2001:db8::1"):
        assert p.reason_blocked(reserved) == "blocklisted", reserved


def test_bad_blocklist_file_names_line(tmp_path):
    f = tmp_path / "bl.txt"
    f.write_text("10.0.0.0/8\nnot-a-network\n")
    with pytest.raises(UsageError, match=r"bl.txt:2:"):
        read_network_file(f)


def test_rate_limiter_holds_global_and_per_destination_rates():
    async def go():
        lim = RateLimiter(rate=200, per_destination=20)
        t0 = time.monotonic()
        await asyncio.gather(*(lim.acquire(f"198.18.10.{i % 50}") for i in range(600)))
        glob = time.monotonic() - t0
        lim2 = RateLimiter(rate=10_000, per_destination=20)
        t0 = time.monotonic()
        await asyncio.gather(*(lim2.acquire("198.18.10.1") for _ in range(41)))
        return glob, time.monotonic() - t0
    glob, per_dest = asyncio.run(go())
    # 600 probes at 200/s with a 200-token burst: >= (600-200)/200 = 2 s
    assert 1.9 <= glob < 4.0
    # 41 probes to one address at 20/s: the 41st goes out 2 s after the first
    assert 1.9 <= per_dest < 3.5


def test_take_sync_paces_per_destination_and_own_servers_are_exempt():
    """Packet engines (DNS) take the per-destination slot too; etiquette.own_servers skip
    only that bucket (the global one holds for them)."""
    from netsurvey.etiquette import limiter_from_config

    cfg = EtiquetteConfig(rate_pps=1000, per_destination_pps=10, own_servers=["198.18.1.0/24"])
    lim = limiter_from_config(cfg)
    waits = [lim.take_sync("198.18.10.1") for _ in range(11)]
    assert waits[0] == 0.0 and 0.95 <= waits[10] <= 1.05          # the 11th to one address: 1 s later
    assert max(lim.take_sync("198.18.1.53") for _ in range(11)) < 0.05   # own server: no per-address wait
    glob = limiter_from_config(EtiquetteConfig(rate_pps=10, per_destination_pps=10, own_servers=["198.18.1.0/24"]))
    assert [glob.take_sync("198.18.1.53") > 0 for _ in range(12)][-1]  # the global rate still holds
    # shards share both limits; a CLI rate only lowers the configured one
    sh = limiter_from_config(cfg, rate_cap=1e9, shares=4)
    assert (sh.rate, sh.per_destination) == (250, 2.5)
    with pytest.raises(ValueError):
        EtiquetteConfig(own_servers=["not-a-network"])


def test_per_destination_spacing_survives_a_stalled_event_loop():
    """Slots are reserved in advance; a loop that falls behind (CPU contention) wakes
    several waiters at once: they must still be released 1/per_destination apart
    (issue 26: a server counted 24 connections/s at a limit of 20)."""
    async def go():
        lim = RateLimiter(rate=10_000, per_destination=20)
        released = []

        async def one():
            await lim.acquire("198.18.10.1")
            released.append(time.monotonic())
        tasks = [asyncio.ensure_future(one()) for _ in range(10)]
        await asyncio.sleep(0)
        time.sleep(0.3)            # the loop stalls while 6 slots (50 ms apart) fall due
        await asyncio.gather(*tasks)
        return released
    r = asyncio.run(go())
    gaps = [b - a for a, b in zip(r, r[1:])]
    assert min(gaps) >= 0.049, gaps


def test_runner_never_hands_blocked_targets_to_scanner(db):
    from netsurvey.config import SurveyConfig
    from netsurvey.runs import start_run
    from netsurvey.scanning import ScanContext, Scanner, ScanOutcome, ScanStatus, ScanTarget, run_scan

    seen = []

    class Echo(Scanner):
        name = "echo"

        async def scan(self, target):
            seen.append(target.address)
            return ScanOutcome(target, ScanStatus.SUCCESS, {"ok": True})

    cfg = SurveyConfig()
    ctx = ScanContext(db=db, run=start_run(db, "echo", {}), config=cfg,
                      policy=TargetPolicy.from_config(cfg.etiquette), limiter=RateLimiter(10_000, 1000))
    s = Echo()
    s.init(None, ctx)
    targets = [ScanTarget("a.test", "198.18.2.20", 443), ScanTarget("x.test", "8.8.8.8", 443),
               ScanTarget("y.test", "127.0.0.1", 443), ScanTarget("b.test", "2001:2:0:2::21", 443)]
    stored = []
    counts = asyncio.run(run_scan(s, targets, stored.append, show_progress=False))
    assert sorted(seen) == ["198.18.2.20", "2001:2:0:2::21"]
    assert counts == {"success": 2, "blocked": 2}
    assert {o.target.address: o.error for o in stored if o.status is ScanStatus.BLOCKED} == {
        "8.8.8.8": "not-allowed", "127.0.0.1": "not-allowed"}


@pytest.mark.parametrize("concurrency", [1, 8, 64, 512])
def test_rate_limit_holds_under_any_concurrency(db, concurrency):
    """Whatever the number of probes in flight, the runner never exceeds the global rate
    (plus its one-second burst) nor the per-destination rate."""
    from netsurvey.config import SurveyConfig
    from netsurvey.runs import start_run
    from netsurvey.scanning import ScanContext, Scanner, ScanOutcome, ScanStatus, ScanTarget, run_scan

    sent: list[tuple[float, str]] = []

    class Stamp(Scanner):
        name = "stamp"

        async def scan(self, target):
            sent.append((time.monotonic(), target.address))
            await asyncio.sleep(0.01)
            return ScanOutcome(target, ScanStatus.SUCCESS)

    rate, per_dest = 400.0, 50.0
    cfg = SurveyConfig()
    ctx = ScanContext(db=db, run=start_run(db, "stamp", {}), config=cfg,
                      policy=TargetPolicy.from_config(cfg.etiquette), limiter=RateLimiter(rate, per_dest))
    s = Stamp()
    s.init(None, ctx)
    targets = [ScanTarget(None, f"198.18.10.{i % 20 + 1}", 443) for i in range(1200)]
    asyncio.run(run_scan(s, targets, lambda o: None, concurrency=concurrency, show_progress=False))
    times = sorted(t for t, _ in sent)
    assert len(times) == 1200
    # any window of w seconds holds at most rate * w + burst probes (2% allowance: the
    # timestamps are taken after the event loop wakes each task, which jitters them by ms;
    # a missing limiter sends all 1200 within a few ms and fails by far)
    for w in (0.5, 1.0, 2.0):
        j = 0
        for i, t in enumerate(times):
            while times[j] < t - w:
                j += 1
            assert i - j + 1 <= (rate * w + rate) * 1.02 + 1, (w, i - j + 1)
    by_dest: dict[str, list[float]] = {}
    for t, a in sent:
        by_dest.setdefault(a, []).append(t)
    for a, ts in by_dest.items():
        ts.sort()
        # 60 probes per address at 50/s: the last goes out >= 59/50 s after the first
        assert ts[-1] - ts[0] >= (len(ts) - 1) / per_dest - 0.05, a
