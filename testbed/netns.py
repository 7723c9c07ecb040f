"""Thin wrappers around iproute2 and sysctl for the testbed's namespaces."""
from __future__ import annotations

import subprocess
from pathlib import Path


class CommandFailed(RuntimeError):
    pass


def sh(*argv: str, ns: str | None = None, check: bool = True) -> subprocess.CompletedProcess:
    """Run a command (inside netns ``ns`` if given); raise CommandFailed with stderr on error."""
    cmd = (["ip", "netns", "exec", ns] if ns else []) + list(argv)
    r = subprocess.run(cmd, capture_output=True, text=True)
    if check and r.returncode != 0:
        raise CommandFailed(f"{' '.join(cmd)}: {r.stderr.strip() or r.stdout.strip()}")
    return r


def ip_batch(lines: list[str], ns: str | None = None) -> None:
    """Run many `ip` commands in one process (`ip -batch -`): fast setup."""
    cmd = (["ip", "-n", ns] if ns else ["ip"]) + ["-batch", "-"]
    r = subprocess.run(cmd, input="\n".join(lines) + "\n", capture_output=True, text=True)
    if r.returncode != 0:
        raise CommandFailed(f"ip -batch in {ns or 'host'}: {r.stderr.strip()}")


def list_netns() -> list[str]:
    r = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True)
    return [line.split()[0] for line in r.stdout.splitlines() if line.strip()]


def add_netns(name: str) -> None:
    sh("ip", "netns", "add", name)
    ip_batch(["link set lo up"], ns=name)


def del_netns(name: str) -> None:
    sh("ip", "netns", "del", name, check=False)


def sysctl(ns: str, settings: dict[str, str]) -> None:
    """Write sysctls inside ``ns`` (net.* are per namespace)."""
    args = [f"{k}={v}" for k, v in settings.items()]
    sh("sysctl", "-q", "-w", *args, ns=ns)


def write_resolv_conf(ns: str, servers: list[str]) -> Path:
    """`ip netns exec` bind-mounts /etc/netns/<ns>/resolv.conf over /etc/resolv.conf."""
    d = Path("/etc/netns") / ns
    d.mkdir(parents=True, exist_ok=True)
    p = d / "resolv.conf"
    p.write_text("".join(f"nameserver {s}\n" for s in servers) + "options timeout:1 attempts:2\n")
    return p


def write_hosts(ns: str, names: dict[str, list[str]]) -> Path:
    """/etc/netns/<ns>/hosts (bind-mounted over /etc/hosts by `ip netns exec`): localhost and
    ``names`` (name -> addresses)."""
    d = Path("/etc/netns") / ns
    d.mkdir(parents=True, exist_ok=True)
    p = d / "hosts"
    lines = ["127.0.0.1 localhost", "::1 localhost ip6-localhost ip6-loopback"]
    lines += [f"{a} {name}" for name, addrs in names.items() for a in addrs]
    p.write_text("\n".join(lines) + "\n")
    return p


def remove_resolv_conf(ns: str) -> None:
    d = Path("/etc/netns") / ns
    if d.exists():
        for f in d.iterdir():
            f.unlink()
        d.rmdir()
