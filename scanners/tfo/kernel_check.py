"""Kernel-path cross-check: connect twice with ``TCP_FASTOPEN_CONNECT`` (the kernel's own
TFO client), read the cookie the kernel cached (``ip tcp_metrics show``) and whether the
second connection's SYN data was acknowledged (``TCP_INFO`` tcpi_options bit 0x20)."""
from __future__ import annotations

import re
import socket
import subprocess
from dataclasses import dataclass
from typing import Optional

TCP_FASTOPEN_CONNECT = 30        # linux/tcp.h; no constant in Python 3.11
TCPI_OPT_SYN_DATA = 0x20
REQUEST = b"HEAD / HTTP/1.0\r\n\r\n"


@dataclass(frozen=True)
class KernelCheck:
    """``kernel_cookie``: fo_cookie cached by the kernel (None if none); ``syn_data_acked``:
    the second connection's data in the SYN was acknowledged; ``error``: why the check failed."""

    address: str
    port: int
    kernel_cookie: Optional[bytes]
    syn_data_acked: Optional[bool]
    error: Optional[str] = None


def _connect_once(address: str, port: int, timeout: float) -> bool:
    fam = socket.AF_INET6 if ":" in address else socket.AF_INET
    with socket.socket(fam, socket.SOCK_STREAM) as s:
        s.settimeout(timeout)
        s.setsockopt(socket.IPPROTO_TCP, TCP_FASTOPEN_CONNECT, 1)
        s.connect((address, port))      # with TFO_CONNECT: returns at once, SYN goes with the first write
        s.sendall(REQUEST)
        while s.recv(4096):
            pass
        info = s.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 104)
        return bool(info[5] & TCPI_OPT_SYN_DATA)


def _cached_cookie(address: str) -> Optional[bytes]:
    out = subprocess.run(["ip", "tcp_metrics", "show", address], capture_output=True, text=True).stdout
    m = re.search(r"fo_cookie ([0-9a-fA-F]+)", out)
    return bytes.fromhex(m.group(1)) if m else None


def check(address: str, port: int, timeout: float = 3.0) -> KernelCheck:
    """Run the two-connection check against one TFO server (clears its tcp_metrics first)."""
    subprocess.run(["ip", "tcp_metrics", "delete", address], capture_output=True)
    try:
        _connect_once(address, port, timeout)
        cookie = _cached_cookie(address)
        acked = _connect_once(address, port, timeout)
    except OSError as exc:
        return KernelCheck(address, port, None, None, f"{type(exc).__name__}: {exc}"[:200])
    return KernelCheck(address, port, cookie, acked)
