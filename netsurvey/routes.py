"""Does a packet to this address leave the machine by the default route?

The testbed's ranges (198.18.0.0/15, 2001:2::/48) are special-purpose: they exist only
inside the network namespaces the testbed creates. Targeted from a namespace where no
route of the testbed's covers them (the root namespace, a container with host
networking), the kernel sends them to the default gateway, off the machine (an
adversary pass saw one DNS question to 198.18.1.53 leave that way). :class:`RouteTable`
is a snapshot of the kernel's routes in the namespace the process runs in (``ip -j route
show table all``: the local, main and default tables, which the stock rules consult) and
answers :meth:`RouteTable.via_default` by longest-prefix match; the etiquette refuses a
special-purpose address whose best route is a default route (``/0``).

Policy routing rules other than the stock ones are not modelled; when the routes cannot
be read at all, every special-purpose address counts as off the machine (fail closed).
"""
from __future__ import annotations

import ipaddress
import json
import shutil
import subprocess
from dataclasses import dataclass
from typing import Optional

#: Tables the stock rules (0 local, 32766 main, 32767 default) consult, by `ip -j` name.
STOCK_TABLES = ("local", "main", "default")
#: Route types that never forward a packet to another machine.
_LOCAL_TYPES = {"local", "unreachable", "blackhole", "prohibit", "throw", "nat"}
_IGNORED_TYPES = {"broadcast", "multicast", "anycast"}


@dataclass(frozen=True)
class Route:
    network: ipaddress.IPv4Network | ipaddress.IPv6Network
    kind: str          # 'unicast', 'local', 'unreachable', ...
    dev: str           # output device ('' for types without one)
    gateway: str       # '' when on-link


def _ip_binary() -> Optional[str]:
    return shutil.which("ip") or next((p for p in ("/usr/sbin/ip", "/sbin/ip", "/bin/ip")
                                       if shutil.which(p)), None)


def read_routes(timeout_s: float = 5.0) -> Optional[list[Route]]:
    """The routes of this process's network namespace, or None when they cannot be read."""
    ip = _ip_binary()
    if ip is None:
        return None
    out: list[Route] = []
    for family in ("-4", "-6"):
        try:
            proc = subprocess.run([ip, "-j", family, "route", "show", "table", "all"],
                                  capture_output=True, timeout=timeout_s, check=False)
        except (OSError, subprocess.TimeoutExpired):
            return None
        if proc.returncode != 0:
            return None
        try:
            rows = json.loads(proc.stdout or b"[]")
        except ValueError:
            return None
        for r in rows:
            if str(r.get("table", "main")) not in STOCK_TABLES:
                continue
            kind = r.get("type", "unicast")
            if kind in _IGNORED_TYPES:
                continue
            dst = r.get("dst", "")
            if dst == "default":
                dst = "0.0.0.0/0" if family == "-4" else "::/0"
            try:
                net = ipaddress.ip_network(dst, strict=False)
            except ValueError:
                continue
            out.append(Route(net, kind, str(r.get("dev", "")), str(r.get("gateway", ""))))
    return out


class RouteTable:
    """Longest-prefix match over a snapshot of the namespace's routes (taken once)."""

    def __init__(self, routes: Optional[list[Route]]):
        self.readable = routes is not None
        # version -> prefix length -> network int -> best route kind at that prefix
        self._by_len: dict[int, dict[int, dict[int, Route]]] = {4: {}, 6: {}}
        for r in routes or ():
            by_net = self._by_len[r.network.version].setdefault(r.network.prefixlen, {})
            key = int(r.network.network_address)
            prev = by_net.get(key)
            # a 'local' route (table local) wins over a unicast one at the same prefix
            if prev is None or (r.kind in _LOCAL_TYPES and prev.kind not in _LOCAL_TYPES):
                by_net[key] = r
        self._lengths = {v: sorted(d, reverse=True) for v, d in self._by_len.items()}

    @classmethod
    def snapshot(cls) -> "RouteTable":
        return cls(read_routes())

    def best(self, ip: ipaddress.IPv4Address | ipaddress.IPv6Address) -> Optional[Route]:
        bits = 32 if ip.version == 4 else 128
        value = int(ip)
        by_len = self._by_len[ip.version]
        for plen in self._lengths[ip.version]:
            key = (value >> (bits - plen)) << (bits - plen) if plen else 0
            r = by_len[plen].get(key)
            if r is not None:
                return r
        return None

    def via_default(self, ip: ipaddress.IPv4Address | ipaddress.IPv6Address) -> bool:
        """True when a packet to ``ip`` would take a default route (or the routes are
        unreadable: fail closed). No route at all is False: the kernel refuses to send."""
        if not self.readable:
            return True
        r = self.best(ip)
        return r is not None and r.network.prefixlen == 0 and r.kind not in _LOCAL_TYPES
