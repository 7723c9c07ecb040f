"""Discovery with Debian's zmap (2.1.1) before a scanner probes: which addresses of a
network answer on a port. Used by ``scan tfo --zmap`` (TCP SYN scan; zmap cannot send
TFO) and ``scan quic-discover --zmap`` (UDP with the Version Negotiation probe as payload).

``zmap_discover`` runs zmap over one IPv4 network and returns the addresses that answered
(SYN-ACK for ``tcp_synscan``, any UDP reply for ``udp``). The etiquette policy travels with
it: zmap scans only the given network and gets as its blocklist (``-b``) our blocked
networks, reserved ranges included, plus the parts of the network outside our allowed
ones; and the run's rate (``-r``). zmap's own /etc/zmap/blocklist.conf is not read. (No
``-w``: zmap would add the whole allowlist to the scan.) Answers are checked against the
policy again.

zmap picks the outgoing interface and next hop from the default route; a vantage without
one (like the testbed's) gets them from ``ip route get`` for the network's first address
and the next hop's MAC from the neighbour table (``ip neigh``); a gateway missing there is
resolved first (ARP, through one empty UDP datagram to the gateway's discard port).
"""
from __future__ import annotations

import ipaddress
import json
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from .errors import UsageError
from .etiquette import IPNetwork, TargetPolicy

#: Runs of zmap tried when it aborts on its constraint_lookup_index assertion.
ZMAP_ATTEMPTS = 3


@dataclass(frozen=True)
class ZmapRoute:
    """Where zmap sends from: ``interface`` name, ``source`` IPv4 address and the
    ``gateway_mac`` (next hop's MAC, aa:bb:cc:dd:ee:ff)."""

    interface: str
    source: str
    gateway_mac: str


@dataclass(frozen=True)
class ZmapDiscovery:
    """Result of one discovery: ``open`` = addresses that sent a SYN-ACK (sorted),
    ``sent`` = probes zmap sent, ``seconds`` = zmap's wall time (s), ``route`` used."""

    open: tuple[str, ...]
    sent: int
    seconds: float
    route: ZmapRoute
    #: addresses of the network zmap was told not to probe (the policy's): the run's ``blocked``
    blocked: int = 0


def _ip_json(*args: str) -> list[dict]:
    r = subprocess.run(["ip", "-j", *args], capture_output=True, text=True)
    if r.returncode != 0:
        return []
    return json.loads(r.stdout or "[]")


def route_to(network: ipaddress.IPv4Network) -> ZmapRoute:
    """Interface, source address and next-hop MAC towards ``network`` (its first address).
    Raises UsageError when the next hop's MAC cannot be resolved."""
    first = str(next(network.hosts(), network.network_address))
    routes = _ip_json("route", "get", first)
    if not routes:
        raise UsageError(f"--zmap: no route to {network}")
    r = routes[0]
    dev, src, hop = r.get("dev"), r.get("prefsrc"), r.get("gateway", first)
    neigh = _neighbour(hop, dev) if dev else []
    if not neigh and dev and src and "gateway" in r:   # never an on-link target: it may be blocked
        _resolve_neighbour(hop, src, dev)
        neigh = _neighbour(hop, dev)
    if not neigh or not dev or not src:
        raise UsageError(f"--zmap: next hop {hop} on {dev} has no known MAC address "
                         f"(no ARP reply within 2 s)")
    return ZmapRoute(dev, src, neigh[0]["lladdr"])


def _neighbour(hop: str, dev: str) -> list[dict]:
    return [n for n in _ip_json("neigh", "show", hop, "dev", dev) if n.get("lladdr")]


def _resolve_neighbour(hop: str, src: str, dev: str, timeout: float = 2.0) -> None:
    """Make the kernel resolve the gateway's MAC (ARP): one empty UDP datagram to its discard
    port (9) from ``src``, then wait up to ``timeout`` seconds for the neighbour entry. Only
    called for a route's gateway (the vantage's router), never for a scan target."""
    import socket
    import time

    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.bind((src, 0))
            s.connect((hop, 9))
            s.send(b"")
    except OSError:
        return
    end = time.monotonic() + timeout
    while time.monotonic() < end and not _neighbour(hop, dev):
        time.sleep(0.05)


def _write_networks(path: Path, nets) -> None:
    path.write_text("".join(f"{n}\n" for n in nets if n.version == 4))


def outside_allowed(net: ipaddress.IPv4Network, allow) -> list[ipaddress.IPv4Network]:
    """The parts of ``net`` that no network of ``allow`` covers (to be blocklisted)."""
    rest = [net]
    for a in (a for a in allow if a.version == 4):
        nxt = []
        for r in rest:
            if r.subnet_of(a):
                continue
            nxt += list(r.address_exclude(a)) if a.subnet_of(r) else [r]
        rest = nxt
    return rest


def _spans(nets) -> list[tuple[int, int]]:
    """IPv4 networks as merged, sorted [first, last] integer spans."""
    out: list[list[int]] = []
    for lo, hi in sorted((int(n.network_address), int(n.broadcast_address)) for n in nets if n.version == 4):
        if out and lo <= out[-1][1] + 1:
            out[-1][1] = max(out[-1][1], hi)
        else:
            out.append([lo, hi])
    return [(a, b) for a, b in out]


def _meet(a: list[tuple[int, int]], b: list[tuple[int, int]]) -> list[tuple[int, int]]:
    out, i, j = [], 0, 0
    while i < len(a) and j < len(b):
        lo, hi = max(a[i][0], b[j][0]), min(a[i][1], b[j][1])
        if lo <= hi:
            out.append((lo, hi))
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return out


def _size(spans: list[tuple[int, int]]) -> int:
    return sum(hi - lo + 1 for lo, hi in spans)


def blocked_in_range(net: ipaddress.IPv4Network, policy: TargetPolicy) -> dict[str, int]:
    """How many addresses of ``net`` the policy refuses, per rule (TargetPolicy.blocking_rule,
    in its order), counted with whole networks, not address by address (a /8 is 16M):
    outside etiquette.allow, then reserved, then blocklisted. The route rule counts none: a
    range any part of which would leave the machine is refused as a whole
    (:func:`check_discoverable`)."""
    whole = [(int(net.network_address), int(net.broadcast_address))]
    allowed = _meet(whole, _spans(policy.allow))
    reserved = _meet(allowed, _spans(policy.reserved))
    in_list = _meet(allowed, _spans(b for b in policy.block if b not in set(policy.reserved)))
    return {"not-allowed": net.num_addresses - _size(allowed), "reserved": _size(reserved),
            "blocklist": _size(in_list) - _size(_meet(in_list, _spans(policy.reserved))), "off-machine-route": 0}


class ZmapRange:
    """``--cidr NET --zmap`` as the dry-run plan sees it: zmap probes the addresses of the
    network the policy allows (counted per rule, :func:`blocked_in_range`), and the scanner
    then only those that answer, which a dry run cannot know."""

    def __init__(self, network: str, port: int):
        self.network, self.port = ipaddress.ip_network(network, strict=False), port
        self.plan_note = f"zmap probes the allowed addresses of {self.network} first; only those that answer are probed"

    def plan_range(self, policy: TargetPolicy) -> tuple[int, dict[str, int]]:
        by_rule = blocked_in_range(self.network, policy)  # type: ignore[arg-type]  # --cidr: IPv4
        return self.network.num_addresses - sum(by_rule.values()), by_rule


def check_discoverable(network: str, policy: TargetPolicy) -> list[IPNetwork]:
    """The networks zmap must not probe for ``network``; UsageError if that is all of it or
    it is not IPv4 (call it before a run is recorded, so bad input writes nothing)."""
    net = ipaddress.ip_network(network, strict=False)
    if net.version != 4:
        raise UsageError("--zmap: zmap discovers IPv4 networks only")
    blocked = [*policy.block, *outside_allowed(net, policy.allow)]
    if any(net.subnet_of(b) for b in blocked if b.version == 4):
        raise UsageError(f"--zmap: every address of {net} is blocked by the etiquette policy")
    if policy.leaves_machine(net):
        raise UsageError(f"{net} is a special-purpose (testbed) range but routes through this namespace's "
                         "default gateway: run inside the testbed (netsurvey testbed exec -- ...)")
    return blocked


def zmap_discover(network: str, port: int, policy: TargetPolicy, *, rate: float, cooldown: float = 1.0,
                  udp_payload: Optional[bytes] = None, route: Optional[ZmapRoute] = None) -> ZmapDiscovery:
    """Scan ``network`` (IPv4) on ``port`` with zmap at ``rate`` packets/s (0 = zmap's
    default, 10,000 pps), waiting ``cooldown`` seconds (rounded, at least 1) for late
    replies; honour ``policy`` (allow/blocklists). TCP SYN scan, or with ``udp_payload``
    zmap's udp module sending those bytes (answered = any UDP reply from the port)."""
    import time

    net = ipaddress.ip_network(network, strict=False)
    blocked = check_discoverable(network, policy)
    zmap = shutil.which("zmap")
    if zmap is None:
        raise UsageError("--zmap: zmap is not installed (scripts/install.sh installs Debian's zmap)")
    route = route or route_to(net)  # type: ignore[arg-type]  # IPv4: check_discoverable refused others
    with tempfile.TemporaryDirectory(prefix="netsurvey-zmap-") as d:
        block, out, meta, payload = (Path(d) / n for n in ("block", "out.csv", "meta.json", "payload"))
        _write_networks(block, blocked)
        module = []
        if udp_payload is not None:
            payload.write_bytes(udp_payload)
            module = ["-M", "udp", f"--probe-args=file:{payload}"]
        argv = [zmap, "-q", *module, "-p", str(port), "-r", str(int(rate) if rate > 0 else 10000),
                "-c", str(max(1, round(cooldown))), "-i", route.interface, "-S", route.source,
                "-G", route.gateway_mac, "-b", str(block), "-o", str(out),
                "--metadata-file", str(meta), str(net)]
        t0 = time.monotonic()
        for _ in range(ZMAP_ATTEMPTS):
            r = subprocess.run(argv, capture_output=True, text=True)
            # zmap 2.1.1 aborts now and then on an assertion when a send thread's share of a
            # small or mostly blocklisted range holds no usable address (fixed upstream in
            # zmap PR #786, not in Debian's build); it picks a new random order each run
            if r.returncode == 0 or "constraint_lookup_index" not in r.stderr:
                break
        seconds = time.monotonic() - t0
        if r.returncode != 0:
            tail = (r.stderr.strip().splitlines() or ["no output"])[-1]
            raise UsageError(f"--zmap: zmap failed: {tail}")
        found = {ln.strip() for ln in out.read_text().splitlines() if ln.strip() and ln[0].isdigit()}
        sent = json.loads(meta.read_text()).get("total_sent", 0)
    # zmap honours the lists; check again so a zmap quirk can never widen what we probe. Only
    # addresses of the network asked for: zmap also reports ICMP errors, whose source is a
    # router (e.g. the gateway's "host unreachable"), which must not become a target
    allowed = sorted((a for a in found if ipaddress.ip_address(a) in net and policy.allowed(a)),
                     key=ipaddress.ip_address)
    n_blocked: int = sum(blocked_in_range(net, policy).values())  # type: ignore[arg-type]  # --cidr: IPv4
    return ZmapDiscovery(tuple(allowed), int(sent), seconds, route, n_blocked)
