"""Version Negotiation probe: an Initial with a reserved version (RFC 9000 sections 6 and
15) that every QUIC server answers with the list of versions it supports.

:func:`build_probe` makes the datagram (also usable as a zmap udp payload),
:func:`parse_version_negotiation` checks a reply strictly (our connection IDs echoed,
version 0, a whole number of 4-byte versions) and :func:`probe_versions` sends it.
"""
from __future__ import annotations

import asyncio
import ipaddress
import os
import socket
import struct
import time
from typing import Optional

from .records import RESERVED_VERSION, VersionProbeResult

#: Datagram size, bytes: servers ignore Initials in datagrams below 1200 bytes.
PROBE_LEN = 1200
CID_LEN = 8  # bytes


def build_probe(dcid: bytes, scid: bytes, version: int = RESERVED_VERSION) -> bytes:
    """A 1200-byte long-header Initial with ``version``: header, empty token, a length that
    covers the (random) rest, so parsers of the invariant header and of v1 Initials accept it."""
    head = bytes([0xC0 | 0x03]) + struct.pack("!I", version) + bytes([len(dcid)]) + dcid \
        + bytes([len(scid)]) + scid + b"\x00"  # token length 0
    rest = PROBE_LEN - len(head) - 2
    return head + struct.pack("!H", 0x4000 | rest) + os.urandom(rest)


def parse_version_negotiation(data: bytes, dcid: bytes, scid: bytes) -> Optional[tuple[int, ...]]:
    """Versions offered in a Version Negotiation packet answering our probe, else None.

    The reply must have the long-header bit, version 0, destination CID = our source CID,
    source CID = our destination CID and a non-empty whole number of versions."""
    if len(data) < 7 or not data[0] & 0x80:
        return None
    if struct.unpack_from("!I", data, 1)[0] != 0:
        return None
    i = 5
    dl = data[i]
    r_dcid = data[i + 1:i + 1 + dl]
    i += 1 + dl
    if i >= len(data):
        return None
    sl = data[i]
    r_scid = data[i + 1:i + 1 + sl]
    i += 1 + sl
    body = data[i:]
    if r_dcid != scid or r_scid != dcid or not body or len(body) % 4:
        return None
    return tuple(struct.unpack(f"!{len(body) // 4}I", body))


async def probe_versions(address: str, port: int = 443, *, timeout_s: float = 1.0,
                         attempts: int = 2) -> VersionProbeResult:
    """Send the probe (up to ``attempts`` times, ``timeout_s`` s each) and classify the
    first reply: Version Negotiation, garbage, ICMP refusal or silence. Never raises for
    anything the peer sends."""
    loop = asyncio.get_running_loop()
    family = socket.AF_INET6 if ipaddress.ip_address(address).version == 6 else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_DGRAM)
    sock.setblocking(False)
    try:
        sock.connect((address, port))
        dcid, scid = os.urandom(CID_LEN), os.urandom(CID_LEN)
        packet = build_probe(dcid, scid)
        for _ in range(attempts):
            t0 = time.monotonic()
            await loop.sock_sendall(sock, packet)
            deadline = t0 + timeout_s
            while True:
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                try:
                    data = await asyncio.wait_for(loop.sock_recv(sock, 65535), left)
                except asyncio.TimeoutError:
                    break
                except ConnectionRefusedError:
                    return VersionProbeResult("refused", rtt_ms=(time.monotonic() - t0) * 1000)
                rtt = (time.monotonic() - t0) * 1000
                versions = parse_version_negotiation(data, dcid, scid)
                if versions is not None:
                    return VersionProbeResult("version-negotiation", versions, rtt, len(data))
                return VersionProbeResult("garbage", (), rtt, len(data))
        return VersionProbeResult("none")
    finally:
        sock.close()
