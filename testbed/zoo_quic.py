"""The QUIC zoo (issue 24): QUIC servers other than our own aioquic server, each run with
its STOCK defaults, in a testbed of their own (the pattern of testbed/timing.py), plus a TCP
namespace for the kernel's TFO primary/backup key pair.

Namespaces (prefix ``nstq-``; each server namespace joined to the vantage by its own veth):

- ``nstq-vantage``: the client side (``testbed zoo-quic exec CMD``); /etc/netns hosts file
  with the zoo names.
- ``nstq-quicgo``: quic-go's example HTTP/3 server (``github.com/quic-go/quic-go/example``,
  v0.65.0, built from the Go module proxy by scripts/build_zoo_quic.sh into
  tools/go/bin/zoo-quicgo), ``quicgo.zooq.test``, 198.18.141.10 / 2001:2:0:141::10, UDP 443.
  Only ``-bind``, ``-cert``, ``-key`` and ``-www`` are given (example/main.go flags).
- ``nstq-ngtcp2``: ngtcp2's example server with GnuTLS (Debian ``ngtcp2-server``,
  /usr/sbin/gtlsserver, 0.12.1), ``ngtcp2.zooq.test``, 198.18.142.10 / 2001:2:0:142::10:
  UDP 443 stock (only ``-q -d DOCROOT``); UDP 4443 the same server with ``--validate-addr``
  (the one non-stock setting, for a test: without it the server never sends a Retry, so
  token acceptance is invisible to a client - see NGTCP2_FACTS) and its wall clock sped up
  200x by libfaketime (NGTCP2_VALIDATE_SPEEDUP), so its 3600 s token lifetime is 18 s; UDP
  4444 the same --validate-addr server on the real clock (Retry and token acceptance).
- ``nstq-tfo``: testbed/tfo_server.py on TCP 80 with TFO (``net.ipv4.tcp_fastopen=3``) and
  the key pair TFO_KEYS (primary, backup), ``tfo.zooq.test``, 198.18.143.10 /
  2001:2:0:143::10. Tests swap the keys with :func:`set_tfo_keys`.
- ``nstq-quinn``: a stock quinn server (testbed/zoo/quinn: quinn 0.11.12 / quinn-proto 0.11.19,
  rustls 0.23 with the ring provider, Cargo.lock pinned, built from crates.io by
  scripts/build_zoo_quic.sh into tools/rust/bin/zoo-quinn) answering one HTTP/3 GET,
  ``quinn.zooq.test``, 198.18.144.10 / 2001:2:0:144::10, UDP 443; one Endpoint per address
  sharing one ServerConfig (see QUINN_FACTS).

State in ``<state dir>/zooquic/``; ``testbed zoo-quic down`` and ``testbed down`` remove
everything. Ground truth (with citations): :func:`status`, in ``testbed status --json``
under ``ground_truth.zoo_quic``.
"""
from __future__ import annotations

import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from . import netns
from .procs import ProcSpec

REPO = Path(__file__).resolve().parent.parent
NETNS_PREFIX = "nstq-"
VANTAGE = "vantage"
QUICGO_BIN = REPO / "tools" / "go" / "bin" / "zoo-quicgo"
QUICGO_VERSION = "v0.65.0"       # scripts/build_zoo_quic.sh builds this version
NGTCP2_BIN = "/usr/sbin/gtlsserver"
QUINN_BIN = REPO / "tools" / "rust" / "bin" / "zoo-quinn"
QUINN_VERSION = "0.11.12"        # testbed/zoo/quinn/Cargo.toml (quinn-proto 0.11.19 in its Cargo.lock)
#: bumped when what `up` builds changes: an older zoo is rebuilt instead of being taken as up
LAYOUT = 5   # 2: the --validate-addr instance under libfaketime (3: x200; 4: + one on the real clock; 5: quinn)
#: the TFO namespace's keys at start-up: (primary, backup), net.ipv4.tcp_fastopen_key format
TFO_KEYS = ("a0a0a0a0-a1a1a1a1-a2a2a2a2-a3a3a3a3", "b0b0b0b0-b1b1b1b1-b2b2b2b2-b3b3b3b3")


@dataclass(frozen=True)
class ZooQuicHost:
    label: str
    hostname: str
    namespace: str          # without prefix
    v4: str
    v6: str
    vantage_v4: str
    vantage_v6: str


HOSTS = (
    ZooQuicHost("quicgo", "quicgo.zooq.test", "quicgo", "198.18.141.10", "2001:2:0:141::10",
                "198.18.141.1", "2001:2:0:141::1"),
    ZooQuicHost("ngtcp2", "ngtcp2.zooq.test", "ngtcp2", "198.18.142.10", "2001:2:0:142::10",
                "198.18.142.1", "2001:2:0:142::1"),
    ZooQuicHost("tfo", "tfo.zooq.test", "tfo", "198.18.143.10", "2001:2:0:143::10",
                "198.18.143.1", "2001:2:0:143::1"),
    ZooQuicHost("quinn", "quinn.zooq.test", "quinn", "198.18.144.10", "2001:2:0:144::10",
                "198.18.144.1", "2001:2:0:144::1"),
)
QUIC_PORT = 443
NGTCP2_VALIDATE_PORT = 4443
#: the same --validate-addr server on the real clock (its Retry tokens last 10 s, not 50 ms)
NGTCP2_VALIDATE_RT_PORT = 4444
TFO_PORT = 80
#: The --validate-addr ngtcp2 instance runs its wall clock NGTCP2_VALIDATE_SPEEDUP times faster
#: (libfaketime; the monotonic clock, which drives QUIC's timers, is left alone): its 3600 s
#: token lifetime (NGTCP2_FACTS token_lifetime_s, checked against system_clock) then passes in
#: 3600 / NGTCP2_VALIDATE_SPEEDUP = 18 s of real time (its Retry tokens, 10 s, last 50 ms), so a test sees tokens expire.
NGTCP2_VALIDATE_SPEEDUP = 200
FAST_CLOCK_ENV = {"LD_PRELOAD": "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1",
                  "FAKETIME": f"+0 x{NGTCP2_VALIDATE_SPEEDUP}", "FAKETIME_DONT_FAKE_MONOTONIC": "1",
                  "FAKETIME_NO_CACHE": "1"}


def host(label: str) -> ZooQuicHost:
    return next(h for h in HOSTS if h.label == label)


def netns_name(name: str) -> str:
    return NETNS_PREFIX + name


def _dir() -> Path:
    return Path(os.environ.get("NETSURVEY_TESTBED_DIR", "/run/netsurvey/testbed")) / "zooquic"


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
    if label == "quicgo":
        return QUICGO_BIN.exists()
    if label == "ngtcp2":
        return Path(NGTCP2_BIN).exists()
    if label == "quinn":
        return QUINN_BIN.exists()
    return True


def healthy() -> bool:
    st = _state()
    existing = set(netns.list_netns())
    return (bool(st.get("complete")) and st.get("layout") == LAYOUT
            and all(n in existing for n in st.get("namespaces", []))
            and all(_alive(p) for p in st.get("procs", [])))


def up(log=print) -> dict:
    """Create the QUIC zoo (idempotent)."""
    if healthy():
        return status()
    down(log=lambda *_: None)
    t0 = time.time()
    d = _dir()
    d.mkdir(parents=True, exist_ok=True)
    vns = netns_name(VANTAGE)
    st = {"namespaces": [vns] + [netns_name(h.namespace) for h in HOSTS], "procs": [], "complete": False,
          "layout": LAYOUT}
    _save(st)
    netns.add_netns(vns)
    netns.sysctl(vns, {"net.ipv4.tcp_fastopen": "1"})
    for i, h in enumerate(HOSTS):
        sns = netns_name(h.namespace)
        netns.add_netns(sns)
        vdev = f"zqv{i}"
        netns.sh("ip", "link", "add", vdev, "netns", vns, "type", "veth", "peer", "name", "eth0", "netns", sns)
        netns.ip_batch([f"addr add {h.vantage_v4}/24 dev {vdev}", f"addr add {h.vantage_v6}/64 dev {vdev} nodad",
                        f"link set {vdev} up"], ns=vns)
        netns.ip_batch([f"addr add {h.v4}/24 dev eth0", f"addr add {h.v6}/64 dev eth0 nodad",
                        "link set eth0 up"], ns=sns)
    tfo = netns_name(host("tfo").namespace)
    netns.sysctl(tfo, {"net.ipv4.tcp_fastopen": "3", "net.ipv4.tcp_fastopen_key": ",".join(TFO_KEYS)})
    netns.write_hosts(vns, {h.hostname: [h.v4, h.v6] for h in HOSTS})
    for spec in _specs(d):
        _start(st, spec)
    st["complete"] = True
    _save(st)
    log(f"QUIC zoo up: {len(st['procs'])} processes in {time.time() - t0:.1f} s")
    return status()


def _specs(d: Path) -> list[ProcSpec]:
    from .pki import issue_cert

    pki = d / "pki"
    www = d / "www"
    www.mkdir(parents=True, exist_ok=True)
    (www / "index.html").write_text("<!doctype html><title>zooq</title><p>QUIC zoo</p>\n")
    specs = []
    g = host("quicgo")
    if available("quicgo"):
        cert, key = issue_cert(pki, g.hostname, [g.hostname])
        specs.append(ProcSpec(name="quicgo", namespace=netns_name(g.namespace),
                              argv=[str(QUICGO_BIN), "-bind", f"{g.v4}:{QUIC_PORT},[{g.v6}]:{QUIC_PORT}",
                                    "-cert", str(cert), "-key", str(key), "-www", str(www)],
                              ready_udp=(g.v4, QUIC_PORT)))
    n = host("ngtcp2")
    if available("ngtcp2"):
        cert, key = issue_cert(pki, n.hostname, [n.hostname])
        for name, port, extra, env in (("ngtcp2", QUIC_PORT, [], {}),
                                       ("ngtcp2-validate", NGTCP2_VALIDATE_PORT, ["--validate-addr"], FAST_CLOCK_ENV),
                                       ("ngtcp2-validate-rt", NGTCP2_VALIDATE_RT_PORT, ["--validate-addr"], {})):
            # '*' binds every address (IPv4 and IPv6) of the namespace (server.cc create_sock)
            specs.append(ProcSpec(name=name, namespace=netns_name(n.namespace), env=env,
                                  argv=[NGTCP2_BIN, "-q", "-d", str(www), *extra, "*", str(port), str(key), str(cert)],
                                  ready_udp=("0.0.0.0", port)))
    q = host("quinn")
    if available("quinn"):
        cert, key = issue_cert(pki, q.hostname, [q.hostname])
        specs.append(ProcSpec(name="quinn", namespace=netns_name(q.namespace),
                              argv=[str(QUINN_BIN), str(cert), str(key), f"{q.v4}:{QUIC_PORT}", f"[{q.v6}]:{QUIC_PORT}"],
                              ready_udp=(q.v4, QUIC_PORT)))
    t = host("tfo")
    specs.append(ProcSpec(name="tfo", namespace=netns_name(t.namespace),
                          argv=[sys.executable, "-m", "testbed.tfo_server", "--port", str(TFO_PORT)],
                          env={"PYTHONPATH": str(REPO)}, ready_tcp=("0.0.0.0", TFO_PORT)))
    return specs


def _start(st: dict, spec: ProcSpec) -> None:
    logs = _dir() / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    log = logs / f"{spec.name}.log"
    env = dict(os.environ)
    env.update(spec.env)
    ns = spec.namespace
    with log.open("ab") as fh:
        p = subprocess.Popen(["ip", "netns", "exec", ns, *spec.argv], stdout=fh, stderr=subprocess.STDOUT,
                             stdin=subprocess.DEVNULL, env=env, start_new_session=True, cwd=str(_dir()))
    st["procs"].append({"name": spec.name, "namespace": ns, "pid": p.pid, "argv": spec.argv, "log": str(log)})
    _save(st)
    from .procs import _wait_ready

    _wait_ready(spec, p.pid, spec.ready_timeout_s, netns=ns)


def down(log=print) -> None:
    """Stop the zoo's processes (by recorded pid) and remove its namespaces."""
    from .procs import ProcState, _kill

    st = _state()
    for p in reversed(st.get("procs", [])):
        _kill(ProcState(p["name"], p["namespace"], p["pid"], p["argv"], p["log"]))
    names = set(st.get("namespaces", [])) | {netns_name(VANTAGE)} | {netns_name(h.namespace) for h in HOSTS}
    existing = set(netns.list_netns())
    for n in names & existing:
        netns.del_netns(n)
    for n in names:
        netns.remove_resolv_conf(n)
    f = _dir() / "state.json"
    if f.exists():
        f.unlink()
    log(f"QUIC zoo down ({len(names & existing)} namespaces removed)")


def set_tfo_keys(primary: str, backup: Optional[str] = None) -> str:
    """Write net.ipv4.tcp_fastopen_key in the TFO namespace ("primary[,backup]"); returns
    what the kernel reports back."""
    ns = netns_name(host("tfo").namespace)
    netns.sysctl(ns, {"net.ipv4.tcp_fastopen_key": primary + (f",{backup}" if backup else "")})
    return netns.sh("sysctl", "-n", "net.ipv4.tcp_fastopen_key", ns=ns).stdout.strip()


def tfo_counters(label: str = "tfo") -> dict[str, int]:
    """TcpExt counters (TCPFastOpen*) of a zoo namespace (nstat -az, absolute values)."""
    r = netns.sh("nstat", "-az", ns=netns_name(VANTAGE if label == "vantage" else host(label).namespace))
    out = {}
    for line in r.stdout.splitlines():
        parts = line.split()
        if len(parts) >= 2 and parts[0].startswith("TcpExtTCPFastOpen"):
            out[parts[0][len("TcpExt"):]] = int(parts[1])
    return out


def _version(label: str) -> Optional[str]:
    if label == "quicgo":
        return QUICGO_VERSION if available("quicgo") else None
    if label == "ngtcp2":
        r = subprocess.run(["dpkg-query", "-W", "-f=${Version}", "ngtcp2-server"], capture_output=True, text=True)
        return r.stdout.strip() or None
    if label == "quinn":
        return QUINN_VERSION if available("quinn") else None
    return None


def status() -> dict:
    from .zoo_quic_facts import FACTS

    st = _state()
    hosts = {}
    for h in HOSTS:
        e = {"hostname": h.hostname, "namespace": netns_name(h.namespace), "addresses": [h.v4, h.v6],
             "installed": available(h.label), "version": _version(h.label)}
        if h.label == "tfo":
            e.update({"port": TFO_PORT, "tfo_keys_at_start": list(TFO_KEYS), "facts": FACTS["tfo"]})
        else:
            e.update({"port": QUIC_PORT, "facts": FACTS[h.label]})
            if h.label == "ngtcp2":
                e["validate_addr_port"] = NGTCP2_VALIDATE_PORT
                e["validate_addr_real_clock_port"] = NGTCP2_VALIDATE_RT_PORT
                e["validate_addr_clock_speedup"] = NGTCP2_VALIDATE_SPEEDUP
                e["validate_addr_token_lifetime_real_s"] = FACTS["ngtcp2"]["token_lifetime_s"]["value"] / NGTCP2_VALIDATE_SPEEDUP
        hosts[h.label] = e
    return {"up": healthy(), "vantage_netns": netns_name(VANTAGE), "hosts": hosts,
            "processes": [{"name": p["name"], "pid": p["pid"], "running": _alive(p), "log": p["log"]}
                          for p in st.get("procs", [])],
            "certfile_dir": str(_dir() / "pki")}


def exec_argv(cmd: list[str]) -> list[str]:
    return ["ip", "netns", "exec", netns_name(VANTAGE), *cmd]

