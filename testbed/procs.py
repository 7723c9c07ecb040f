"""What the testbed runs: process specifications, started inside namespaces by the manager."""
from __future__ import annotations

from dataclasses import dataclass, field

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
