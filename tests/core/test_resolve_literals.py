"""An address given where a name is expected resolves to itself without a DNS question
(found by an adversarial review: `scan tls --target 198.18.2.9` asked the resolver for the name
'198.18.2.9' and recorded resolution-failed, while its dry run counted it as an address)."""
from __future__ import annotations

import asyncio
import socket

import pytest

from netsurvey.resolve import resolve_many

pytestmark = pytest.mark.unit   # no database, no CLI subprocess, no testbed, no root


def test_literals_resolve_to_themselves_and_ask_nothing():
    server = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)   # a silent resolver that counts questions
    server.bind(("127.0.0.1", 0))
    server.setblocking(False)
    port = server.getsockname()[1]

    async def go():
        return await resolve_many(["198.18.2.9", "2001:2::9", "[2001:2::a]", "name.test"], timeout=0.5,
                                  nameservers=["127.0.0.1"], ipv6=True, concurrency=2)

    import dns.asyncresolver

    orig = dns.asyncresolver.Resolver.__init__

    def at_port(self, *a, **k):   # the resolver asks our port (nameserver_ports of dnspython)
        orig(self, *a, **k)
        self.port = port

    dns.asyncresolver.Resolver.__init__ = at_port
    try:
        res = asyncio.run(go())
    finally:
        dns.asyncresolver.Resolver.__init__ = orig
    questions = []
    while True:
        try:
            questions.append(server.recv(4096))
        except BlockingIOError:
            break
    server.close()
    assert res["198.18.2.9"].ipv4 == ("198.18.2.9",) and res["198.18.2.9"].error is None
    assert res["2001:2::9"].ipv6 == ("2001:2::9",) and res["[2001:2::a]"].ipv6 == ("2001:2::a",)
    assert res["name.test"].error == "timeout"
    # only name.test was asked (A and AAAA, each possibly retried): never a literal
    assert questions and all(b"name" in q and b"198" not in q and b"2001" not in q for q in questions), questions
