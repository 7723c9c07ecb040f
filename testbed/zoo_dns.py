"""The DNS zoo (issue 24): authoritative DNS servers other than the shared testbed's knot,
each from its Debian package with STOCK defaults except the zone data (and, where a
stock default would make the server reach for the Internet or a system path, the line
that keeps it inside its namespace - listed per server below), all serving the same test
zone ``zoo-dns.test``. A separate testbed (like testbed/timing.py): its own namespaces
(prefix ``nstd-``), its own vantage, its own state directory ``<state dir>-zoo-dns/``,
``testbed zoo-dns up|down|exec``; the shared ``testbed down`` removes it too; ground truth
in ``testbed status --json`` under ``zoo_dns`` (and in ``testbed zoo-dns up``'s output).

Layout: the vantage namespace ``nstd-vantage`` has one veth per server namespace
``nstd-<label>``; link i is 198.18.15i.0/24 and 2001:2:0:15i::/64, the vantage is .1/::1,
the server .53/::53 (bind 151, gdnsd 152, nsd 153, pdns 154, pdnsecs 155).

Servers (deviations from the stock configuration, each needed to run it here):

* BIND 9 (``named -g``): ``recursion no`` (stock named.conf recursion yes would, for a
  vantage in ``localnets``, start recursion towards the root hints; the zoo is
  authoritative only), ``dnssec-validation no`` (the stock ``auto`` makes named fetch the
  root DNSKEY for its managed keys even with recursion off: queries meant for the Internet,
  seen as 'network unreachable resolving ./DNSKEY/IN' in its log), files under the state
  directory (directory, pid-file, session-keyfile).
* gdnsd 3 (``gdnsd -c <dir> start``): run/state dirs under the state directory; the geoip
  plugin with a ``nets`` map only (no GeoIP database) for the ECS-scoped name ``ecs``.
* NSD 4 (``nsd -d``): ``username: ""`` (no privilege drop, no chroot), pid/db/xfrd files
  and ``zonesdir`` under the state directory.
* PowerDNS Authoritative 4 (``pdns_server --daemon=no``) with the bind backend: socket-dir and
  ``setuid``/``setgid`` unset, ``launch=bind``. ``edns-subnet-processing`` is left at its
  default (no), which is itself a fact measured below; ``pdnsecs`` is the same server with
  ``edns-subnet-processing=yes`` (the one line that makes it echo ECS).
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from . import netns
from .procs import ProcSpec

NETNS_PREFIX = "nstd-"
VANTAGE = NETNS_PREFIX + "vantage"
ZONE = "zoo-dns.test"
#: Bumped whenever what `up` builds changes: an older zoo is rebuilt instead of taken as up.
LAYOUT = 2   # 2: pdnsecs


@dataclass(frozen=True)
class DnsZooHost:
    label: str
    octet: int          # link 198.18.<octet>.0/24, 2001:2:0:<octet>::/64
    program: str

    @property
    def namespace(self) -> str:
        return NETNS_PREFIX + self.label

    @property
    def v4(self) -> str:
        return f"198.18.{self.octet}.53"

    @property
    def v6(self) -> str:
        return f"2001:2:0:{self.octet}::53"

    @property
    def vantage_v4(self) -> str:
        return f"198.18.{self.octet}.1"

    @property
    def vantage_v6(self) -> str:
        return f"2001:2:0:{self.octet}::1"


HOSTS = (
    DnsZooHost("bind", 151, "named"),
    DnsZooHost("gdnsd", 152, "gdnsd"),
    DnsZooHost("nsd", 153, "nsd"),
    DnsZooHost("pdns", 154, "pdns_server"),
    # the same PowerDNS with the one setting that makes it act on ECS (stock: off)
    DnsZooHost("pdnsecs", 155, "pdns_server"),
)

#: The records every server serves: name -> (TTL s or None = the zone's $TTL, type, value).
#: TTLs from 0 to 2^31-1 (RFC 2181 section 8: the largest TTL a zone may carry).
DEFAULT_TTL_S = 3600
RECORDS = {
    "www": (300, "A", "198.18.150.10"),
    "www6": (300, "AAAA", "2001:2:0:150::10"),
    "ttl0": (0, "A", "198.18.150.20"),
    "ttl60": (60, "A", "198.18.150.21"),
    "ttldefault": (None, "A", "198.18.150.22"),
    "ttl1d": (86400, "A", "198.18.150.23"),
    "ttl1w": (604800, "A", "198.18.150.24"),
    "ttl30d": (2592000, "A", "198.18.150.25"),
    "ttlmax": (2147483647, "A", "198.18.150.26"),
}
#: The ECS-scoped name (gdnsd: a DYNA geoip resource over a nets map; elsewhere a plain A).
ECS_NAME = "ecs"
ECS_TTL_S = 60
#: gdnsd's nets map: client subnet -> datacenter -> address. The vantage's /24s fall in the
#: /20 (scope 20); the documentation subnet 192.0.2.0/24 (never routed: only written into
#: ECS options) in its own /24 entry; everything else in the default datacenter.
GDNSD_NETS = {"198.18.144.0/20": "dc1", "192.0.2.0/24": "dc2"}
GDNSD_DC_ADDR = {"dc3": "198.18.150.33", "dc1": "198.18.150.31", "dc2": "198.18.150.32"}
GDNSD_DEFAULT_DC = "dc3"


def host(label: str) -> DnsZooHost:
    return next(h for h in HOSTS if h.label == label)


def _dir() -> Path:
    """``<state dir>-zoo-dns`` beside the shared testbed's state dir, not inside it: the
    shared ``testbed up`` of any checkout stops processes whose command line names a file
    inside its state dir as orphans (manager._orphans), and these servers take their configs
    from here."""
    base = Path(os.environ.get("NETSURVEY_TESTBED_DIR", "/run/netsurvey/testbed"))
    return base.parent / (base.name + "-zoo-dns")


def _state() -> dict:
    from .procs import load_state

    return load_state(_dir())


def _save(st: dict) -> None:
    from .procs import save_state

    save_state(_dir(), st)


def _alive(p: dict) -> bool:
    from .procs import pid_alive

    return pid_alive(p["pid"], p["argv"][0])


def available(label: str) -> bool:
    """The server program is installed (scripts/install.sh)."""
    return shutil.which(host(label).program) is not None


def version(label: str) -> Optional[str]:
    exe = shutil.which(host(label).program)
    if not exe:
        return None
    flag = {"named": "-v", "nsd": "-v", "pdns_server": "--version", "gdnsd": "-h"}[host(label).program]
    r = subprocess.run([exe, flag], capture_output=True, text=True)
    m = re.search(r"(\d+\.\d+\.\d+)", r.stdout + r.stderr)
    return m.group(1) if m else None


def zone_text(label: str) -> str:
    """The zone file of ``label`` (the same records everywhere; gdnsd's ``ecs`` is dynamic)."""
    lines = [f"$TTL {DEFAULT_TTL_S}",
             f"@ {DEFAULT_TTL_S} IN SOA ns.{ZONE}. hostmaster.{ZONE}. 1 3600 900 604800 300",
             f"@ {DEFAULT_TTL_S} IN NS ns.{ZONE}.",
             "ns 3600 IN A 198.18.150.53"]
    for name, (ttl, typ, val) in RECORDS.items():
        lines.append(f"{name} {'' if ttl is None else ttl} IN {typ} {val}".replace("  ", " "))
    if label == "gdnsd":
        lines.append(f"{ECS_NAME} {ECS_TTL_S} DYNA geoip!ecsres")
    else:
        lines.append(f"{ECS_NAME} {ECS_TTL_S} IN A {GDNSD_DC_ADDR[GDNSD_DEFAULT_DC]}")
    return "\n".join(lines) + "\n"


def _configs(h: DnsZooHost, d: Path) -> list[str]:
    """Write ``h``'s configuration under ``d``; return its command line."""
    d.mkdir(parents=True, exist_ok=True)
    zf = d / f"{ZONE}.zone"
    zf.write_text(zone_text(h.label))
    if h.label == "bind":
        (d / "named.conf").write_text(f"""// generated by netsurvey testbed zoo-dns; stock options but files and recursion
options {{
    directory "{d}";
    pid-file "{d / 'named.pid'}";
    session-keyfile "{d / 'session.key'}";
    listen-on {{ {h.v4}; }};
    listen-on-v6 {{ {h.v6}; }};
    recursion no;
    dnssec-validation no;
}};
zone "{ZONE}" {{ type primary; file "{zf}"; }};
""")
        return [shutil.which("named") or "/usr/sbin/named", "-g", "-c", str(d / "named.conf")]
    if h.label == "nsd":
        (d / "nsd.conf").write_text(f"""# generated by netsurvey testbed zoo-dns; stock options but files
server:
    ip-address: {h.v4}
    ip-address: {h.v6}
    username: ""
    chroot: ""
    zonesdir: "{d}"
    pidfile: "{d / 'nsd.pid'}"
    database: ""
    xfrdfile: "{d / 'xfrd.state'}"
    zonelistfile: "{d / 'zone.list'}"
    xfrdir: "{d}"
zone:
    name: "{ZONE}"
    zonefile: "{zf}"
""")
        return [shutil.which("nsd") or "/usr/sbin/nsd", "-d", "-c", str(d / "nsd.conf")]
    if h.label in ("pdns", "pdnsecs"):
        (d / "named.conf").write_text(f'zone "{ZONE}" {{ type master; file "{zf}"; }};\n')
        (d / "pdns.conf").write_text(f"""# generated by netsurvey testbed zoo-dns; stock options but files
launch=bind
bind-config={d / 'named.conf'}
local-address={h.v4}, {h.v6}
socket-dir={d}
daemon=no
guardian=no
""" + ("edns-subnet-processing=yes\n" if h.label == "pdnsecs" else ""))
        return [shutil.which("pdns_server") or "/usr/sbin/pdns_server", f"--config-dir={d}"]
    if h.label == "gdnsd":
        (d / "zones").mkdir(exist_ok=True)
        (d / "zones" / ZONE).write_text(zone_text("gdnsd"))
        nets = ", ".join(f"{n} => {dc}" for n, dc in GDNSD_NETS.items())
        dcs = " ".join(GDNSD_DC_ADDR)
        dcmap = ", ".join(f"{dc} => {a}" for dc, a in GDNSD_DC_ADDR.items())
        (d / "config").write_text(f"""# generated by netsurvey testbed zoo-dns; stock options but paths and listen
options => {{
    listen => [ {h.v4}, {h.v6} ]
    run_dir => {d / 'run'}
    state_dir => {d / 'state'}
}}
plugins => {{
    geoip => {{
        maps => {{
            zoomap => {{
                datacenters => [ {dcs} ]
                nets => {{ {nets} }}
            }}
        }}
        resources => {{
            ecsres => {{ map => zoomap, dcmap => {{ {dcmap} }} }}
        }}
    }}
}}
""")
        return [shutil.which("gdnsd") or "/usr/sbin/gdnsd", "-c", str(d), "start"]
    raise ValueError(h.label)


def healthy() -> bool:
    st = _state()
    existing = set(netns.list_netns())
    return (bool(st.get("complete")) and st.get("layout") == LAYOUT
            and all(n in existing for n in st.get("namespaces", []))
            and all(_alive(p) for p in st.get("procs", [])))


def up(log=print, labels: Optional[list[str]] = None) -> dict:
    """Create the DNS zoo (idempotent): the vantage and one namespace per installed server."""
    if healthy():
        return status()
    down(log=lambda *_: None)
    t0 = time.time()
    hosts = [h for h in HOSTS if (labels is None or h.label in labels) and available(h.label)]
    st = {"namespaces": [VANTAGE] + [h.namespace for h in hosts], "procs": [], "complete": False,
          "layout": LAYOUT, "hosts": [h.label for h in hosts]}
    _save(st)
    netns.add_netns(VANTAGE)
    for h in hosts:
        netns.add_netns(h.namespace)
        va, sv = f"zdv-{h.label}", f"zds-{h.label}"
        netns.ip_batch([f"link add {va} type veth peer name {sv}", f"link set {sv} netns {h.namespace}",
                        f"link set {va} netns {VANTAGE}"])
        netns.ip_batch([f"addr add {h.vantage_v4}/24 dev {va}", f"addr add {h.vantage_v6}/64 dev {va} nodad",
                        f"link set {va} up"], ns=VANTAGE)
        netns.ip_batch([f"addr add {h.v4}/24 dev {sv}", f"addr add {h.v6}/64 dev {sv} nodad",
                        f"link set {sv} up"], ns=h.namespace)
    for h in hosts:
        argv = _configs(h, _dir() / h.label)
        _start(st, ProcSpec(name=h.label, namespace=h.namespace, argv=argv, ready_udp=(h.v4, 53),
                            ready_timeout_s=20.0))
    st["complete"] = True
    _save(st)
    log(f"zoo-dns testbed up: {len(hosts)} servers in {time.time() - t0:.1f} s")
    return status()


def _start(st: dict, spec: ProcSpec) -> None:
    logs = _dir() / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    log = logs / f"{spec.name}.log"
    with log.open("ab") as fh:
        p = subprocess.Popen(["ip", "netns", "exec", spec.namespace, *spec.argv], stdout=fh,
                             stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
    st["procs"].append({"name": spec.name, "namespace": spec.namespace, "pid": p.pid, "argv": spec.argv,
                        "log": str(log)})
    _save(st)
    from .procs import _wait_ready

    _wait_ready(spec, p.pid, spec.ready_timeout_s, netns=spec.namespace)


def down(log=print) -> None:
    """Stop the DNS zoo's processes (by recorded pid) and remove its namespaces."""
    from .procs import ProcState, _kill

    st = _state()
    for p in reversed(st.get("procs", [])):
        _kill(ProcState(p["name"], p["namespace"], p["pid"], p["argv"], p["log"]))
    names = set(st.get("namespaces", [])) | {n for n in netns.list_netns() if n.startswith(NETNS_PREFIX)}
    for n in names:
        netns.del_netns(n)
    f = _dir() / "state.json"
    if f.exists():
        f.unlink()
    log(f"zoo-dns testbed down ({len(names)} namespaces removed)")


def status() -> dict:
    """Whether the DNS zoo is up, its hosts and their ground truth (testbed/zoo_dns_facts.py)."""
    from .zoo_dns_facts import FACTS

    st = _state()
    running = set(st.get("hosts", []))
    return {"up": healthy(), "vantage_netns": VANTAGE, "zone": ZONE,
            "records": {f"{n}.{ZONE}": {"ttl_s": DEFAULT_TTL_S if t is None else t, "type": typ, "value": v}
                        for n, (t, typ, v) in RECORDS.items()},
            "ecs_name": f"{ECS_NAME}.{ZONE}",
            "gdnsd_nets": GDNSD_NETS, "gdnsd_dc_addresses": GDNSD_DC_ADDR, "gdnsd_default_dc": GDNSD_DEFAULT_DC,
            "hosts": [{"label": h.label, "namespace": h.namespace, "addresses": [h.v4, h.v6],
                       "vantage_addresses": [h.vantage_v4, h.vantage_v6], "program": h.program,
                       "version": version(h.label), "running": h.label in running,
                       "facts": FACTS.get(h.label, {})} for h in HOSTS],
            "processes": [{"name": p["name"], "pid": p["pid"], "running": _alive(p)} for p in st.get("procs", [])]}
