"""Scanner etiquette in one place, used by every scanner: which addresses may be contacted
(allow-list, blocklist, opt-out files; checked after DNS resolution), global and
per-destination rate limits, and the contact string for HTTP User-Agents.

The default allows only the testbed's ranges (198.18.0.0/15, 2001:2::/48); reserved and
special-purpose ranges are always blocked unless explicitly allowed, and even then never
contacted over the namespace's default route ('off-machine-route', routes.py): outside the
testbed's namespaces those ranges lead off the machine.
"""
from __future__ import annotations

import asyncio
import ipaddress
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable

from .config import EtiquetteConfig
from .errors import UsageError
from .routes import RouteTable

IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network

#: Special-purpose ranges (IANA's IPv4 and IPv6 Special-Purpose Address Registries, RFC
#: 6890 and successors; every entry not "globally reachable" is covered, see
#: tests/core/test_reserved_ranges.py), multicast, and deprecated ranges that embed or stand
#: for other addresses (::/96 IPv4-compatible, 2002::/16 6to4 embeds any IPv4 address,
#: private ones included; fec0::/10 site-local). Never contacted unless a network in the
#: allow-list is (or lies inside) one of them, as the testbed's benchmarking ranges do.
RESERVED = [ipaddress.ip_network(n) for n in (
    "0.0.0.0/8", "10.0.0.0/8", "100.64.0.0/10", "127.0.0.0/8", "169.254.0.0/16", "172.16.0.0/12",
    "192.0.0.0/24", "192.0.2.0/24", "192.88.99.0/24", "192.168.0.0/16", "198.18.0.0/15",
    "198.51.100.0/24", "203.0.113.0/24", "224.0.0.0/4", "240.0.0.0/4", "255.255.255.255/32",
    "::/128", "::1/128", "::/96", "::ffff:0:0/96", "64:ff9b::/96", "64:ff9b:1::/48", "100::/64",
    "100:0:0:1::/64", "2001::/23", "2001:db8::/32", "2002::/16", "3fff::/20", "5f00::/16",
    "fc00::/7", "fe80::/10", "fec0::/10", "ff00::/8")]


def read_network_file(path: Path) -> list[IPNetwork]:
    """One network per line, '#' comments. Raises UsageError naming file and line."""
    from .config import MAX_TOML_BYTES, read_input_bytes

    nets = []
    try:
        lines = read_input_bytes(Path(path), "blocklist", 4 * MAX_TOML_BYTES).decode("utf-8").splitlines()
    except UnicodeDecodeError as exc:
        line_no = exc.object[:exc.start].count(b"\n") + 1
        raise UsageError(f"{path}:{line_no}: not UTF-8 text (byte 0x{exc.object[exc.start]:02x})") from None
    except OSError as exc:
        raise UsageError(f"{path}: cannot read blocklist: {exc.strerror}") from None
    for i, line in enumerate(lines, 1):
        text = line.split("#", 1)[0].strip()
        if not text:
            continue
        try:
            nets.append(ipaddress.ip_network(text, strict=False))
        except ValueError as exc:
            raise UsageError(f"{path}:{i}: {exc}") from None
    return nets


@dataclass(frozen=True)
class TargetPolicy:
    """Decides whether an address may be contacted."""

    allow: tuple[IPNetwork, ...]
    block: tuple[IPNetwork, ...]
    #: the special-purpose ranges (RESERVED) among ``block``: those the allow-list does not
    #: open (from_config adds them), told apart from the configured blocklist in
    #: :meth:`blocking_rule`
    reserved: tuple[IPNetwork, ...] = ()
    #: address text -> reason (or None); scanners ask again for every packet to the same
    #: few servers, and a decision costs ~20 us of ipaddress work. Bounded, cleared when full.
    _decided: dict = field(default_factory=dict, init=False, repr=False, compare=False)
    #: computed once, on first use: 'opened' (the special-purpose ranges the allow-list
    #: opens) and 'routes' (the namespace's RouteTable, routes.py)
    _lazy: dict = field(default_factory=dict, init=False, repr=False, compare=False)

    @classmethod
    def from_config(cls, cfg: EtiquetteConfig) -> "TargetPolicy":
        allow = tuple(ipaddress.ip_network(n, strict=False) for n in cfg.allow)
        block = [ipaddress.ip_network(n, strict=False) for n in cfg.block]
        for f in cfg.blocklist_files:
            block += read_network_file(f)
        # reserved ranges stay blocked unless an allowed network lies inside them
        reserved = tuple(r for r in RESERVED if not any(a.version == r.version and a.subnet_of(r)  # type: ignore[arg-type]  # same version
                                                        for a in allow))
        return cls(allow, tuple(block) + reserved, reserved)

    def reason_blocked(self, address: str) -> str | None:
        """None if ``address`` may be contacted, else why not ('not-allowed', 'blocklisted')."""
        decided = self._decided
        try:
            return decided[address]
        except KeyError:
            pass
        if len(decided) >= 65536:
            decided.clear()
        why = decided[address] = self._decide(address)
        return why

    def blocking_rule(self, address: str) -> str | None:
        """None if ``address`` may be contacted, else the rule that refuses it (a key of
        :data:`BLOCK_RULES`, in the order they are applied): 'not-allowed' (outside
        etiquette.allow), 'reserved' (a special-purpose range the allow-list does not open),
        'blocklist' (etiquette.block and etiquette.blocklist_files: the opt-outs),
        'off-machine-route'; 'not-an-address' for text that is none. The same decision as
        :meth:`reason_blocked`, which says 'blocklisted' for both reserved and blocklist."""
        why = self.reason_blocked(address)
        if why != "blocklisted":
            return why
        ip = ipaddress.ip_address(address)
        if ip.version == 6 and ip.ipv4_mapped:
            ip = ip.ipv4_mapped
        return "reserved" if any(ip.version == r.version and ip in r for r in self.reserved) else "blocklist"

    def _decide(self, address: str) -> str | None:
        try:
            ip = ipaddress.ip_address(address)
        except ValueError:
            return "not-an-address"
        if ip.version == 6 and ip.ipv4_mapped:
            ip = ip.ipv4_mapped
        if not any(ip.version == a.version and ip in a for a in self.allow):
            return "not-allowed"
        if any(ip.version == b.version and ip in b for b in self.block):
            return "blocklisted"
        if any(ip.version == r.version and ip in r for r in self._opened()) and self._route_table().via_default(ip):
            # a testbed (special-purpose) address that this namespace would send to its
            # default gateway: off the machine, never to the testbed (routes.py)
            return "off-machine-route"
        return None

    def leaves_machine(self, network: IPNetwork) -> bool:
        """True when part of a special-purpose ``network`` (a --cidr / --zmap range) would
        go out by this namespace's default route (any address of it: RouteTable.range_via_default)."""
        if not any(network.version == r.version and network.overlaps(r) for r in RESERVED):
            return False
        return self._route_table().range_via_default(network)

    def testbed_off_machine(self) -> list:
        """The allowed networks inside special-purpose ranges (the testbed's) that this
        namespace would send, in part at least, by its default route. A browser goes
        wherever a page points it, past this policy: it may run only where this is empty
        (the session-31 adversary: a page at a routed testbed address made Chromium fetch
        198.18.77.99 and 2001:2:0:77::99 by the default route)."""
        nets = [a for a in self.allow if any(a.version == r.version and a.subnet_of(r) for r in RESERVED)]  # type: ignore[arg-type]  # same version
        if not nets:
            return []
        table = self._route_table()
        return [a for a in nets if table.range_via_default(a)]

    def _opened(self) -> list:
        """The special-purpose ranges the allow-list opens (the others are blocked)."""
        if "opened" not in self._lazy:
            self._lazy["opened"] = [r for r in RESERVED if any(a.version == r.version and a.subnet_of(r)  # type: ignore[arg-type]  # same version
                                                               for a in self.allow)]
        return self._lazy["opened"]

    def _route_table(self) -> RouteTable:
        if "routes" not in self._lazy:
            self._lazy["routes"] = RouteTable.snapshot()
        return self._lazy["routes"]

    def allowed(self, address: str) -> bool:
        return self.reason_blocked(address) is None

    def filter(self, addresses: Iterable[str]) -> list[str]:
        return [a for a in addresses if self.allowed(a)]


#: The rules of :meth:`TargetPolicy.blocking_rule` in the order they are applied, with the
#: words a dry-run plan uses for them.
BLOCK_RULES = {
    "not-allowed": "not in etiquette.allow",
    "reserved": "reserved range",
    "blocklist": "blocklist/opt-out",
    "off-machine-route": "off-machine route",
}


OFF_MACHINE_HINT = ("a special-purpose (testbed) address that this namespace routes through its default "
                    "gateway, off the machine: run inside the testbed (netsurvey testbed exec -- ...)")


def explain(reason: str) -> str:
    """A reason of :meth:`TargetPolicy.reason_blocked` as words for a one-line error."""
    if reason == "off-machine-route":
        return OFF_MACHINE_HINT
    return f"{reason} by the etiquette policy (etiquette.allow)"


#: The special-purpose ranges the default allow-list opens (the testbed's: 198.18.0.0/15 in
#: 198.18.0.0/15, 2001:2::/48 in 2001::/23): a resolver in them is a testbed resolver.
TESTBED_SPECIAL = [r for r in RESERVED if any(a.version == r.version and a.subnet_of(r) for a in  # type: ignore[arg-type]  # same version
                                              (ipaddress.ip_network(n) for n in EtiquetteConfig().allow))]


def check_resolvers_on_machine(nameservers: Iterable[str], source: str = "resolv.conf nameserver") -> None:
    """UsageError when a resolver the system is configured with (resolv.conf) is a testbed
    address this namespace would reach by its default route: every hostname resolved
    there would be a question sent off the machine (the session-31 adversary: scan tfo, tls,
    quic, ... --list through /etc/netns/NS/resolv.conf). Other resolvers (the machine's
    own, private ones) are the operator's choice and pass."""
    table = None
    for ns in nameservers:
        try:
            ip = ipaddress.ip_address(str(ns).split("%", 1)[0])
        except ValueError:
            continue
        if ip.version == 6 and ip.ipv4_mapped:
            ip = ip.ipv4_mapped
        if not any(ip.version == r.version and ip in r for r in TESTBED_SPECIAL):
            continue
        table = table or RouteTable.snapshot()
        if table.via_default(ip):
            raise UsageError(f"{source} {ns}: {OFF_MACHINE_HINT}")


def check_on_machine(option: str, address: str) -> None:
    """UsageError when ``address`` (a resolver or server given on the command line, not a
    target) is special-purpose and this namespace would reach it by its default route."""
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return
    if ip.version == 6 and ip.ipv4_mapped:
        ip = ip.ipv4_mapped
    if any(ip.version == r.version and ip in r for r in RESERVED) and RouteTable.snapshot().via_default(ip):
        raise UsageError(f"{option} {address}: {OFF_MACHINE_HINT}")


#: Per-destination spacing is 1/r stretched by this share, so that sends a little late or
#: early after their release (event-loop jitter) still put at most r connections to one
#: address in any one-second window as the server sees them (at r = 20: 52 ms, 2 ms to
#: spare). Proportional, so a high per-destination rate stays high.
SPACING_MARGIN = 0.04


def spacing_s(per_destination: float) -> float:
    """Seconds between two releases to one destination at ``per_destination`` per second."""
    return (1.0 + SPACING_MARGIN) / per_destination


class RateLimiter:
    """Token buckets: one global (``rate`` per second) and one per destination address
    (``per_destination`` per second), both with a burst of one second's worth (min 1).
    ``await acquire(dest)`` waits until a probe to ``dest`` may be sent; packet engines
    call ``take_sync(dest)`` and wait the seconds it returns. Destinations inside
    ``exempt`` (etiquette.own_servers: servers the researcher runs) skip the
    per-destination bucket; the global one always holds."""

    def __init__(self, rate: float, per_destination: float | None = None, max_destinations: int = 100_000,
                 exempt: Iterable[IPNetwork] = ()):
        if rate <= 0 or (per_destination is not None and per_destination <= 0):
            raise UsageError("rate limits must be positive")
        self.rate = rate
        self.per_destination = per_destination
        self.exempt = tuple(exempt)
        self._exempt_memo: dict[str, bool] = {}
        self._tokens = max(1.0, rate)
        self._last = time.monotonic()
        self._dest: OrderedDict[str, float] = OrderedDict()  # dest -> earliest next send time
        self._released: OrderedDict[str, float] = OrderedDict()  # dest -> when the last acquire returned
        self._max_dest = max_destinations
        self._lock = asyncio.Lock()

    def _take_global(self) -> float:
        now = time.monotonic()
        self._tokens = min(max(1.0, self.rate), self._tokens + (now - self._last) * self.rate)
        self._last = now
        if self._tokens >= 1:
            self._tokens -= 1
            return 0.0
        wait = (1 - self._tokens) / self.rate
        self._tokens -= 1
        return wait

    def _is_exempt(self, dest: str) -> bool:
        hit = self._exempt_memo.get(dest)
        if hit is None:
            try:
                a = ipaddress.ip_address(dest)
                hit = any(a.version == n.version and a in n for n in self.exempt)
            except ValueError:
                hit = False
            if len(self._exempt_memo) > self._max_dest:
                self._exempt_memo.clear()
            self._exempt_memo[dest] = hit
        return hit

    def _take_dest(self, dest: str | None, wait: float) -> float:
        """The per-destination slot after a global wait of ``wait`` s: the total wait."""
        if dest is None or not self.per_destination or (self.exempt and self._is_exempt(dest)):
            return wait
        now = time.monotonic()
        start = max(now + wait, self._dest.get(dest, 0.0))
        self._dest[dest] = start + spacing_s(self.per_destination)
        self._dest.move_to_end(dest)
        if len(self._dest) > self._max_dest:
            self._dest.popitem(last=False)
        return start - now

    async def acquire(self, dest: str | None = None) -> None:
        async with self._lock:
            wait = self._take_dest(dest, self._take_global())
        if wait > 0:
            await asyncio.sleep(wait)
        if dest is not None and self.per_destination and not (self.exempt and self._is_exempt(dest)):
            await self._spaced(dest)

    async def _spaced(self, dest: str) -> None:
        """Waiters whose sleeps ended together (an event loop that fell behind wakes them in
        one go) would send to ``dest`` in a burst although their slots were spaced: each is
        released only :func:`spacing_s` (1/per_destination and a margin) after the previous one
        to ``dest`` actually was. The margin: releases exactly 1/r apart reached the server
        up to a few ms closer together (the send follows the release on a busy loop), and
        21 of them fell within one second at r = 20 (bench/lifetime_rehearsal.py, 10,000
        hosts, counted from the server's SYN-ACKs)."""
        assert self.per_destination is not None   # _spaced runs only with a per-destination limit
        gap = spacing_s(self.per_destination)
        while True:
            now = time.monotonic()
            last = self._released.get(dest)
            if last is None or now - last >= gap:
                self._released[dest] = now
                self._released.move_to_end(dest)
                if len(self._released) > self._max_dest:
                    self._released.popitem(last=False)
                return
            await asyncio.sleep(gap - (now - last))

    def take_sync(self, dest: str | None = None) -> float:
        """Non-async variant for packet engines: seconds to wait before the next packet
        (to ``dest``, when given: its per-destination slot is taken too)."""
        return self._take_dest(dest, self._take_global())


def limiter_from_config(cfg: EtiquetteConfig, rate_cap: float | None = None, shares: int = 1) -> RateLimiter:
    """The one way a run's limiter is made: etiquette.rate_pps (lowered, never raised, by
    ``rate_cap``) and per_destination_pps, both divided among ``shares`` shards, with
    etiquette.own_servers exempt from the per-destination bucket."""
    rate = cfg.rate_pps if rate_cap is None else min(cfg.rate_pps, rate_cap)
    return RateLimiter(rate / shares, cfg.per_destination_pps / shares,
                       exempt=[ipaddress.ip_network(n, strict=False) for n in cfg.own_servers])


def user_agent(cfg: EtiquetteConfig, product: str = "netsurvey") -> str:
    from . import __version__

    return f"{product}/{__version__} (+{cfg.contact})"
