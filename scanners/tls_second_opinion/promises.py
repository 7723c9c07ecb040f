"""How the promise matrix (tests/promises/test_promises.py) aims tls-second-opinion at the
testbed: gnutls-cli --resume against explicit HOST=ADDRESS targets (the nginx hosts)."""
from __future__ import annotations

from netsurvey.measure import PromiseCase

from ..promise_targets import targets

#: the rate case: six TLS hosts' addresses (per-destination pacing binds)
SO_HOSTS = (("a.test", "198.18.2.20"), ("b.test", "198.18.2.21"), ("t.test", "198.18.2.22"),
            ("example.test", "198.18.2.9"), ("www.example.test", "198.18.2.10"), ("static.example.test", "198.18.2.11"))

TLS_SECOND_OPINION = PromiseCase(
    cmd=("scan", "tls-second-opinion"), hosts=(),
    args=[*targets("a.test=198.18.2.20", "b.test=198.18.2.21"), "--timeout", "5"], block="b.test",
    targets={"198.18.2.20", "198.18.2.21"},
    rate_args=[*targets(*([f"{h}={a}" for h, a in SO_HOSTS] * 4)), "--timeout", "5", "--concurrency", "6"],
    rate_targets={a for _, a in SO_HOSTS},
    term_args=[*targets(*("a.test=198.18.2.20" for _ in range(40))), "--timeout", "5", "--concurrency", "1"])
