"""TLS zoo 2 (issue 24): H2O, BoringSSL's ``bssl server`` and rustls, each with STOCK
defaults, in a testbed of their own (the shared testbed gets no new hosts this session).

Layout (built like testbed/timing.py): a vantage namespace ``nstz-vantage`` and one
namespace per server (``nstz-h2o``, ``nstz-bssl``, ``nstz-rustls``), each joined to the
vantage by a veth pair of its own (vantage side ``.1``, server side ``.10`` of the host's
/24 and /64). Addresses come from 198.18.130.0-198.18.139.255 and 2001:2:0:130::/60 only.
The vantage's /etc/hosts names the hosts (``<label>.zoo2.test``).

Servers (run under ``python3 -m testbed.zoo serve``, the zoo's wrapper; nothing configured
that touches sessions or tickets):

* ``h2o.zoo2.test``: Debian's h2o 2.2.5 (on OpenSSL 3.0), a config with only ``listen`` +
  ``ssl`` (certificate) and a document root. H2O manages and rotates its own ticket keys.
* ``bssl.zoo2.test``: ``bssl-tool server -accept 443 -loop -www`` of Debian's android-boringssl
  (13.0.0+r24, the BoringSSL of Android 13). ``-www`` only makes it answer an HTTP GET; it is
  a sequential server (one connection at a time).
* ``rustls.zoo2.test``: testbed/zoo/rustls (rustls 0.23, ring provider), built by
  scripts/build_zoo.sh into tools/rust/bin. Port 443: the stock ServerConfig (a session
  cache, no ticketer: TLS 1.3 tickets are stateful 32-byte ids, TLS 1.2 has none).
  Port 8443: the same plus ``rustls::crypto::ring::Ticketer::new()`` (the documented way to
  turn stateless tickets on), so rustls's own ticket layout is measured too.

State (pids, configs, copies of the certificates) lives in ``<state dir>-zoo2/``, outside the
shared state directory, so the shared testbed's orphan sweep (testbed/manager.py _orphans)
never takes these processes for its own. ``testbed zoo2 down`` and ``testbed down`` remove it.
Ground truth (cited from each implementation's source): ``testbed status --json`` ->
ground_truth.zoo2.
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from . import netns
from .procs import ProcSpec, ProcState, _kill, _wait_ready, pid_alive, state_dir
from .zoo import ROOT, ZooHost

#: Namespaces of this testbed: not "nstb-" (the shared testbed's `down` removes those) and
#: not the timing testbed's "nstt-".
NETNS_PREFIX = "nstz-"
VANTAGE = NETNS_PREFIX + "vantage"
RUST_BIN = ROOT / "tools" / "rust" / "bin" / "zoo-rustls"
#: The rustls host's second port: the stock config plus rustls's stateless Ticketer, under a
#: name of its own (the certificate names both) so its rows and ground truth stay apart.
RUSTLS_TICKETS_PORT = 8443
RUSTLS_TICKETS_NAME = "rustls-tickets.zoo2.test"

#: Bumped whenever what `up` builds changes: a zoo2 testbed built by older code is rebuilt.
LAYOUT = 2   # 2: the rustls certificate also names rustls-tickets.zoo2.test


@dataclass(frozen=True)
class Zoo2Host:
    host: ZooHost          # label, hostname, namespace (kernel name), addresses, port
    vantage_v4: str
    vantage_v6: str
    veth: str              # vantage side; the server side is "<veth>s"


def _h(label: str, n: int) -> Zoo2Host:
    return Zoo2Host(ZooHost(label, f"{label}.zoo2.test", NETNS_PREFIX + label,
                            (f"198.18.{n}.10", f"2001:2:0:{n}::10")),
                    f"198.18.{n}.1", f"2001:2:0:{n}::1", f"z2{label}")


HOSTS = (_h("h2o", 131), _h("bssl", 132), _h("rustls", 133))


def host(label: str) -> Zoo2Host:
    return next(h for h in HOSTS if h.host.label == label)


def _dir() -> Path:
    s = state_dir()
    return s.with_name(s.name + "-zoo2")


def _state() -> dict:
    from .procs import load_state

    return load_state(_dir())


def _save(st: dict) -> None:
    from .procs import save_state

    save_state(_dir(), st)


def available(label: str) -> bool:
    """The host's server program is installed (scripts/install.sh, scripts/build_zoo.sh)."""
    if label == "h2o":
        return shutil.which("h2o") is not None
    if label == "bssl":
        return shutil.which("bssl-tool") is not None
    if label == "rustls":
        return RUST_BIN.exists()
    return False


def _deb_version(pkg: str) -> Optional[str]:
    r = subprocess.run(["dpkg-query", "-W", "-f=${Version}", pkg], capture_output=True, text=True)
    return r.stdout.strip() or None


def version(label: str) -> Optional[str]:
    if label == "h2o":
        return _deb_version("h2o")
    if label == "bssl":
        return _deb_version("android-boringssl")
    lock = ROOT / "testbed" / "zoo" / "rustls" / "Cargo.lock"
    try:
        m = re.search(r'name = "rustls"\nversion = "([^"]+)"', lock.read_text())
    except OSError:
        return None
    return f"rustls {m.group(1)} (ring)" if m else None


def _alive(p: dict) -> bool:
    return pid_alive(p["pid"], argv=p["argv"])


def healthy() -> bool:
    st = _state()
    existing = set(netns.list_netns())
    return (bool(st.get("complete")) and st.get("layout") == LAYOUT and VANTAGE in existing
            and all(n in existing for n in st.get("namespaces", [])) and all(_alive(p) for p in st.get("procs", [])))


# ------------------------------------------------------------------ server configurations
def _h2o_conf(h: ZooHost, cert: Path, key: Path, d: Path) -> Path:
    """Addresses, certificate, a document root: nothing about ssl-session-resumption (H2O's
    defaults: session cache and tickets with internally generated, rotated keys)."""
    (d / "www").mkdir(parents=True, exist_ok=True)
    (d / "www" / "index.html").write_text("zoo2-h2o\n")
    listens = "".join(f"""listen:
  host: "{a}"
  port: {h.port}
  ssl:
    certificate-file: {cert}
    key-file: {key}
""" for a in h.addresses)
    conf = d / "h2o.conf"
    conf.write_text(f"""# generated by netsurvey testbed zoo2; do not edit
user: root
pid-file: {d / 'h2o.pid'}
error-log: {d / 'error.log'}
{listens}hosts:
  "{h.hostname}":
    paths:
      /:
        file.dir: {d / 'www'}
""")
    return conf


def _server_specs(d: Path) -> list[ProcSpec]:
    from .pki import issue_cert

    specs = []
    wrap = [sys.executable, "-m", "testbed.zoo", "serve"]
    for z in HOSTS:
        h = z.host
        if not available(h.label):
            continue
        hd = d / h.label
        hd.mkdir(parents=True, exist_ok=True)
        sans = [h.hostname, RUSTLS_TICKETS_NAME] if h.label == "rustls" else [h.hostname]
        c, k = issue_cert(state_dir() / "pki", h.hostname, sans)
        # copies: no command line of ours names a file in the shared state directory
        cert, key = hd / "cert.pem", hd / "key.pem"
        cert.write_bytes(c.read_bytes())
        key.write_bytes(k.read_bytes())
        key.chmod(0o600)
        if h.label == "h2o":
            server = [shutil.which("h2o"), "-c", str(_h2o_conf(h, cert, key, hd))]
        elif h.label == "bssl":
            # binds the wildcard address of its namespace (tool/transport_common.cc Listener)
            server = [shutil.which("bssl-tool"), "server", "-accept", str(h.port), "-loop", "-www",
                      "-cert", str(cert), "-key", str(key)]
        else:
            listen = [f"[{a}]:{h.port}" if ":" in a else f"{a}:{h.port}" for a in h.addresses]
            server = [str(RUST_BIN), str(cert), str(key), *listen]
            tl = [f"[{a}]:{RUSTLS_TICKETS_PORT}" if ":" in a else f"{a}:{RUSTLS_TICKETS_PORT}" for a in h.addresses]
            specs.append(ProcSpec(name="zoo2-rustls-tickets", namespace=h.namespace,
                                  argv=[str(RUST_BIN), str(cert), str(key), "--tickets", *tl],
                                  ready_tcp=(h.addresses[0], RUSTLS_TICKETS_PORT)))
        specs.append(ProcSpec(name=f"zoo2-{h.label}", namespace=h.namespace, argv=[*wrap, "--", *server],
                              env={"PYTHONPATH": str(ROOT)}, ready_tcp=(h.addresses[0], h.port)))
    return specs


# ------------------------------------------------------------------------ up / down
def up(log=print) -> dict:
    """Create the zoo2 testbed (idempotent)."""
    if healthy():
        return status()
    down(log=lambda *_: None)
    t0 = time.time()
    d = _dir()
    st = {"namespaces": [VANTAGE], "procs": [], "complete": False, "layout": LAYOUT}
    _save(st)
    netns.add_netns(VANTAGE)
    for z in HOSTS:
        h = z.host
        if not available(h.label):
            continue
        st["namespaces"].append(h.namespace)
        _save(st)
        netns.add_netns(h.namespace)
        v4, v6 = h.addresses
        netns.ip_batch([f"link add {z.veth} type veth peer name {z.veth}s netns {h.namespace}",
                        f"addr add {z.vantage_v4}/24 dev {z.veth}",
                        f"addr add {z.vantage_v6}/64 dev {z.veth} nodad",
                        f"link set {z.veth} up"], ns=VANTAGE)
        netns.ip_batch([f"addr add {v4}/24 dev {z.veth}s",
                        f"addr add {v6}/64 dev {z.veth}s nodad",
                        f"link set {z.veth}s up"], ns=h.namespace)
    names = {z.host.hostname: list(z.host.addresses) for z in HOSTS}
    names[RUSTLS_TICKETS_NAME] = list(host("rustls").host.addresses)
    netns.write_hosts(VANTAGE, names)
    for spec in _server_specs(d):
        _start(st, spec)
    st["complete"] = True
    _save(st)
    log(f"zoo2 testbed up: {len(st['procs'])} processes in {time.time() - t0:.1f} s")
    return status()


def _start(st: dict, spec: ProcSpec) -> None:
    logs = _dir() / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    log = logs / f"{spec.name}.log"
    env = dict(os.environ)
    env.update(spec.env)
    with log.open("ab") as fh:
        p = subprocess.Popen(["ip", "netns", "exec", spec.namespace, *spec.argv], stdout=fh,
                             stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env, start_new_session=True)
    st["procs"].append({"name": spec.name, "namespace": spec.namespace, "pid": p.pid, "argv": spec.argv,
                        "log": str(log)})
    _save(st)
    _wait_ready(spec, p.pid, spec.ready_timeout_s, netns=spec.namespace)


def down(log=print) -> None:
    """Stop the zoo2 processes (by recorded pid) and remove its namespaces."""
    st = _state()
    for p in reversed(st.get("procs", [])):
        if _alive(p):
            _kill(ProcState(p["name"], p["namespace"], p["pid"], p["argv"], p["log"]))
    names = set(st.get("namespaces", [])) | {VANTAGE} | {z.host.namespace for z in HOSTS}
    existing = set(netns.list_netns())
    for n in names & existing:
        netns.del_netns(n)
    netns.remove_resolv_conf(VANTAGE)
    f = _dir() / "state.json"
    if f.exists():
        f.unlink()
    log(f"zoo2 testbed down ({len(names & existing)} namespaces removed)")


# ------------------------------------------------------------------------ ground truth
from .zoo2_facts import FACTS  # noqa: E402  (the cited facts: a module of their own)


def _hosts() -> dict:
    """label -> hostname, namespace, addresses, port and facts (static: no process looked at)."""
    out = {}
    for z in HOSTS:
        h = z.host
        out[h.label] = {"hostname": h.hostname, "namespace": h.namespace, "addresses": list(h.addresses),
                        "port": h.port, "facts": FACTS[h.label]}
    r = host("rustls").host
    out["rustls-tickets"] = {"hostname": RUSTLS_TICKETS_NAME, "namespace": r.namespace, "addresses": list(r.addresses),
                             "port": RUSTLS_TICKETS_PORT, "facts": FACTS["rustls-tickets"]}
    return out


def documented() -> dict:
    """hostname -> cited ground-truth facts (``plot zoo-table``)."""
    return {h["hostname"]: h["facts"] for h in _hosts().values()}


def status() -> dict:
    st = _state()
    hosts = _hosts()
    for label, h in hosts.items():
        prog = label.split("-")[0]
        h["installed"], h["version"] = available(prog), version(prog)
    return {"up": healthy(), "vantage_netns": VANTAGE, "state_dir": str(_dir()),
            "processes": [{"name": p["name"], "pid": p["pid"], "running": _alive(p)} for p in st.get("procs", [])],
            "hosts": hosts}
