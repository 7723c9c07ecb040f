"""What the testbed runs: process specifications, started inside namespaces by the manager,
and the process helpers the manager and the timing testbed share (state directory,
liveness, stopping, readiness): a module of their own, so neither imports the other."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

#: Every namespace the testbed creates is called NETNS_PREFIX + name (vantage included).
NETNS_PREFIX = "nstb-"


def netns_name(name: str) -> str:
    """Kernel name of the testbed namespace ``name`` (e.g. 'dns' -> 'nstb-dns')."""
    return NETNS_PREFIX + name


@dataclass(frozen=True)
class ProcSpec:
    """One long-running server process.

    :param name: unique label ('knot', 'unbound', 'nginx', 'quic-www.example.test', ...).
    :param namespace: testbed namespace name (without prefix) it runs in.
    :param argv: command line; must stay in the foreground (the manager records its PID).
    :param env: extra environment variables.
    :param ready_tcp / ready_udp: (address, port) that accepts connections / is bound once ready.
    :param ready_timeout_s: how long start-up may take (a JVM compiling its server from
        source needs more than a daemon, more still on a loaded machine).
    """

    name: str
    namespace: str
    argv: list[str]
    env: dict[str, str] = field(default_factory=dict)
    ready_tcp: tuple[str, int] | None = None
    ready_udp: tuple[str, int] | None = None
    ready_timeout_s: float = 8.0


def state_dir() -> Path:
    return Path(os.environ.get("NETSURVEY_TESTBED_DIR", "/run/netsurvey/testbed"))


@dataclass
class ProcState:
    name: str
    namespace: str
    pid: int
    argv: list[str]
    log: str


# -- process liveness ---------------------------------------------------------------
def pid_alive(pid: int, argv0: str | None = None, argv: list[str] | None = None) -> bool:
    """True if ``pid`` runs (zombies count as dead) and, if given, its argv[0] matches - or,
    with ``argv``, its whole command line (pids wrap at pid_max: a recorded pid may belong
    to an unrelated process by now, and `down` must never signal that one)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    if stat.rsplit(")", 1)[1].split()[0] in ("Z", "X"):
        return False
    if argv0 or argv:
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes().rstrip(b"\0").split(b"\0")
        except OSError:
            return False
        cmd0 = cmd[0].decode(errors="replace")
        if cmd0.startswith("nginx"):   # nginx rewrites its title ("nginx: master process ...")
            return os.path.basename((argv or [argv0])[0]).startswith("nginx")
        if argv:
            return [c.decode(errors="replace") for c in cmd] == [str(a) for a in argv]
        return os.path.basename(cmd0).startswith(os.path.basename(argv0)[:15])
    return True


def _kill(p: ProcState, timeout: float = 3.0) -> None:
    if not pid_alive(p.pid, argv=p.argv):
        return
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(p.pid, sig)
        except ProcessLookupError:
            return
        except PermissionError:
            os.kill(p.pid, sig)
        deadline = time.time() + timeout
        while time.time() < deadline:
            if not pid_alive(p.pid):
                return
            time.sleep(0.02)


# -- readiness ------------------------------------------------------------------------
def _wait_ready(spec: ProcSpec, pid: int, timeout: float = 8.0, netns: str | None = None) -> None:
    """Wait until the spec's TCP port accepts (checked from inside its namespace: ``netns``,
    a kernel name, or the testbed's for spec.namespace) or its UDP port is bound; raise if
    the process dies first."""
    port_check = None
    if spec.ready_tcp:
        port_check = ("tcp", *spec.ready_tcp)
    elif spec.ready_udp:
        port_check = ("udp", *spec.ready_udp)
    deadline = time.time() + timeout
    while time.time() < deadline:
        if not pid_alive(pid):
            raise RuntimeError(f"{spec.name} exited during start-up (see its log)")
        if port_check is None:
            return
        proto, addr, port = port_check
        r = subprocess.run(["ip", "netns", "exec", netns or netns_name(spec.namespace), "ss", "-Hln",
                            "-t" if proto == "tcp" else "-u", f"sport = :{port}"],
                           capture_output=True, text=True)
        want = f"[{addr}]:{port}" if ":" in addr else f"{addr}:{port}"
        mapped = f"[::ffff:{addr}]:{port}"   # an IPv4 address on a dual-stack socket (Java)
        if want in r.stdout or mapped in r.stdout or f"*:{port}" in r.stdout or f"0.0.0.0:{port}" in r.stdout:
            return
        time.sleep(0.05)
    raise RuntimeError(f"{spec.name} not ready on {port_check} after {timeout:.0f} s")


def load_state(d: Path) -> dict:
    """``d/state.json`` of a testbed of its own (timing, zoo2, zoo-quic, zoo-dns), {} if none."""
    try:
        return json.loads((d / "state.json").read_text())
    except (OSError, ValueError):
        return {}


def save_state(d: Path, st: dict) -> None:
    """Write ``d/state.json`` atomically (a crash never leaves half a file)."""
    d.mkdir(parents=True, exist_ok=True)
    (d / "state.json.tmp").write_text(json.dumps(st, indent=1))
    (d / "state.json.tmp").rename(d / "state.json")
