"""The reserved set against IANA's special-purpose address registries (the reference).

Entries transcribed from https://www.iana.org/assignments/iana-ipv4-special-registry and
https://www.iana.org/assignments/iana-ipv6-special-registry (as of 2025): (prefix, name,
globally reachable). Every entry that is not globally reachable must be inside the
reserved set, so that `allow = ["0.0.0.0/0", "::/0"]` still never contacts it."""
import ipaddress

import pytest

from netsurvey.config import EtiquetteConfig
from netsurvey.etiquette import RESERVED, TargetPolicy

pytestmark = pytest.mark.unit   # no database, no CLI subprocess, no testbed, no root


IANA_IPV4 = [
    ("0.0.0.0/8", "This network", False),
    ("0.0.0.0/32", "This host on this network", False),
    ("10.0.0.0/8", "Private-Use", False),
    ("100.64.0.0/10", "Shared Address Space", False),
    ("127.0.0.0/8", "Loopback", False),
    ("169.254.0.0/16", "Link Local", False),
    ("172.16.0.0/12", "Private-Use", False),
    ("192.0.0.0/24", "IETF Protocol Assignments", False),
    ("192.0.0.0/29", "IPv4 Service Continuity Prefix", False),
    ("192.0.0.8/32", "IPv4 dummy address", False),
    ("192.0.0.9/32", "Port Control Protocol Anycast", True),
    ("192.0.0.10/32", "Traversal Using Relays around NAT Anycast", True),
    ("192.0.0.170/32", "NAT64/DNS64 Discovery", False),
    ("192.0.0.171/32", "NAT64/DNS64 Discovery", False),
    ("192.0.2.0/24", "Documentation (TEST-NET-1)", False),
    ("192.31.196.0/24", "AS112-v4", True),
    ("192.52.193.0/24", "AMT", True),
    ("192.88.99.0/24", "Deprecated (6to4 Relay Anycast)", False),
    ("192.168.0.0/16", "Private-Use", False),
    ("192.175.48.0/24", "Direct Delegation AS112 Service", True),
    ("198.18.0.0/15", "Benchmarking", False),
    ("198.51.100.0/24", "Documentation (TEST-NET-2)", False),
    ("203.0.113.0/24", "Documentation (TEST-NET-3)", False),
    ("240.0.0.0/4", "Reserved", False),
    ("255.255.255.255/32", "Limited Broadcast", False),
]
IANA_IPV6 = [
    ("::1/128", "Loopback Address", False),
    ("::/128", "Unspecified Address", False),
    ("::ffff:0:0/96", "IPv4-mapped Address", False),
    ("64:ff9b::/96", "IPv4-IPv6 Translat.", True),
    ("64:ff9b:1::/48", "IPv4-IPv6 Translat.", False),
    ("100::/64", "Discard-Only Address Block", False),
    ("100:0:0:1::/64", "Dummy IPv6 Prefix", False),
    ("2001::/23", "IETF Protocol Assignments", False),
    ("2001::/32", "TEREDO", False),
    ("2001:1::1/128", "Port Control Protocol Anycast", True),
    ("2001:1::2/128", "Traversal Using Relays around NAT Anycast", True),
    ("2001:1::3/128", "DNS-SD Service Registration Protocol Anycast", True),
    ("2001:2::/48", "Benchmarking", False),
    ("2001:3::/32", "AMT", True),
    ("2001:4:112::/48", "AS112-v6", True),
    ("2001:10::/28", "Deprecated (previously ORCHID)", False),
    ("2001:20::/28", "ORCHIDv2", True),
    ("2001:30::/28", "Drone Remote ID Protocol Entity Tags (DETs) Prefix", True),
    ("2001:db8::/32", "Documentation", False),
    ("2002::/16", "6to4", False),
    ("2620:4f:8000::/48", "Direct Delegation AS112 Service", True),
    ("3fff::/20", "Documentation", False),
    ("5f00::/16", "Segment Routing (SRv6) SIDs", False),
    ("fc00::/7", "Unique-Local", False),
    ("fe80::/10", "Link-Local Unicast", False),
]
#: Not in those registries but never to be probed either.
EXTRA = ["224.0.0.0/4", "ff00::/8", "::/96", "fec0::/10"]


def _covered(net: str) -> bool:
    n = ipaddress.ip_network(net)
    return any(n.version == r.version and n.subnet_of(r) for r in RESERVED)


@pytest.mark.parametrize("prefix,name", [(p, n) for p, n, reachable in IANA_IPV4 + IANA_IPV6 if not reachable])
def test_every_not_globally_reachable_registry_entry_is_reserved(prefix, name):
    assert _covered(prefix), f"{prefix} ({name}) is missing from etiquette.RESERVED"


@pytest.mark.parametrize("prefix", EXTRA)
def test_multicast_and_deprecated_ranges_are_reserved(prefix):
    assert _covered(prefix)


@pytest.mark.parametrize("address", ["64:ff9b:1::a00:1", "2002:a00:1::1", "2002:c0a8:101::1", "::10.0.0.1",
                                     "fec0::1", "::1", "fe80::1", "10.0.0.1", "2001:db8::1"])
def test_allow_everything_still_blocks_reserved_addresses(address):
    policy = TargetPolicy.from_config(EtiquetteConfig(allow=["0.0.0.0/0", "::/0"]))
    assert policy.reason_blocked(address) is not None


@pytest.mark.parametrize("address", ["2a00:1450:4001:80b::200e", "8.8.8.8", "2620:fe::fe"])
def test_allow_everything_allows_ordinary_addresses(address):
    policy = TargetPolicy.from_config(EtiquetteConfig(allow=["0.0.0.0/0", "::/0"]))
    assert policy.reason_blocked(address) is None
