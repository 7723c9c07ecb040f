"""How the promise matrix (tests/promises/test_promises.py) aims the TFO measurements at the testbed."""
from __future__ import annotations

from netsurvey.measure import PromiseCase

from ..promise_targets import SCALE

TFO_HOSTS = ("on1.tfo.test", "on2.tfo.test", "off.tfo.test")
REUSE_HOSTS = ("lb-pool-a.tfo.test", "lb-pool-b.tfo.test", "on1.tfo.test")

TFO = PromiseCase(
    cmd=("scan", "tfo"), hosts=TFO_HOSTS, args=["--list", "{list}", "--cooldown", "0.5"], block="on2.tfo.test",
    rate_args=["--cidr", "198.19.0.0/27", "--cooldown", "0.2"], rate_targets=set(SCALE) | {"198.19.0.0", "198.19.0.31"},
    term_args=["--cidr", "198.19.0.0/24", "--rate", "20", "--cooldown", "0.5"])

TFO_LB = PromiseCase(
    cmd=("scan", "tfo-lb"), hosts=TFO_HOSTS,
    args=["--list", "{list}", "--rounds", "2", "--interval", "1", "--cooldown", "0.2"], block="on2.tfo.test",
    rate_args=["--list", "{list}", "--rounds", "10", "--interval", "0", "--cooldown", "0.1"],
    term_args=["--list", "{list}", "--rounds", "10", "--interval", "1", "--cooldown", "0.2"])

TFO_REUSE = PromiseCase(
    cmd=("scan", "tfo-reuse"), hosts=REUSE_HOSTS, args=["--list", "{list}", "--cooldown", "0.5"],
    block="lb-pool-b.tfo.test",
    term_args=["--list", "{list}", "--cooldown", "0.5", "--rate", "4"])
