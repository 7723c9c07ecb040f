"""DNS of the testbed: knot (authoritative, with mod-geoip for ECS and load-balanced
names) and unbound (the vantage's recursive resolver, forwarding ECS).

``render_dns`` writes every file both servers need into one directory and returns their
process specifications; ``dns_ground_truth`` states what they answer (for ``testbed status
--json`` and for tests).

Layout of the rendered directory::

    knot.conf, unbound.conf
    zones/<zone>.zone            one zone file per served zone
    geoip/<zone>-<mode>-<ttl>.conf   mod-geoip response files
    knot/ (storage: timers, journal), run/ (knot rundir, control socket)
    knot.pid, unbound.pid, knot.log, unbound.log

Semantics (knot 3.2 mod-geoip):

* ECS names (``mode: subnet``): the module answers a client (the ECS address if the query
  carries one, else the source address) from the most specific configured subnet containing
  it, with ECS scope = that subnet's prefix length. Clients outside every subnet get the
  zone's own record (the ``default``) with scope 0. ``server.edns-client-subnet: on`` is
  required, otherwise knot ignores and strips ECS.
* Load-balanced names (``mode: weighted``): one view per pool address, weight 1 each, so
  every answer holds exactly one address drawn uniformly from the pool. A query for a type
  no pool address has (AAAA for an IPv4-only pool) gets NODATA.
* The module TTL is per module instance, so one instance is rendered per (zone, mode, ttl).
"""
from __future__ import annotations

import ipaddress
from collections import OrderedDict
from pathlib import Path
from typing import Iterable

from testbed.model import TestbedConfig
from testbed.procs import ProcSpec

KNOTD = "knotd"
UNBOUND = "unbound"
SOA_SERIAL = 1
#: Negative-caching TTL (SOA minimum) of every zone.
NEGATIVE_TTL = 60
#: Types whose values are domain names (made absolute when written to a zone file).
_NAME_TYPES = {"CNAME", "NS"}


# --------------------------------------------------------------------------- helpers

def _norm(name: str) -> str:
    """Lower-case, no trailing dot ('' for the root)."""
    return name.strip().rstrip(".").lower()


def _fqdn(name: str) -> str:
    n = _norm(name)
    return n + "." if n else "."


def _rtype(address: str) -> str:
    return "A" if ipaddress.ip_address(address).version == 4 else "AAAA"


def _in_zone(name: str, zone: str) -> bool:
    return name == zone or name.endswith("." + zone)


def zone_of(cfg: TestbedConfig, name: str) -> str:
    """The most specific served zone containing ``name``; ValueError if none."""
    n = _norm(name)
    best = ""
    for z in cfg.dns.zones:
        z = _norm(z)
        if _in_zone(n, z) and len(z) > len(best):
            best = z
    if not best:
        raise ValueError(f"DNS name {name!r} is not inside any served zone {cfg.dns.zones}")
    return best


def parent_zone(cfg: TestbedConfig, zone: str) -> str | None:
    """The most specific served zone strictly above ``zone`` (its delegating parent)."""
    z = _norm(zone)
    best = None
    for p in cfg.dns.zones:
        p = _norm(p)
        if p != z and z.endswith("." + p) and (best is None or len(p) > len(best)):
            best = p
    return best


def top_zones(cfg: TestbedConfig) -> list[str]:
    """Served zones without a served parent (unbound gets a stub-zone for each)."""
    return [_norm(z) for z in cfg.dns.zones if parent_zone(cfg, z) is None]


def ns_name(zone: str) -> str:
    return f"ns.{_norm(zone)}"


def _web_addresses(cfg: TestbedConfig, hostname: str) -> list[str]:
    """Addresses of a web site: the TLS host of that name, else the first TLS host that lists
    the name among its SANs."""
    h = _norm(hostname)
    for t in cfg.tls_hosts:
        if _norm(t.hostname) == h:
            return list(t.addresses)
    for t in cfg.tls_hosts:
        if h in {_norm(s) for s in t.sans}:
            return list(t.addresses)
    return []


def _https_value(name: str, cfg: TestbedConfig) -> str | None:
    """HTTPS (type 65) record data for a host: alpn h3 for QUIC hosts (plus h2 if it is also
    a TLS host), h2 for TLS-only hosts; a QUIC-only host gets no-default-alpn."""
    n = _norm(name)
    quic = [q for q in cfg.quic_hosts if _norm(q.hostname) == n]
    tls = any(_norm(t.hostname) == n for t in cfg.tls_hosts)
    if not quic and not tls:
        return None
    if quic:
        alpn = "h2,h3" if tls else "h3"
        params = [f'alpn="{alpn}"']
        if not tls:
            params.append("no-default-alpn")
        port = quic[0].port
        if port != 443:
            params.append(f"port={port}")
        return "1 . " + " ".join(params)
    return '1 . alpn="h2"'


def _rdata(rtype: str, value: str) -> str:
    """Zone-file text of one explicit record value."""
    v = value.strip()
    if rtype in _NAME_TYPES:
        return _fqdn(v)
    if rtype == "MX":
        parts = v.split()
        if len(parts) == 2:
            return f"{parts[0]} {_fqdn(parts[1])}"
        return v
    if rtype == "TXT":
        if v.startswith('"'):
            return v
        return '"' + v.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if rtype in ("A", "AAAA"):
        ip = ipaddress.ip_address(v)
        if _rtype(v) != rtype:
            raise ValueError(f"{value!r} is not an {rtype} address")
        return str(ip)
    return v


# --------------------------------------------------------------------------- records

def zone_records(cfg: TestbedConfig) -> dict[str, "OrderedDict[tuple[str, str], dict]"]:
    """Per zone: {(owner, type): {"ttl": int, "values": [rdata...], "source": str}}.

    Later sources override earlier ones for the same (owner, type): automatic host records,
    then ECS defaults, then explicit ``dns.records``.
    """
    d = cfg.dns
    zones: dict[str, OrderedDict] = {_norm(z): OrderedDict() for z in d.zones}
    auth = [d.authoritative_v4, d.authoritative_v6]

    def put(name: str, rtype: str, values: Iterable[str], ttl: int, source: str,
            merge: bool = False):
        n = _norm(name)
        z = zone_of(cfg, n)
        key = (n, rtype)
        vals = list(values)
        if merge and key in zones[z] and zones[z][key]["source"] == source:
            old = zones[z][key]["values"]
            vals = old + [v for v in vals if v not in old]
        zones[z][key] = {"ttl": ttl, "values": vals, "source": source}

    # Apex NS + glue, delegations in the parent.
    for z in zones:
        ns = ns_name(z)
        put(z, "NS", [_fqdn(ns)], d.default_ttl, "zone")
        for a in auth:
            put(ns, _rtype(a), [a], d.default_ttl, "zone", merge=True)
        p = parent_zone(cfg, z)
        if p is not None:
            zones[p][(z, "NS")] = {"ttl": d.default_ttl, "values": [_fqdn(ns)],
                                   "source": "delegation"}
            for a in auth:
                key = (ns, _rtype(a))
                old = zones[p].get(key, {"values": []})["values"]
                zones[p][key] = {"ttl": d.default_ttl, "values": old + [a], "source": "glue"}

    # Hosts.
    hosts: OrderedDict[str, list[str]] = OrderedDict()

    def add_host(name: str, addrs: Iterable[str]):
        lst = hosts.setdefault(_norm(name), [])
        for a in addrs:
            a = str(ipaddress.ip_address(a))
            if a not in lst:
                lst.append(a)

    for h in cfg.tfo_hosts:
        add_host(h.hostname, h.addresses)
    for h in cfg.tls_hosts:
        add_host(h.hostname, h.addresses)
    for h in cfg.quic_hosts:
        add_host(h.hostname, h.addresses)
    for w in cfg.web:
        addrs = _web_addresses(cfg, w.hostname)
        if addrs:
            add_host(w.hostname, addrs)
    if cfg.atlas is not None:
        add_host(cfg.atlas.hostname, [a for a in (cfg.atlas.address, cfg.atlas.address_v6) if a])
    for name, addrs in hosts.items():
        for rtype in ("A", "AAAA"):
            vals = [a for a in addrs if _rtype(a) == rtype]
            if vals:
                put(name, rtype, vals, d.default_ttl, "host")
        https = _https_value(name, cfg)
        if https:
            put(name, "HTTPS", [https], d.default_ttl, "host")

    # ECS defaults (served from the zone when no subnet matches: scope 0).
    for e in d.ecs:
        put(e.name, _rtype(e.default), [str(ipaddress.ip_address(e.default))], e.ttl, "ecs")

    # Explicit records win.
    for r in d.records:
        put(r.name, r.type, [_rdata(r.type, v) for v in r.values], r.ttl, "explicit")

    # Names answered by mod-geoip weighted mode must not also carry zone data of the
    # types the module answers (the module would hide it anyway); check for clashes.
    for lb in d.load_balanced:
        n = _norm(lb.name)
        z = zone_of(cfg, n)
        for rtype in ("A", "AAAA", "CNAME"):
            if (n, rtype) in zones[z]:
                raise ValueError(f"load-balanced name {lb.name} also has a {rtype} record")
    return zones


def _zone_text(cfg: TestbedConfig, zone: str, records: OrderedDict) -> str:
    d = cfg.dns
    origin = _fqdn(zone)
    lines = [f"$ORIGIN {origin}", f"$TTL {d.default_ttl}",
             f"{origin} {d.default_ttl} IN SOA {_fqdn(ns_name(zone))} hostmaster.{origin} "
             f"{SOA_SERIAL} 3600 600 86400 {NEGATIVE_TTL}"]
    for (owner, rtype), rr in records.items():
        for v in rr["values"]:
            lines.append(f"{_fqdn(owner)} {rr['ttl']} IN {rtype} {v}")
    return "\n".join(lines) + "\n"


# --------------------------------------------------------------------------- mod-geoip

def _geoip_instances(cfg: TestbedConfig) -> list[dict]:
    """One mod-geoip instance per (zone, mode, ttl): {"id", "zone", "mode", "ttl", "body"}."""
    groups: OrderedDict[tuple[str, str, int], list[str]] = OrderedDict()
    seen: set[str] = set()
    for e in cfg.dns.ecs:
        n = _norm(e.name)
        if n in seen:
            raise ValueError(f"DNS name {e.name} configured twice (ecs/load_balanced)")
        seen.add(n)
        # Most specific subnet first (knot picks the longest match whatever the order).
        scopes = sorted(e.scopes, key=lambda s: -ipaddress.ip_network(s.subnet).prefixlen)
        body = [f"{_fqdn(n)}:"]
        for s in scopes:
            net = ipaddress.ip_network(s.subnet)
            body.append(f"  - net: {net}")
            body.append(f"    {_rtype(s.address)}: {ipaddress.ip_address(s.address)}")
        groups.setdefault((zone_of(cfg, n), "subnet", e.ttl), []).extend(body)
    for lb in cfg.dns.load_balanced:
        n = _norm(lb.name)
        if n in seen:
            raise ValueError(f"DNS name {lb.name} configured twice (ecs/load_balanced)")
        seen.add(n)
        if not lb.pool:
            raise ValueError(f"load-balanced name {lb.name} has an empty pool")
        body = [f"{_fqdn(n)}:"]
        for a in lb.pool:
            body.append("  - weight: 1")
            body.append(f"    {_rtype(a)}: {ipaddress.ip_address(a)}")
        groups.setdefault((zone_of(cfg, n), "weighted", lb.ttl), []).extend(body)
    out = []
    for (zone, mode, ttl), body in groups.items():
        ident = f"{zone.replace('.', '_')}-{mode}-{ttl}"
        out.append({"id": ident, "zone": zone, "mode": mode, "ttl": ttl,
                    "body": "\n".join(body) + "\n"})
    return out


# --------------------------------------------------------------------------- rendering

def _knot_conf(cfg: TestbedConfig, out: Path, geo: list[dict]) -> str:
    d = cfg.dns
    lines = [
        "# generated by testbed/dns.py",
        "server:",
        f'    rundir: "{out / "run"}"',
        f'    pidfile: "{out / "knot.pid"}"',
        f"    listen: [ {d.authoritative_v4}@53, {d.authoritative_v6}@53 ]",
        "    edns-client-subnet: on",
        "",
        "log:",
        f'  - target: "{out / "knot.log"}"',
        "    any: info",
        "",
        "database:",
        f'    storage: "{out / "knot"}"',
        "",
        "control:",
        f'    listen: "{out / "run" / "knot.sock"}"',
        "",
        "template:",
        "  - id: default",
        f'    storage: "{out / "zones"}"',
        '    file: "%s.zone"',
        "    zonefile-sync: -1",
        "    zonefile-load: whole",
        "    journal-content: none",
        "    semantic-checks: on",
        "",
    ]
    if geo:
        lines.append("mod-geoip:")
        for g in geo:
            lines += [f"  - id: {g['id']}",
                      f'    config-file: "{out / "geoip" / (g["id"] + ".conf")}"',
                      f"    ttl: {g['ttl']}",
                      f"    mode: {g['mode']}"]
        lines.append("")
    lines.append("zone:")
    for z in d.zones:
        z = _norm(z)
        lines.append(f"  - domain: {_fqdn(z)}")
        mods = [f"mod-geoip/{g['id']}" for g in geo if g["zone"] == z]
        if mods:
            lines.append(f"    module: [ {', '.join(mods)} ]")
    return "\n".join(lines) + "\n"


def _unbound_conf(cfg: TestbedConfig, out: Path) -> str:
    d, n = cfg.dns, cfg.network
    auth = [d.authoritative_v4, d.authoritative_v6]
    lines = [
        "# generated by testbed/dns.py",
        "server:",
        f"    interface: {n.resolver_v4}@53",
        f"    interface: {n.resolver_v6}@53",
        "    do-ip4: yes",
        "    do-ip6: yes",
        "    do-udp: yes",
        "    do-tcp: yes",
        "    access-control: 0.0.0.0/0 refuse",
        "    access-control: ::/0 refuse",
        "    access-control: 198.18.0.0/15 allow",
        "    access-control: 2001:2::/48 allow",
        "    do-daemonize: no",
        '    username: ""',
        '    chroot: ""',
        f'    directory: "{out}"',
        f'    pidfile: "{out / "unbound.pid"}"',
        "    use-syslog: no",
        f'    logfile: "{out / "unbound.log"}"',
        "    log-time-ascii: yes",
        "    verbosity: 1",
        "    num-threads: 1",
        # No DNSSEC validation at all (no validator module, no trust anchor).
        '    module-config: "subnetcache iterator"',
        # Loopback-only protection stays; the benchmarking range must stay queryable.
        "    do-not-query-localhost: yes",
        "    harden-referral-path: no",
        "    qname-minimisation: yes",
        "    prefetch: no",
        "    minimal-responses: no",
        "    cache-min-ttl: 0",
        "    cache-max-ttl: 86400",
        "    cache-max-negative-ttl: 10",
        "    infra-host-ttl: 60",
        "    infra-cache-min-rtt: 50",
        # ECS: send the client's subnet (or the client's own ECS option) to the authoritative.
        *[f"    send-client-subnet: {a}" for a in auth],
        *[f'    client-subnet-zone: "{_fqdn(z)}"' for z in top_zones(cfg)],
        "    client-subnet-always-forward: yes",
        "    max-client-subnet-ipv4: 24",
        "    max-client-subnet-ipv6: 56",
        # Nothing leaves the testbed: every name outside the served zones is refused
        # locally (no root priming, no Internet); 'test.' is an unbound default (static,
        # NXDOMAIN) zone, made transparent so the stub below is used.
        '    local-zone: "." refuse',
    ]
    for z in top_zones(cfg):
        lines.append(f'    local-zone: "{_fqdn(z)}" transparent')
        lines.append(f'    domain-insecure: "{_fqdn(z)}"')
    lines += ["", "remote-control:", "    control-enable: no", ""]
    for z in top_zones(cfg):
        lines += ["stub-zone:", f'    name: "{_fqdn(z)}"',
                  *[f"    stub-addr: {a}" for a in auth],
                  "    stub-prime: no", "    stub-first: no", ""]
    return "\n".join(lines) + "\n"


def render_dns(cfg: TestbedConfig, out_dir: Path) -> list[ProcSpec]:
    """Write knot's and unbound's configuration, zone files and mod-geoip files into
    ``out_dir``; return [knot, unbound] process specs (foreground, in cfg.dns.namespace)."""
    out = Path(out_dir).resolve()
    for sub in ("zones", "geoip", "knot", "run"):
        (out / sub).mkdir(parents=True, exist_ok=True)
    zones = zone_records(cfg)
    for z, recs in zones.items():
        (out / "zones" / f"{z}.zone").write_text(_zone_text(cfg, z, recs))
    geo = _geoip_instances(cfg)
    for g in geo:
        (out / "geoip" / f"{g['id']}.conf").write_text(g["body"])
    (out / "knot.conf").write_text(_knot_conf(cfg, out, geo))
    (out / "unbound.conf").write_text(_unbound_conf(cfg, out))
    ns = cfg.dns.namespace
    return [
        ProcSpec(name="knot", namespace=ns,
                 argv=[KNOTD, "-c", str(out / "knot.conf")],
                 ready_udp=(cfg.dns.authoritative_v4, 53)),
        ProcSpec(name="unbound", namespace=ns,
                 argv=[UNBOUND, "-d", "-c", str(out / "unbound.conf")],
                 ready_udp=(cfg.network.resolver_v4, 53)),
    ]


# --------------------------------------------------------------------------- ground truth

def ecs_expected(cfg: TestbedConfig, name: str, client: str) -> tuple[str, int]:
    """(address, scope prefix length) knot answers for ECS name ``name`` to a client address
    (or ECS address) ``client``: the longest configured subnet containing it, else
    (default, 0)."""
    n = _norm(name)
    ip = ipaddress.ip_address(client)
    for e in cfg.dns.ecs:
        if _norm(e.name) != n:
            continue
        best = None
        for s in e.scopes:
            net = ipaddress.ip_network(s.subnet)
            if net.version == ip.version and ip in net and (
                    best is None or net.prefixlen > best[1]):
                best = (str(ipaddress.ip_address(s.address)), net.prefixlen)
        return best or (str(ipaddress.ip_address(e.default)), 0)
    raise KeyError(name)


def dns_ground_truth(cfg: TestbedConfig) -> dict:
    """What the testbed's DNS answers, as plain JSON-able data:

    ``names``: {name: {type: {"ttl": int, "values": [...], "zone": str}}} for every
    client-independent zone record (ECS and load-balanced names are not here); ``ecs``: {name: {"ttl", "default", "scopes":
    [{"subnet", "address", "scope"}]}} (scope = prefix length, default scope 0);
    ``load_balanced``: {name: {"ttl", "pool", "policy", "answers_per_query": 1}};
    ``zones``: {zone: {"parent", "ns", "delegated_by"}}; plus server addresses.
    """
    d = cfg.dns
    zones = zone_records(cfg)
    ecs_names = {_norm(e.name) for e in d.ecs}
    names: dict[str, dict] = {}
    for z, recs in zones.items():
        for (owner, rtype), rr in recs.items():
            # Delegations/glue are in "zones"; ECS names' answers depend on the client.
            if rr["source"] in ("delegation", "glue") or owner in ecs_names:
                continue
            names.setdefault(owner, {})[rtype] = {"ttl": rr["ttl"], "values": list(rr["values"]),
                                                  "zone": z}
    ecs = {}
    for e in d.ecs:
        ecs[_norm(e.name)] = {
            "zone": zone_of(cfg, e.name),
            "ttl": e.ttl,
            "default": {"address": str(ipaddress.ip_address(e.default)), "scope": 0},
            "scopes": [{"subnet": str(ipaddress.ip_network(s.subnet)),
                        "address": str(ipaddress.ip_address(s.address)),
                        "scope": ipaddress.ip_network(s.subnet).prefixlen}
                       for s in sorted(e.scopes,
                                       key=lambda s: -ipaddress.ip_network(s.subnet).prefixlen)],
        }
    lbs = {}
    for lb in d.load_balanced:
        lbs[_norm(lb.name)] = {"zone": zone_of(cfg, lb.name), "ttl": lb.ttl,
                               "pool": [str(ipaddress.ip_address(a)) for a in lb.pool],
                               "policy": lb.policy, "answers_per_query": 1,
                               "types": sorted({_rtype(a) for a in lb.pool})}
    return {
        "authoritative": {"v4": d.authoritative_v4, "v6": d.authoritative_v6, "port": 53,
                          "namespace": d.namespace, "server": "knot"},
        "resolver": {"v4": cfg.network.resolver_v4, "v6": cfg.network.resolver_v6, "port": 53,
                     "namespace": d.namespace, "server": "unbound",
                     "stub_zones": top_zones(cfg)},
        "default_ttl": d.default_ttl,
        "negative_ttl": NEGATIVE_TTL,
        "zones": {_norm(z): {"parent": parent_zone(cfg, z), "ns": ns_name(z),
                             "ns_addresses": [d.authoritative_v4, d.authoritative_v6]}
                  for z in d.zones},
        "names": names,
        "ecs": ecs,
        "load_balanced": lbs,
    }
