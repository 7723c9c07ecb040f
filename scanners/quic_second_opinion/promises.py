"""How the promise matrix (tests/promises/test_promises.py) aims quic-second-opinion at the
testbed: ngtcp2's client, three QUIC connections per target; its cases are slow (~100 s)."""
from __future__ import annotations

from netsurvey.measure import PromiseCase

from ..promise_targets import targets

QUIC_SECOND_OPINION = PromiseCase(
    cmd=("scan", "quic-second-opinion"), hosts=(),
    args=[*targets("www.example.test=198.18.2.10", "retry.example.test=198.18.2.30"), "--timeout", "5"],
    block="retry.example.test", targets={"198.18.2.10", "198.18.2.30"},
    rate_args=[*targets(*(["www.example.test=198.18.2.10", "notoken.example.test=198.18.2.31"] * 3)),
               "--timeout", "5", "--concurrency", "6"],
    rate_targets={"198.18.2.10", "198.18.2.31"},
    term_args=[*targets(*("www.example.test=198.18.2.10" for _ in range(40))), "--timeout", "5", "--concurrency", "1"],
    slow=True)
