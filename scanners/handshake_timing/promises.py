"""How the promise matrix (tests/promises/test_promises.py) aims handshake-timing at the
testbed: TCP and TLS 1.3 only (the shared hosts without QUIC would only time out), one
sample; plain TCP to the scale range for the rate and SIGTERM cases (a target's rows are
written when all its samples end: one sample each there)."""
from __future__ import annotations

from netsurvey.measure import PromiseCase

from ..promise_targets import SCALE, TLS_HOSTS, targets

HANDSHAKE_TIMING = PromiseCase(
    cmd=("scan", "handshake-timing"), hosts=TLS_HOSTS,
    args=["--list", "{list}", "--methods", "tcp,tls13_full,tls13_psk", "--samples", "1", "--timeout", "2"],
    block="b.test",
    rate_args=[*targets(*SCALE[:24]), "--methods", "tcp", "--samples", "2", "--timeout", "1"],
    rate_targets=set(SCALE[:24]),
    term_args=[*targets(*SCALE[:24]), "--methods", "tcp", "--samples", "1", "--timeout", "1"])
