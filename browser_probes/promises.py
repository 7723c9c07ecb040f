"""How the promise matrix (tests/promises/test_promises.py) aims the browser measurements at the testbed."""
from __future__ import annotations

from netsurvey.measure import PromiseCase

_BROWSER_NA = ("a browser visit opens the browser's own connections; pacing, sharding and SIGTERM of browser runs "
               "are not promised")
_FIXED = "fixed testbed experiments (servers that observe the browser), not a target list"

PAGELOAD = PromiseCase(
    cmd=("browser", "pageload"), hosts=("a.test", "b.test"),
    args=["--list", "{list}", "--browsers", "1", "--page-timeout", "10"], block="b.test",
    na={"rate": _BROWSER_NA, "sigterm": _BROWSER_NA, "worker_config": _BROWSER_NA, "procs_secret": _BROWSER_NA})

TRACK = PromiseCase(
    cmd=("browser", "track"), hosts=(), args=["--test", "lifetime", "--wait", "0"], block="track.test",
    targets={"198.18.2.60"},
    na={p: _FIXED for p in ("blocked", "rate", "sigterm", "worker_config", "procs_secret")})

#: the browser's own lifetime: one known-answer probe on the 4-s host
LIFETIME = PromiseCase(
    cmd=("browser", "lifetime"), hosts=(),
    args=["--browser", "chromium", "--state", "tls13-psk", "--short", "--offset", "3600"], block="hint.track.test",
    targets={"198.18.2.63"},
    na={p: _FIXED for p in ("blocked", "rate", "sigterm", "worker_config", "procs_secret")})

#: the browser's revisit timing runs only in the timing testbed's vantage (nstt-vantage,
#: behind the delay line), which the promise lab cannot reach: its dry run and a blocked
#: server are checked by a sniffer on the timing link in tests/browser_probes/test_browser_revisit.py
REVISIT = PromiseCase(
    cmd=("browser", "revisit"), hosts=(), args=["--browser", "chromium", "--repeat", "1"], block="timing.test",
    targets={"198.18.250.2", "2001:2:0:250::2"},
    na={p: "runs only in the timing testbed's vantage namespace, which the promise lab cannot "
           "reach (tests/browser_probes/test_browser_revisit.py sniffs the timing link for the dry run and "
           "a blocked server); a browser's own connections are not paced or sharded"
        for p in ("dry_run", "blocked", "rate", "sigterm", "worker_config", "procs_secret")})
