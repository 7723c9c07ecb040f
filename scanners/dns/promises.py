"""How the promise matrix (tests/promises/test_promises.py) aims the DNS measurements at the
testbed: their targets are the resolver (198.18.1.1) and the authoritative server (knot,
198.18.1.53), the hosts are names to ask about."""
from __future__ import annotations

from netsurvey.measure import PromiseCase

DNS_NAMES = ("a.test", "b.test", "t.test", "example.test", "www.example.test", "static.example.test",
             "img.example.test", "ttl60.example.test", "tls12.example.test", "noid.example.test")

#: dns-ttl walks the delegation from the resolver: the resolver and knot are its targets
DNS_TTL = PromiseCase(
    cmd=("scan", "dns-ttl"), hosts=DNS_NAMES,
    args=["--list", "{list}", "--resolver", "198.18.1.1", "--family", "4", "--timeout", "0.3", "--retries", "0"],
    block="198.18.1.53", targets={"198.18.1.1", "198.18.1.53"}, dns_targets=True,
    rate_args=["--list", "{list}", "--nameserver", "198.18.1.53", "--timeout", "0.3"],
    rate_targets={"198.18.1.53"},
    term_args=["--list", "{list}", "--nameserver", "198.18.1.53", "--rate", "3", "--concurrency", "1"])

#: dns-ecs asks one server; blocking it blocks everything: refusing is correct
DNS_ECS = PromiseCase(
    cmd=("scan", "dns-ecs"), hosts=DNS_NAMES,
    args=["--list", "{list}", "--resolver", "198.18.1.53", "--subnet", "198.18.0.0/24", "--subnet", "198.18.7.0/24",
          "--timeout", "0.3", "--retries", "0"],
    block="198.18.1.53", targets={"198.18.1.53"}, dns_targets=True, refuse_ok=True,
    term_args=["--list", "{list}", "--resolver", "198.18.1.53", "--subnet", "198.18.0.0/24",
               "--subnet", "198.18.7.0/24", "--rate", "3", "--concurrency", "1"])

#: dns-second-opinion: kdig, one process per question, at one server; its cases are slow (~100 s)
DNS_SECOND_OPINION = PromiseCase(
    cmd=("scan", "dns-second-opinion"), hosts=DNS_NAMES,
    args=["--list", "{list}", "--nameserver", "198.18.1.53", "--subnet", "198.18.0.0/24"],
    block="198.18.1.53", targets={"198.18.1.53"}, dns_targets=True, refuse_ok=True,
    term_args=["--list", "{list}", "--nameserver", "198.18.1.53", "--subnet", "198.18.0.0/24",
               "--subnet", "198.18.7.0/24", "--rate", "3"],
    slow=True)
