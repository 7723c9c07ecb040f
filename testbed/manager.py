"""Bring the testbed up and down, report its state and ground truth.

State lives in ``$NETSURVEY_TESTBED_DIR`` (default ``/run/netsurvey/testbed``: the kernel's
namespaces are machine-wide, so is the testbed, and /run is cleared with them on reboot).
``state.json`` is written before each namespace or process is created, so ``down`` can
clean up after a crash; processes are killed by their recorded PID (process group) only
after checking /proc that the PID still runs the recorded program.
"""
from __future__ import annotations

import contextlib
import fcntl
import hashlib
import ipaddress
import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Optional

from . import netns
from .model import TestbedConfig
from .nginx import certificate_names, render_nginx
from .pki import ensure_ca, issue_cert
from .procs import NETNS_PREFIX, ProcSpec, ProcState, _kill, _wait_ready, netns_name, pid_alive, state_dir  # noqa: F401
from .tickets import install_keys, key_epoch, key_name

VANTAGE = "vantage"
BRIDGE = "tbbr0"


@dataclass
class State:
    config_path: str = ""
    config_hash: str = ""
    started_at: float = 0.0
    namespaces: list[str] = field(default_factory=list)
    procs: list[ProcState] = field(default_factory=list)
    secret_hex: str = ""
    complete: bool = False

    @classmethod
    def load(cls) -> Optional["State"]:
        p = state_dir() / "state.json"
        if not p.exists():
            return None
        raw = json.loads(p.read_text())
        raw["procs"] = [ProcState(**x) for x in raw.get("procs", [])]
        return cls(**raw)

    def save(self) -> None:
        d = state_dir()
        d.mkdir(parents=True, exist_ok=True)
        tmp = d / "state.json.tmp"
        tmp.write_text(json.dumps(asdict(self), indent=1))
        tmp.rename(d / "state.json")


@contextlib.contextmanager
def _exclusive():
    """One `testbed up` / `down` at a time on this machine (an fcntl lock next to the
    state): interleaved ups recorded only one side's processes and orphaned the other's
    (a knotd holding its database lock made every later `up` fail)."""
    d = state_dir()
    d.mkdir(parents=True, exist_ok=True)
    with open(d / ".lock", "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        yield


def _orphans() -> list[int]:
    """Processes the testbed started but no longer records: their command line names a
    file in the state directory (every daemon gets its config from there)."""
    marker = str(state_dir()).encode() + b"/"
    timing = marker + b"timing/"   # the timing testbed (issue 25) keeps its own processes
    zooq = marker + b"zooquic/"    # so does the QUIC zoo (issue 24)
    me = os.getpid()
    out = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit() or int(d.name) == me:
            continue
        try:
            cmd = (d / "cmdline").read_bytes()
            # a scan or test that only reads a testbed file (e.g. --ca-bundle) is no orphan
            if marker in cmd and timing not in cmd and zooq not in cmd and b"netsurvey.cli" not in cmd and b"pytest" not in cmd:
                out.append(int(d.name))
        except OSError:
            pass
    return out


# -- the manager ------------------------------------------------------------------------
def _build_hash(config_path: Path) -> str:
    """What a running testbed was built from: its config file AND the testbed's own code
    (the servers' command lines and generated configs live there). A testbed built by
    other code (an older checkout, a CI clone after a change) is rebuilt by `up`, not taken
    as up with stale servers."""
    h = hashlib.sha256(config_path.read_bytes())
    here = Path(__file__).resolve().parent
    for f in sorted(p for ext in ("*.py", "*.go", "*.java") for p in here.rglob(ext)
                    if "__pycache__" not in p.parts):
        h.update(str(f.relative_to(here)).encode() + b"\0" + f.read_bytes())
    return h.hexdigest()[:16]


class Testbed:
    def __init__(self, cfg: TestbedConfig, config_path: Path):
        self.cfg = cfg
        self.config_path = Path(config_path).resolve()
        self.dir = state_dir()
        self.config_hash = _build_hash(self.config_path)

    # paths
    @property
    def pki_dir(self) -> Path:
        return self.dir / "pki"

    @property
    def key_dir(self) -> Path:
        return self.dir / "ticket-keys"

    def ca_bundle(self) -> Path:
        return self.pki_dir / "ca.pem"

    # ---------------------------------------------------------------- up
    def up(self, log=print) -> State:
        with _exclusive():
            return self._up(log)

    def _up(self, log) -> State:
        st = State.load()
        keep = os.environ.get("NETSURVEY_TESTBED_KEEP") == "1"
        if st and st.complete and (st.config_hash == self.config_hash or keep) and self.healthy(st):
            if st.config_hash != self.config_hash:
                log("testbed up, built by other code: kept (NETSURVEY_TESTBED_KEEP=1)")
            else:
                log("testbed already up (nothing to do)")
            return st
        if st or _orphans():
            log("testbed: tearing down a previous or broken instance first")
            _down(log=lambda *_: None)
        t0 = time.time()
        self.dir.mkdir(parents=True, exist_ok=True)
        secret_file = self.dir / "secret"
        if not secret_file.exists():
            secret_file.write_bytes(os.urandom(32))
        st = State(config_path=str(self.config_path), config_hash=self.config_hash, started_at=t0,
                   secret_hex=secret_file.read_bytes().hex())
        st.save()
        ensure_ca(self.pki_dir)
        self._network(st, log)
        log(f"network: {len(st.namespaces)} namespaces ({time.time() - t0:.1f} s)")
        for spec in self.proc_specs(st):
            self._start(st, spec)
        if self.cfg.default_profile != "none":  # link profiles (issue 25); 'none' adds no qdisc
            from .profiles import apply

            apply(self.cfg, self.cfg.default_profile, [n.name for n in self.cfg.namespaces])
        st.complete = True
        st.save()
        log(f"testbed up: {len(st.procs)} server processes in {time.time() - t0:.1f} s")
        return st

    def _network(self, st: State, log) -> None:
        cfg = self.cfg
        v = netns_name(VANTAGE)
        st.namespaces.append(v)
        st.save()
        netns.add_netns(v)
        netns.ip_batch([
            f"link add {BRIDGE} type bridge",
            f"addr add {cfg.network.vantage_v4}/{ipaddress.ip_network(cfg.network.link_v4).prefixlen} dev {BRIDGE}",
            f"addr add {cfg.network.vantage_v6}/{ipaddress.ip_network(cfg.network.link_v6).prefixlen} dev {BRIDGE} nodad",
            f"link set {BRIDGE} up",
        ], ns=v)
        netns.sysctl(v, {"net.ipv4.ip_forward": "1", "net.ipv6.conf.all.forwarding": "1",
                         "net.ipv4.tcp_fastopen": "1"})
        netns.write_resolv_conf(v, [cfg.network.resolver_v4, cfg.network.resolver_v6])
        link4 = ipaddress.ip_network(cfg.network.link_v4)
        link6 = ipaddress.ip_network(cfg.network.link_v6)
        owned: dict[str, list[str]] = {n.name: [] for n in cfg.namespaces}
        for a in set(cfg.all_addresses()) | ({cfg.atlas.address, cfg.atlas.address_v6} if cfg.atlas else set()):
            owned[cfg.namespace_of(a).name].append(a)
        vantage_routes = []
        for i, n in enumerate(cfg.namespaces):
            name = netns_name(n.name)
            st.namespaces.append(name)
            st.save()
            netns.add_netns(name)
            a4, a6 = str(link4.network_address + 10 + i), str(link6.network_address + 10 + i)
            peer = f"tb-{n.name}"
            netns.ip_batch([f"link add {peer} type veth peer name eth0 netns {name}",
                            f"link set {peer} master {BRIDGE}", f"link set {peer} up"], ns=v)
            cmds = [f"addr add {a4}/{link4.prefixlen} dev eth0",
                    f"addr add {a6}/{link6.prefixlen} dev eth0 nodad",
                    "link set eth0 up",
                    f"route add default via {cfg.network.vantage_v4}",
                    f"route add default via {cfg.network.vantage_v6}"]
            for a in sorted(owned[n.name]):
                cmds.append(f"addr add {a}/{32 if ':' not in a else 128} dev lo" + (" nodad" if ":" in a else ""))
            for r in n.local_ranges:
                cmds.append(f"route add local {r} dev lo")
            netns.ip_batch(cmds, ns=name)
            for p in [*n.prefixes, *n.local_ranges]:
                via = a6 if ":" in p else a4
                vantage_routes.append(f"route add {p} via {via}")
            sysctls = {
                "net.ipv4.tcp_fastopen": "3" if n.tfo else "1",
                "net.core.somaxconn": "65535", "net.ipv4.tcp_max_syn_backlog": "65535",
                "net.ipv4.tcp_syncookies": "0", "net.ipv4.ip_nonlocal_bind": "1",
                "net.ipv6.ip_nonlocal_bind": "1",
            }
            if n.tfo_key:
                sysctls["net.ipv4.tcp_fastopen_key"] = n.tfo_key
            netns.sysctl(name, sysctls)
        netns.ip_batch(vantage_routes, ns=v)

    def proc_specs(self, st: State) -> list[ProcSpec]:
        """Everything the testbed runs, in start order."""
        cfg = self.cfg
        specs: list[ProcSpec] = []
        try:
            from .dns import render_dns
            specs += render_dns(cfg, self.dir / "dns")
        except ImportError:
            pass
        tfo_ns = sorted({h.namespace for h in cfg.tfo_hosts} |
                        {n.name for n in cfg.namespaces if n.local_ranges})
        for n in tfo_ns:
            ns = cfg.namespace(n)
            specs.append(ProcSpec(name=f"tcp-{n}", namespace=n,
                                  argv=[sys.executable, "-m", "testbed.tfo_server", "--port", "80", "--port", "443"]
                                  + ([] if ns.tfo else ["--no-tfo"]),
                                  env={"PYTHONPATH": str(Path(__file__).resolve().parent.parent)},
                                  ready_tcp=("0.0.0.0", 443)))
        if cfg.tls_hosts:
            secret = bytes.fromhex(st.secret_hex)
            for g in {h.key_group for h in cfg.tls_hosts}:
                install_keys(self.key_dir, secret, g, self._rotation(g))
            specs.append(render_nginx(cfg, self.dir / "nginx", self.pki_dir, self.key_dir))
            if any(self._rotation(h.key_group) > 0 for h in cfg.tls_hosts):
                specs.append(ProcSpec(name="stek-rotator", namespace=cfg.web_namespace,
                                      argv=[sys.executable, "-m", "testbed.rotator", "--dir", str(self.dir)],
                                      env={"PYTHONPATH": str(Path(__file__).resolve().parent.parent)}))
        specs += self._quic_specs(st)
        specs += self._atlas_specs(st)
        try:  # hostile hosts (issue 12)
            from .hostile import render_hostile
            specs += render_hostile(cfg, self.pki_dir)
        except ImportError:
            pass
        try:  # the server zoo (issue 24)
            from .zoo import render_zoo
            specs += render_zoo(cfg, self.pki_dir, self.dir)
        except ImportError:
            pass
        return specs

    def _quic_specs(self, st: State) -> list[ProcSpec]:
        try:
            from .quic_server import build_config_json
        except ImportError:
            return []
        out = []
        qdir = self.dir / "quic"
        qdir.mkdir(parents=True, exist_ok=True)
        for h in self.cfg.quic_hosts:
            cert, key = issue_cert(self.pki_dir, h.hostname, [h.hostname])
            conf = build_config_json(h, str(cert), str(key), st.secret_hex + h.hostname.encode().hex(),
                                     str(qdir / f"{h.hostname}.log"))
            p = qdir / f"{h.hostname}.json"
            p.write_text(json.dumps(conf))
            out.append(ProcSpec(name=f"quic-{h.hostname}", namespace=self.cfg.web_namespace,
                                argv=[sys.executable, "-m", "testbed.quic_server", "--config", str(p)],
                                env={"PYTHONPATH": str(Path(__file__).resolve().parent.parent)},
                                ready_udp=(h.addresses[0], h.port)))
        return out

    def _atlas_specs(self, st: State) -> list[ProcSpec]:
        a = self.cfg.atlas
        if a is None:
            return []
        try:
            from . import atlas_api  # noqa: F401
        except ImportError:
            return []
        cert, key = issue_cert(self.pki_dir, a.hostname, [a.hostname])
        fixtures = Path(a.fixtures_dir)
        if not fixtures.is_absolute():
            fixtures = Path(__file__).resolve().parent.parent / fixtures
        key_file = self.dir / "atlas-api-key"
        if not key_file.exists():
            key_file.write_text(os.urandom(16).hex())
        return [ProcSpec(name="atlas-api", namespace=self.cfg.web_namespace,
                         argv=[sys.executable, "-m", "testbed.atlas_api", "--listen", a.address,
                               "--listen", a.address_v6, "--port", "443", "--cert", str(cert), "--key", str(key),
                               "--fixtures", str(fixtures), "--state", str(self.dir / "atlas"),
                               "--api-key", key_file.read_text().strip()],
                         env={"PYTHONPATH": str(Path(__file__).resolve().parent.parent)},
                         ready_tcp=(a.address, 443))]

    def _rotation(self, group: str) -> int:
        for g in self.cfg.ticket_key_groups:
            if g.name == group:
                return g.rotation
        return 0

    def _start(self, st: State, spec: ProcSpec) -> None:
        logdir = self.dir / "logs"
        logdir.mkdir(parents=True, exist_ok=True)
        log = logdir / f"{spec.name}.log"
        env = dict(os.environ)
        env.update(spec.env)
        with log.open("ab") as fh:
            p = subprocess.Popen(["ip", "netns", "exec", netns_name(spec.namespace), *spec.argv],
                                 stdout=fh, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                 env=env, start_new_session=True)
        st.procs.append(ProcState(spec.name, spec.namespace, p.pid, spec.argv, str(log)))
        st.save()
        _wait_ready(spec, p.pid, spec.ready_timeout_s)

    # ---------------------------------------------------------------- status
    def healthy(self, st: State) -> bool:
        existing = set(netns.list_netns())
        return all(n in existing for n in st.namespaces) and all(pid_alive(p.pid, argv=p.argv) for p in st.procs)

    def ground_truth(self, st: Optional[State]) -> dict:
        cfg = self.cfg
        secret = bytes.fromhex(st.secret_hex) if st and st.secret_hex else None
        now = time.time()
        groups = {}
        for g in {h.key_group for h in cfg.tls_hosts}:
            rot = self._rotation(g)
            e = key_epoch(rot, now)
            groups[g] = {"rotation_s": rot, "epoch": e,
                         "current_key_name": key_name(secret, g, e) if secret else None,
                         "next_rotation_at": (e + 1) * rot if rot else None}
        truth = {
            "network": cfg.network.model_dump(),
            "namespaces": [dict(n.model_dump(), netns=netns_name(n.name)) for n in cfg.namespaces],
            "tfo_hosts": [dict(h.model_dump(), tfo=cfg.namespace(h.namespace).tfo,
                               key_group=h.namespace if cfg.namespace(h.namespace).tfo else None)
                          for h in cfg.tfo_hosts],
            "tls_hosts": [dict(h.model_dump(), key_group=h.key_group,
                               served_sans=certificate_names(cfg, h)[1],
                               # OpenSSL with tickets off sends stateful TLS 1.3 tickets
                               # (the 32-byte session id) when the session cache is on
                               tls13_ticket=("stateless" if h.tickets else
                                             "stateful-session-id" if h.session_ids else "none"))
                          for h in cfg.tls_hosts],
            "ticket_key_groups": groups,
            "quic_hosts": [h.model_dump() for h in cfg.quic_hosts],
            "web": [w.model_dump() for w in cfg.web],
            "atlas": cfg.atlas.model_dump() if cfg.atlas else None,
            "ca_file": str(self.ca_bundle()),
        }
        try:
            from .dns import dns_ground_truth
            truth["dns"] = dns_ground_truth(cfg)
        except ImportError:
            truth["dns"] = cfg.dns.model_dump()
        from . import profiles, timing  # link profiles and the timing testbed (issue 25)
        truth["profiles"] = profiles.ground_truth(cfg)
        truth["timing"] = timing.status(cfg)
        from . import trackline  # the tracking vantage behind its delay line (issue 25, item 4)
        truth["track"] = trackline.status(cfg)
        from . import zoo_dns  # the DNS zoo (issue 24), a testbed of its own
        truth["zoo_dns"] = zoo_dns.status()
        from . import zoo2  # TLS zoo 2 (issue 24): a testbed of its own
        truth["zoo2"] = zoo2.status()
        try:  # hostile hosts (issue 12)
            from .hostile import NAMESPACE as _HNS, hostile_ground_truth
            if any(n.name == _HNS for n in cfg.namespaces):
                truth["hostile"] = hostile_ground_truth()
        except ImportError:
            pass
        try:  # the QUIC zoo's own testbed (issue 24)
            from . import zoo_quic
            truth["zoo_quic"] = zoo_quic.status()
        except ImportError:
            pass
        try:  # the server zoo (issue 24)
            from .zoo import zoo_ground_truth
            truth["zoo"] = zoo_ground_truth(cfg)
        except ImportError:
            pass
        return truth

    def status(self) -> dict:
        st = State.load()
        existing = set(netns.list_netns())
        procs = []
        if st:
            procs = [{"name": p.name, "namespace": p.namespace, "pid": p.pid,
                      "running": pid_alive(p.pid, argv=p.argv), "log": p.log} for p in st.procs]
        up = bool(st and st.complete and self.healthy(st))
        return {"up": up, "state_dir": str(self.dir), "config": str(self.config_path),
                "namespaces": [{"name": n, "exists": n in existing} for n in (st.namespaces if st else [])],
                "processes": procs, "ground_truth": self.ground_truth(st)}

    # ---------------------------------------------------------------- exec
    def exec_env(self) -> dict[str, str]:
        ca = str(self.ca_bundle())
        return {"SSL_CERT_FILE": ca, "CURL_CA_BUNDLE": ca, "REQUESTS_CA_BUNDLE": ca,
                "NETSURVEY_TESTBED_CA": ca, "NETSURVEY_IN_TESTBED": "1"}

    def exec_argv(self, cmd: list[str]) -> list[str]:
        return ["ip", "netns", "exec", netns_name(VANTAGE), *cmd]


def down(log=print) -> dict:
    """Remove every process, namespace and veth the testbed made (also after a crash).
    Returns counts of what was removed."""
    from . import timing, trackline, zoo_dns, zoo_quic  # their processes are not in state.json (issues 25, 24)

    with _exclusive():
        trackline.down(log=lambda *_: None)   # the tracking vantage (its peer TUN is in our vantage)
        timing.down(log=lambda *_: None)
        zoo_dns.down(log=lambda *_: None)
        zoo_quic.down(log=lambda *_: None)
        from . import zoo2  # TLS zoo 2 (issue 24)
        zoo2.down(log=lambda *_: None)
        return _down(log)


def _down(log) -> dict:
    st = State.load()
    killed = 0
    if st:
        for p in reversed(st.procs):
            if pid_alive(p.pid, argv=p.argv):
                _kill(p)
                killed += 1
    for pid in _orphans():   # started by an `up` that state.json does not record
        for sig in (signal.SIGTERM, signal.SIGKILL):
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                break
            deadline = time.time() + 3
            while time.time() < deadline and pid_alive(pid):
                time.sleep(0.02)
            if not pid_alive(pid):
                break
        killed += 1
    # namespaces: the recorded ones, plus any with our prefix a crash may have left
    names = set(st.namespaces if st else []) | {n for n in netns.list_netns() if n.startswith(NETNS_PREFIX)}
    for n in names:
        netns.del_netns(n)
    netns.remove_resolv_conf(netns_name(VANTAGE))
    sf = state_dir() / "state.json"
    if sf.exists():
        sf.unlink()
    log(f"testbed down: {killed} processes stopped, {len(names)} namespaces removed")
    return {"processes": killed, "namespaces": len(names)}
