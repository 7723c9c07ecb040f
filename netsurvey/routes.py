"""Does a packet to this address leave the machine by the default route?

The testbed's ranges (198.18.0.0/15, 2001:2::/48) are special-purpose: they exist only
inside the network namespaces the testbed creates. Targeted from a namespace where no
route of the testbed's covers them (the root namespace, a container with host
networking), the kernel sends them to the default gateway, off the machine (an
adversary pass saw one DNS question to 198.18.1.53 leave that way). :class:`RouteTable`
is a snapshot of the kernel's routes (``ip -j route show table all``: every table) and
policy rules (``ip -j rule show``) in the namespace the process runs in, and answers
:meth:`RouteTable.via_default` as the kernel picks a route: the rules in priority order,
longest-prefix match in the table a rule looks up; the etiquette refuses a special-purpose
address whose best route is a default route (``/0``).

A rule whose selectors cannot be judged for a packet not yet sent (``from`` a prefix,
``fwmark``, ``iif``, ``uidrange``, ports, ``not``) may apply: its table is consulted, and a
default route there counts as off the machine, but a specific one does not end the walk
(the session-31 adversary: a rule ``to 198.18.77.0/24 lookup 100`` with a default route in
table 100 sent packets off the machine while table main held a specific route). A
``goto`` rule or an unknown action counts as off the machine; so does every
special-purpose address when the routes or rules cannot be read (fail closed).
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
#: Rule keys that are no selector (the action and its arguments, bookkeeping).
_RULE_NON_SELECTORS = {"priority", "table", "action", "suppress_prefixlen", "flags", "protocol", "dst", "dstlen",
                       "src", "srclen"}
#: Route types that never forward a packet to another machine.
_LOCAL_TYPES = {"local", "unreachable", "blackhole", "prohibit", "throw", "nat"}
_IGNORED_TYPES = {"broadcast", "multicast", "anycast"}


@dataclass(frozen=True)
class Route:
    network: ipaddress.IPv4Network | ipaddress.IPv6Network
    kind: str          # 'unicast', 'local', 'unreachable', ...
    dev: str           # output device ('' for types without one)
    gateway: str       # '' when on-link
    table: str = "main"


@dataclass(frozen=True)
class Rule:
    """One policy routing rule (``ip -j rule show``)."""

    priority: int
    action: str        # 'lookup' (a table), 'blackhole', 'unreachable', 'prohibit', 'goto', ...
    table: str         # the table looked up ('' for other actions)
    dst: Optional[ipaddress.IPv4Network | ipaddress.IPv6Network] = None   # None: 'to all'
    definite: bool = True      # True when 'to' is its only selector: it applies to every such packet
    suppress_prefixlen: Optional[int] = None


#: The rules of a namespace nobody changed (RouteTable(routes) without rules).
STOCK_RULES = (Rule(0, "lookup", "local"), Rule(32766, "lookup", "main"), Rule(32767, "lookup", "default"))


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
            out.append(Route(net, kind, str(r.get("dev", "")), str(r.get("gateway", "")), str(r.get("table", "main"))))
    return out


def read_rules(timeout_s: float = 5.0) -> Optional[dict[int, list[Rule]]]:
    """The policy rules per IP version (4, 6), in priority order, or None when unreadable."""
    ip = _ip_binary()
    if ip is None:
        return None
    out: dict[int, list[Rule]] = {}
    for version in (4, 6):
        try:
            proc = subprocess.run([ip, "-j", f"-{version}", "rule", "show"],
                                  capture_output=True, timeout=timeout_s, check=False)
            rows = json.loads(proc.stdout or b"[]") if proc.returncode == 0 else None
        except (OSError, subprocess.TimeoutExpired, ValueError):
            return None
        if not isinstance(rows, list):
            return None
        rules = []
        for r in rows:
            dst = None
            if r.get("dst") not in (None, "all") and "not" not in r:   # 'not to X': may apply to anything
                try:
                    dst = ipaddress.ip_network(f"{r['dst']}/{r.get('dstlen', 32 if version == 4 else 128)}",
                                               strict=False)
                except ValueError:
                    return None
            selectors = {k for k in r if k not in _RULE_NON_SELECTORS}
            definite = not selectors and r.get("src", "all") == "all"
            if "goto" in r:
                action, table = "goto", ""
            elif "table" in r:
                action, table = "lookup", str(r["table"])
            else:
                action, table = str(r.get("action", "unknown")), ""
            sp = r.get("suppress_prefixlen")
            rules.append(Rule(int(r.get("priority", 0)), action, table, dst, definite,
                              int(sp) if sp is not None else None))
        out[version] = sorted(rules, key=lambda x: x.priority)
    return out


class RouteTable:
    """Longest-prefix match over a snapshot of the namespace's routes (taken once)."""

    def __init__(self, routes: Optional[list[Route]], rules: Optional[dict[int, list[Rule]]] = None):
        """``rules`` None: the stock rules (local, main, default tables)."""
        self.readable = routes is not None
        self._rules = rules if rules is not None else {4: list(STOCK_RULES), 6: list(STOCK_RULES)}
        # (version, table) -> prefix length -> network int -> best route at that prefix
        self._by_len: dict[tuple[int, str], dict[int, dict[int, Route]]] = {}
        for r in routes or ():
            by_net = self._by_len.setdefault((r.network.version, r.table), {}).setdefault(r.network.prefixlen, {})
            key = int(r.network.network_address)
            prev = by_net.get(key)
            # a 'local' route wins over a unicast one at the same prefix
            if prev is None or (r.kind in _LOCAL_TYPES and prev.kind not in _LOCAL_TYPES):
                by_net[key] = r
        self._lengths = {k: sorted(d, reverse=True) for k, d in self._by_len.items()}

    @classmethod
    def snapshot(cls) -> "RouteTable":
        routes, rules = read_routes(), read_rules()
        return cls(routes if rules is not None else None, rules)

    def best(self, ip: ipaddress.IPv4Address | ipaddress.IPv6Address, table: Optional[str] = None) -> Optional[Route]:
        """Longest-prefix match in ``table`` (None: the route the stock rules pick)."""
        if table is None:
            for t in ("local", "main", "default"):
                r = self.best(ip, t)
                if r is not None and r.kind != "throw":
                    return r
            return None
        bits = 32 if ip.version == 4 else 128
        value = int(ip)
        by_len = self._by_len.get((ip.version, table), {})
        for plen in self._lengths.get((ip.version, table), ()):
            key = (value >> (bits - plen)) << (bits - plen) if plen else 0
            r = by_len[plen].get(key)
            if r is not None:
                return r
        return None

    def range_via_default(self, network: ipaddress.IPv4Network | ipaddress.IPv6Network) -> bool:
        """True when any address of ``network`` may take a default route. The route picked
        changes only where a route or rule prefix inside ``network`` starts or ends, so
        those addresses (and the network's first) stand for all (the session-31 adversary:
        routes for only .0 and .255 of a /24 passed a check of the two ends, and zmap, which
        sends every probe to the next hop of the first host, sent 256 SYNs off the machine)."""
        if not self.readable:
            return True
        lo, hi = int(network.network_address), int(network.broadcast_address)
        edges = {lo}
        prefixes = [r.network for by_len in (v for (ver, _), v in self._by_len.items() if ver == network.version)
                    for by_net in by_len.values() for r in by_net.values()]
        prefixes += [r.dst for r in self._rules.get(network.version, ()) if r.dst is not None]
        for n in prefixes:
            if n.version != network.version or not n.overlaps(network):
                continue
            for edge in (int(n.network_address), int(n.broadcast_address) + 1):
                if lo <= edge <= hi:
                    edges.add(edge)
        make = ipaddress.IPv4Address if network.version == 4 else ipaddress.IPv6Address
        return any(self.via_default(make(e)) for e in edges)

    def via_default(self, ip: ipaddress.IPv4Address | ipaddress.IPv6Address) -> bool:
        """True when a packet to ``ip`` may take a default route (or the routes are
        unreadable: fail closed). No route at all is False: the kernel refuses to send."""
        if not self.readable:
            return True
        for rule in self._rules.get(ip.version, ()):
            if rule.dst is not None and ip not in rule.dst:
                continue   # 'to' another prefix: not for this packet
            if rule.action == "lookup":
                r = self.best(ip, rule.table)
                if r is None or r.kind == "throw":
                    continue
                if rule.suppress_prefixlen is not None and r.network.prefixlen <= rule.suppress_prefixlen:
                    continue
                if r.network.prefixlen == 0 and r.kind not in _LOCAL_TYPES:
                    return True
                if rule.definite:
                    return False
                continue
            if rule.action in ("blackhole", "unreachable", "prohibit"):
                if rule.definite:
                    return False
                continue
            return True   # goto, nat or an action not modelled: fail closed
        return False
