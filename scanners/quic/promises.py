"""How the promise matrix (tests/promises/test_promises.py) aims the QUIC measurements at the testbed."""
from __future__ import annotations

from netsurvey.measure import PromiseCase

from ..promise_targets import SCALE, targets

QUIC_HOSTS = ("www.example.test", "retry.example.test", "notoken.example.test")

QUIC_DISCOVER = PromiseCase(
    cmd=("scan", "quic-discover"), hosts=QUIC_HOSTS, args=["--list", "{list}", "--timeout", "1s"],
    block="retry.example.test",
    rate_args=["--cidr", "198.19.0.0/27", "--timeout", "1s"], rate_targets=set(SCALE) | {"198.19.0.0", "198.19.0.31"},
    term_args=["--cidr", "198.19.0.0/24", "--timeout", "2s", "--concurrency", "20"])

QUIC = PromiseCase(
    cmd=("scan", "quic"), hosts=QUIC_HOSTS, args=["--list", "{list}", "--timeout", "2s"], block="retry.example.test",
    rate_args=[*targets(*SCALE[:24]), "--timeout", "1s", "--no-resume"], rate_targets=set(SCALE[:24]),
    term_args=[*targets(*SCALE[:24]), "--timeout", "2s", "--no-resume", "--concurrency", "2"])

QUIC_TURNOVER = PromiseCase(
    cmd=("scan", "quic-turnover"), hosts=QUIC_HOSTS,
    args=["--list", "{list}", "--timeout", "1s", "--every", "1s", "--for", "2s"], block="retry.example.test",
    rate_args=[*targets(*SCALE[:24]), "--timeout", "1s", "--every", "1s", "--for", "2s"],
    rate_targets=set(SCALE[:24]),
    term_args=["--list", "{list}", "--timeout", "1s", "--every", "1s", "--for", "60s"])
