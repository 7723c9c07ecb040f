"""How the promise matrix (tests/promises/test_promises.py) aims the TLS measurements at the testbed."""
from __future__ import annotations

from netsurvey.measure import ALL_TLS_HOSTS, PromiseCase

from ..promise_targets import TLS_HOSTS

TLS = PromiseCase(
    cmd=("scan", "tls"), hosts=TLS_HOSTS, args=["--list", "{list}", "--no-verify", "--no-ipv6", "--timeout", "2"],
    block="b.test", term_hosts=ALL_TLS_HOSTS)

TLS_LIFETIME = PromiseCase(
    cmd=("scan", "tls-lifetime"), hosts=TLS_HOSTS,
    args=["--list", "{list}", "--no-verify", "--no-ipv6", "--timeout", "2", "--max-age", "2s",
          "--step", "1s", "--mechanism", "ticket", "--tls", "1.2"], block="b.test",
    rate_args=["--list", "{list}", "--no-verify", "--no-ipv6", "--timeout", "2", "--max-age", "2s", "--step", "1s"],
    term_args=["--list", "{list}", "--no-verify", "--no-ipv6", "--timeout", "2", "--max-age", "30s",
               "--step", "2s", "--mechanism", "ticket", "--tls", "1.2"])

TLS_SHARED = PromiseCase(
    cmd=("scan", "tls-shared"), hosts=TLS_HOSTS,
    args=["--list", "{list}", "--no-verify", "--timeout", "2", "--mechanism", "ticket", "--tls", "1.2"], block="b.test",
    term_hosts=ALL_TLS_HOSTS)

TLS_ZGRAB = PromiseCase(
    cmd=("scan", "tls-zgrab"), hosts=TLS_HOSTS, args=["--list", "{list}", "--no-ipv6"], block="b.test",
    rate_hosts=ALL_TLS_HOSTS, term_hosts=ALL_TLS_HOSTS,
    requires={"tools/go/bin/zgrab2": "zgrab2 is not built (scripts/build_go_tools.sh zgrab2)"})
