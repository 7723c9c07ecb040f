"""Which connections belong to the browser under test?

The testbed is shared: scanners run by others (in the same vantage namespace, from the same
address) may contact the tracking hosts while an experiment runs, so a connection seen by the
server-side observer is attributed to the browser only if the browser's own process tree held
its socket. :class:`SocketOwners` samples, every ``interval`` seconds, the socket inodes in
``/proc/PID/fd`` of every descendant of the WebDriver service process (chromedriver /
geckodriver start the browser, so every browser process descends from it) and the
namespace's ``/proc/net/{tcp,udp}`` tables, and remembers the local ports of sockets
connected to the watched server addresses (and of unconnected UDP sockets: Firefox's QUIC).

A connection that opens and closes between two samples is missed; :func:`attribute` therefore
also accepts connections whose ClientHello fingerprint (cipher suites + extension types,
GREASE removed, order ignored) equals that of a connection known to be the browser's.
Must run in the namespace the browser runs in (the testbed vantage).
"""
from __future__ import annotations

import os
import socket
import struct
import threading
import time
from typing import Iterable


def _children_map() -> dict[int, list[int]]:
    kids: dict[int, list[int]] = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            stat = open(f"/proc/{d}/stat").read()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        kids.setdefault(ppid, []).append(int(d))
    return kids


def descendants(roots: Iterable[int]) -> set[int]:
    """The given PIDs and all their descendants (alive now)."""
    kids = _children_map()
    out, todo = set(), list(roots)
    while todo:
        p = todo.pop()
        if p in out:
            continue
        out.add(p)
        todo += kids.get(p, [])
    return out


def _socket_inodes(pids: Iterable[int]) -> set[int]:
    inodes = set()
    for p in pids:
        try:
            fds = os.listdir(f"/proc/{p}/fd")
        except OSError:
            continue
        for fd in fds:
            try:
                link = os.readlink(f"/proc/{p}/fd/{fd}")
            except OSError:
                continue
            if link.startswith("socket:["):
                inodes.add(int(link[8:-1]))
    return inodes


def _hex_v4(h: str) -> str:
    return socket.inet_ntoa(struct.pack("<I", int(h, 16)))


def _hex_v6(h: str) -> str:
    raw = b"".join(struct.pack("<I", int(h[i:i + 8], 16)) for i in range(0, 32, 8))
    return socket.inet_ntop(socket.AF_INET6, raw)


def proc_net_sockets(proto: str) -> list[tuple[int, str, int]]:
    """(local port, remote address, inode) of every socket in /proc/net/PROTO and PROTO6."""
    out = []
    for name, conv in ((proto, _hex_v4), (proto + "6", _hex_v6)):
        try:
            lines = open(f"/proc/net/{name}").read().splitlines()[1:]
        except OSError:
            continue
        for ln in lines:
            f = ln.split()
            if len(f) < 10:
                continue
            lport = int(f[1].split(":")[1], 16)
            raddr = conv(f[2].split(":")[0])
            out.append((lport, raddr, int(f[9])))
    return out


# Firefox's QUIC (neqo) socket is not connect()ed: /proc/net/udp shows no remote address.
# A UDP port the browser holds and the QUIC server logs is the browser's all the same.
_UNCONNECTED = {"0.0.0.0", "::"}


class SocketOwners:
    """Samples the browser's sockets in a thread; ``ports(proto)`` = local ports seen (UDP:
    also unconnected sockets, whose remote address the kernel does not know)."""

    def __init__(self, remote_addresses: set[str], interval: float = 0.02):
        self.remote = set(remote_addresses)
        self.interval = interval
        self._roots: set[int] = set()
        self._seen: dict[str, set[int]] = {"tcp": set(), "udp": set()}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._t = threading.Thread(target=self._run, daemon=True)
        self._t.start()

    def add_root(self, pid: int) -> None:
        """Track the process tree below ``pid`` (the WebDriver service of a started browser)."""
        with self._lock:
            self._roots.add(pid)

    def _run(self) -> None:
        pids: set[int] = set()
        last_tree = 0.0
        while not self._stop.is_set():
            with self._lock:
                roots = set(self._roots)
            now = time.monotonic()
            if roots and now - last_tree > 0.25:
                pids, last_tree = descendants(roots), now
            if pids:
                inodes = _socket_inodes(pids)
                for proto in ("tcp", "udp"):
                    remote = (self.remote | _UNCONNECTED) if proto == "udp" else self.remote
                    hits = {port for port, raddr, ino in proc_net_sockets(proto)
                            if ino in inodes and raddr in remote}
                    if hits:
                        with self._lock:
                            self._seen[proto] |= hits
            self._stop.wait(self.interval)

    def ports(self, proto: str = "tcp") -> set[int]:
        with self._lock:
            return set(self._seen[proto])

    def close(self) -> None:
        self._stop.set()
        self._t.join(2)


def attribute(records: list[dict], owned_ports: set[int]) -> list[dict]:
    """Observer records of the browser: its sockets' ports, or a fingerprint one of them had."""
    fps = {r.get("fingerprint") for r in records if r.get("client_port") in owned_ports and r.get("fingerprint")}
    return [r for r in records if r.get("client_port") in owned_ports or (r.get("fingerprint") in fps)]
