"""The timing testbed (issue 25): hosts of its own for handshake-timing measurements.

Two namespaces, ``nstt-<timing.vantage_ns>`` (the client) and ``nstt-<timing.server_ns>``,
joined by a TUN pair (``tmv0`` / ``tms0``) and the userspace delay line (testbed/delayline.py),
so a delay profile here never slows the shared testbed's hosts, and works on kernels
without netem. The server namespace runs:

* the testbed's TCP server with TFO (port 80; ``net.ipv4.tcp_fastopen=3`` and a fixed key);
* nginx on port 443: TLS 1.2 and 1.3, a session cache (session IDs), stateless tickets,
  ``ssl_early_data on`` (TLS 1.3 0-RTT; nginx answers a request received as early data
  before the handshake completes: ngx_ssl_write_early in src/event/ngx_event_openssl.c);
* the QUIC server (testbed/quic_server.py) on UDP 443 with tickets and 0-RTT;
* the page server (issue 25, item 6: BLAST validation under delay): the same nginx serves
  the generated pages (testbed/pagegen.py) for :data:`PAGE_HOSTS`, each host with its own
  certificate (browsers then never coalesce two hosts onto one HTTP/2 connection, so a
  host is a server to the simulator too), the HTTP/2 hosts on one address and the
  HTTP/1.1 hosts on another (nginx 1.22 switches HTTP/2 per listening address); TLS 1.3
  only (the simulator's default for hosts no `scan tls` saw), no early data. The vantage's
  hosts file names them; documents live under ``<state dir>/timing/nginx/pages/HOST/``.

State (pids, files) lives in ``<state dir>/timing/``; ``testbed timing down`` (and ``testbed
down``) remove everything. Ground truth: :func:`status`.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Optional

from . import netns
from .model import Profile, ProfileError, QuicHost, TestbedConfig
from .procs import ProcSpec

REPO = Path(__file__).resolve().parent.parent
#: The timing testbed's namespaces are NETNS_PREFIX + name: not the shared testbed's "nstb-",
#: so a rebuild of the shared testbed (whose `down` removes every nstb-* namespace) leaves
#: them alone; the shared `testbed down` removes them through :func:`down`.
NETNS_PREFIX = "nstt-"


def netns_name(name: str) -> str:
    return NETNS_PREFIX + name


def _dir() -> Path:
    return Path(os.environ.get("NETSURVEY_TESTBED_DIR", "/run/netsurvey/testbed")) / "timing"


def _state() -> dict:
    from .procs import load_state

    return load_state(_dir())


def _save(st: dict) -> None:
    from .procs import save_state

    save_state(_dir(), st)


def _alive(p: dict) -> bool:
    from .procs import pid_alive

    return pid_alive(p["pid"], p["argv"][0])


#: Bumped whenever what `up` builds changes (servers, their configuration, files): a timing
#: testbed built by older code is then rebuilt instead of being taken as up.
LAYOUT = 3   # 2: nginx logs each request (resumed, early data); TLS 1.2-only port; vantage hosts file
#             3: the page server (PAGE_HOSTS on two more addresses)

#: The page server's hosts (issue 25, item 6): hostname -> speaks HTTP/2. Seven HTTP/2 and
#: four HTTP/1.1 hosts (BLAST sec. IV-C1: 49% of its http2 data set's resources came over
#: HTTP/2); 11 hosts as testbed/pagegen.py's shared-testbed list.
PAGE_HOSTS = {"www.pages.test": True, "static.pages.test": True, "img.pages.test": True, "cdn.pages.test": True,
              "fonts.pages.test": True, "api.pages.test": True, "video.pages.test": True,
              "old.pages.test": False, "ads.pages.test": False, "stats.pages.test": False, "legacy.pages.test": False}
#: host suffix of the page server's addresses in the timing link's prefixes (.10: HTTP/2, .11: HTTP/1.1)
PAGE_ADDR_SUFFIX = {True: 10, False: 11}


def page_addresses(cfg: TestbedConfig, h2: bool) -> tuple[str, str]:
    """(IPv4, IPv6) of the page server's HTTP/2 (or HTTP/1.1) hosts in the timing link's prefixes."""
    import ipaddress

    t = cfg.timing
    n = PAGE_ADDR_SUFFIX[h2]
    v4 = ipaddress.ip_network(f"{t.server_v4}/{t.prefixlen_v4}", strict=False).network_address + n
    v6 = ipaddress.ip_network(f"{t.server_v6}/{t.prefixlen_v6}", strict=False).network_address + n
    return str(v4), str(v6)


def pages_root() -> Path:
    """Document roots of the page server: ``pages_root() / HOST``."""
    return _dir() / "nginx" / "pages"

#: The TLS 1.2-only server (browser revisits: an abbreviated TLS 1.2 handshake saves one RTT).
TLS12_PORT = 8443


def healthy(cfg: TestbedConfig) -> bool:
    st = _state()
    t = cfg.timing
    existing = set(netns.list_netns())
    return (bool(st.get("complete")) and st.get("layout") == LAYOUT and netns_name(t.vantage_ns) in existing
            and netns_name(t.server_ns) in existing and all(_alive(p) for p in st.get("procs", [])))


def up(cfg: TestbedConfig, log=print) -> dict:
    """Create the timing testbed (idempotent). Its link starts with profile 'none'."""
    if healthy(cfg):
        return status(cfg)
    down(cfg, log=lambda *_: None)
    t0 = time.time()
    t = cfg.timing
    vns, sns = netns_name(t.vantage_ns), netns_name(t.server_ns)
    st = {"namespaces": [vns, sns], "procs": [], "complete": False, "layout": LAYOUT}
    _save(st)
    d = _dir()
    for ns, dev, mine, _peer in ((vns, "tmv0", (t.vantage_v4, t.vantage_v6), (t.server_v4, t.server_v6)),
                                (sns, "tms0", (t.server_v4, t.server_v6), (t.vantage_v4, t.vantage_v6))):
        netns.add_netns(ns)
        netns.ip_batch([f"tuntap add dev {dev} mode tun",
                        f"addr add {mine[0]}/{t.prefixlen_v4} dev {dev}",
                        f"addr add {mine[1]}/{t.prefixlen_v6} dev {dev} nodad",
                        f"link set {dev} mtu 1500 up"], ns=ns)
    pa = {h2: page_addresses(cfg, h2) for h2 in (True, False)}
    netns.ip_batch([cmd for v4, v6 in pa.values() for cmd in (f"addr add {v4}/{t.prefixlen_v4} dev tms0",
                                                              f"addr add {v6}/{t.prefixlen_v6} dev tms0 nodad")], ns=sns)
    netns.sysctl(vns, {"net.ipv4.tcp_fastopen": "1"})
    # browsers in the vantage find timing.test and the page hosts through /etc/hosts (`ip
    # netns exec` bind-mounts /etc/netns/<ns>/hosts over it): no resolver of its own
    netns.write_hosts(vns, {t.hostname: [t.server_v4, t.server_v6],
                            **{h: list(pa[h2]) for h, h2 in PAGE_HOSTS.items()}})
    netns.sysctl(sns, {"net.ipv4.tcp_fastopen": "3", "net.ipv4.tcp_fastopen_key": t.tfo_key,
                       "net.core.somaxconn": "4096"})
    (d / "profile.json").write_text(json.dumps(cfg.profile("none").model_dump()))
    specs = [ProcSpec(name="delayline", namespace=vns,
                      argv=[sys.executable, "-m", "testbed.delayline", "--a", f"{vns}:tmv0", "--b", f"{sns}:tms0",
                            "--profile", str(d / "profile.json"), "--applied", str(d / "applied.json")],
                      env={"PYTHONPATH": str(REPO)})]
    specs += _server_specs(cfg, d)
    for spec in specs:
        _start(st, spec)
        if spec.name == "delayline":
            from .delayline import wait_started

            wait_started(d / "applied.json", st["procs"][-1]["pid"])
    st["complete"] = True
    _save(st)
    log(f"timing testbed up: {len(st['procs'])} processes in {time.time() - t0:.1f} s")
    return status(cfg)


def _server_specs(cfg: TestbedConfig, d: Path) -> list[ProcSpec]:
    from .pki import issue_cert
    from .procs import state_dir
    from .quic_server import build_config_json

    t = cfg.timing
    pki = state_dir() / "pki"
    cert, key = issue_cert(pki, t.hostname, [t.hostname, t.server_v4, t.server_v6])
    specs = [ProcSpec(name="tcp", namespace=netns_name(t.server_ns),
                      argv=[sys.executable, "-m", "testbed.tfo_server", "--port", "80"],
                      env={"PYTHONPATH": str(REPO)}, ready_tcp=("0.0.0.0", 80))]
    ng = d / "nginx"
    for sub in ("logs", "tmp", "www"):
        (ng / sub).mkdir(parents=True, exist_ok=True)
    (ng / "www" / "index.html").write_text("<!doctype html><title>timing.test</title><p>timing</p>\n")
    page_servers = []
    for host, h2 in PAGE_HOSTS.items():
        (ng / "pages" / host).mkdir(parents=True, exist_ok=True)
        pc, pk = issue_cert(pki, host, [host])
        v4, v6 = page_addresses(cfg, h2)
        flag = " http2" if h2 else ""
        page_servers.append(f"""    server {{
        listen {v4}:443 ssl{flag};
        listen [{v6}]:443 ssl{flag};
        server_name {host};
        ssl_certificate {pc};
        ssl_certificate_key {pk};
        ssl_protocols TLSv1.3;
        access_log off;
        root {ng / 'pages' / host};
        location / {{ try_files $uri $uri/index.html =404; }}
    }}
""")
    tk = ng / "ticket.key"
    if not tk.exists():
        tk.write_bytes(os.urandom(80))
        tk.chmod(0o600)
    tmp = ng / "tmp"
    (ng / "nginx.conf").write_text(f"""# generated by netsurvey testbed timing; do not edit
daemon off;
master_process on;
worker_processes 1;
pid {ng / 'nginx.pid'};
error_log {ng / 'logs' / 'error.log'} warn;
events {{ worker_connections 1024; }}
http {{
    # one JSON line per request: which visit (uri, with its nonce), TLS version, resumed, early data
    log_format revisit escape=json '{{"ts": $msec, "client": "$remote_addr", "client_port": $remote_port, '
                                   '"port": $server_port, "protocol": "$ssl_protocol", "reused": "$ssl_session_reused", '
                                   '"early_data": "$ssl_early_data", "uri": "$request_uri"}}';
    access_log {ng / 'logs' / 'access.log'} revisit;
    client_body_temp_path {tmp}; proxy_temp_path {tmp}; fastcgi_temp_path {tmp};
    uwsgi_temp_path {tmp}; scgi_temp_path {tmp};
    types {{ text/html html; text/css css; application/javascript js; image/png png; }}
    keepalive_timeout 5s;
    server {{
        listen {t.server_v4}:443 ssl;
        listen [{t.server_v6}]:443 ssl;
        server_name {t.hostname};
        ssl_certificate {cert};
        ssl_certificate_key {key};
        ssl_protocols TLSv1.2 TLSv1.3;
        ssl_session_cache shared:timing:1m;
        ssl_session_timeout {t.session_timeout}s;
        ssl_session_tickets on;
        ssl_session_ticket_key {tk};
        ssl_early_data on;
        root {ng / 'www'};
        location / {{ try_files $uri $uri/index.html =404; }}
    }}
    server {{
        listen {t.server_v4}:{TLS12_PORT} ssl;
        listen [{t.server_v6}]:{TLS12_PORT} ssl;
        server_name {t.hostname};
        ssl_certificate {cert};
        ssl_certificate_key {key};
        ssl_protocols TLSv1.2;
        ssl_session_cache shared:timing:1m;
        ssl_session_timeout {t.session_timeout}s;
        ssl_session_tickets on;
        ssl_session_ticket_key {tk};
        root {ng / 'www'};
        location / {{ try_files $uri $uri/index.html =404; }}
    }}
{"".join(page_servers)}}}
""")
    specs.append(ProcSpec(name="nginx", namespace=netns_name(t.server_ns),
                          argv=[shutil.which("nginx") or "/usr/sbin/nginx", "-c", str(ng / "nginx.conf"), "-p", str(ng)],
                          ready_tcp=(t.server_v4, 443)))
    qh = QuicHost(hostname=t.hostname, addresses=[t.server_v4, t.server_v6], issue_tokens=False,
                  ticket_lifetime=t.session_timeout, early_data=True)
    secret = _secret(d)
    conf = build_config_json(qh, str(cert), str(key), secret, str(d / "quic.log"))
    (d / "quic.json").write_text(json.dumps(conf))
    specs.append(ProcSpec(name="quic", namespace=netns_name(t.server_ns),
                          argv=[sys.executable, "-m", "testbed.quic_server", "--config", str(d / "quic.json")],
                          env={"PYTHONPATH": str(REPO)}, ready_udp=(t.server_v4, 443)))
    return specs


def _secret(d: Path) -> str:
    p = d / "secret"
    if not p.exists():
        p.write_bytes(os.urandom(32))
    return p.read_bytes().hex()


#: SCHED_FIFO priority of the servers (the delay line takes 10 itself): on a machine shared
#: with other work, a server waiting for a CPU adds milliseconds to every round trip. The
#: servers are event-driven (they never spin), so they cannot starve the machine. 0 = off.
_RT_PRIORITY = 5


def _start(st: dict, spec: ProcSpec) -> None:
    logs = _dir() / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    log = logs / f"{spec.name}.log"
    env = dict(os.environ)
    env.update(spec.env)
    rt = ["chrt", "-f", str(_RT_PRIORITY)] if _RT_PRIORITY and spec.name != "delayline" and shutil.which("chrt") else []
    with log.open("ab") as fh:
        p = subprocess.Popen(["ip", "netns", "exec", spec.namespace, *rt, *spec.argv], stdout=fh,
                             stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env, start_new_session=True)
    st["procs"].append({"name": spec.name, "namespace": spec.namespace, "pid": p.pid, "argv": spec.argv,
                        "log": str(log)})
    _save(st)
    from .procs import _wait_ready  # the testbed's readiness check, in our namespace

    _wait_ready(spec, p.pid, spec.ready_timeout_s, netns=spec.namespace)


def down(cfg: Optional[TestbedConfig] = None, log=print) -> None:
    """Stop the timing testbed's processes (by recorded pid) and remove its namespaces."""
    from .procs import ProcState, _kill
    st = _state()
    for p in reversed(st.get("procs", [])):
        _kill(ProcState(p["name"], p["namespace"], p["pid"], p["argv"], p["log"]))
    names = set(st.get("namespaces", []))
    if cfg is not None:
        names |= {netns_name(cfg.timing.vantage_ns), netns_name(cfg.timing.server_ns)}
    existing = set(netns.list_netns())
    for n in names & existing:
        netns.del_netns(n)
    for n in names:
        netns.remove_resolv_conf(n)   # the vantage's hosts file (/etc/netns/<ns>/)
    f = _dir() / "state.json"
    if f.exists():
        f.unlink()
    prof = Path(str(_dir().parent / "profiles.json"))
    if prof.exists():  # the timing class is gone, and with it its profile
        try:
            cur = json.loads(prof.read_text())
            cur.pop("timing", None)
            prof.write_text(json.dumps(cur, indent=1))
        except ValueError:
            pass
    log(f"timing testbed down ({len(names & existing)} namespaces removed)")


def set_delay_profile(cfg: TestbedConfig, p: Profile) -> None:
    """Hand ``p`` to the delay line and wait until it reports it applies it."""
    st = _state()
    dl = next((x for x in st.get("procs", []) if x["name"] == "delayline"), None)
    if dl is None or not _alive(dl):
        raise ProfileError("the timing testbed is not up (netsurvey testbed timing up)")
    from .delayline import hand_profile

    hand_profile(_dir(), dl["pid"], p.model_dump())


def delay_line_applied() -> Optional[dict]:
    try:
        return json.loads((_dir() / "applied.json").read_text())
    except (OSError, ValueError):
        return None


def server_pids() -> dict:
    """name -> pid of the timing servers; nginx's worker (the process doing the handshakes)
    under 'nginx-worker' (for server CPU per handshake)."""
    out = {p["name"]: p["pid"] for p in _state().get("procs", [])}
    if "nginx" in out:
        kids = _children(out["nginx"])  # ip netns exec execs nginx: this pid is the master
        if kids:
            out["nginx-worker"] = kids[0]
    return out


def _children(pid: int) -> list[int]:
    out = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            out += [int(x) for x in (task / "children").read_text().split()]
        except OSError:
            pass
    return out


def status(cfg: TestbedConfig) -> dict:
    t = cfg.timing
    st = _state()
    return {"up": healthy(cfg), "vantage_netns": netns_name(t.vantage_ns), "server_netns": netns_name(t.server_ns),
            "hostname": t.hostname, "server_v4": t.server_v4, "server_v6": t.server_v6,
            "services": {"tcp_tfo_port": 80, "tls_port": 443, "tls12_only_port": TLS12_PORT, "quic_port": 443,
                         "tls_versions": ["1.2", "1.3"], "session_ids": True, "tickets": True,
                         "tls13_early_data": True, "max_early_data_bytes": t.max_early_data_bytes,
                         "quic_early_data": True, "tfo": True, "tfo_key": t.tfo_key},
            "processes": [{"name": p["name"], "pid": p["pid"], "running": _alive(p)} for p in st.get("procs", [])],
            "server_pids": server_pids(),
            "nginx_access_log": str(_dir() / "nginx" / "logs" / "access.log"),
            "quic_log": str(_dir() / "quic.log"),
            "certfile": json.loads((_dir() / "quic.json").read_text()).get("certfile")
            if (_dir() / "quic.json").exists() else None,
            "delay_line": delay_line_applied(),
            "pages": {"www_root": str(pages_root()), "tls_versions": ["1.3"], "early_data": False,
                      "hosts": {h: {"h2": h2, "addresses": list(page_addresses(cfg, h2))} for h, h2 in PAGE_HOSTS.items()}}}
