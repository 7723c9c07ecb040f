"""TCP segments for TFO probing: SYNs carrying a Fast Open cookie request or a cookie
plus data (RFC 7413), and parsing of the options in replies.

Only bytes and integers here; no sockets. IPv4 probes are whole IP packets (sent with
``IP_HDRINCL``; the kernel fills the IP checksum and id); IPv6 probes are TCP segments
(the kernel adds the IPv6 header and, with ``IPV6_CHECKSUM``, the TCP checksum).
"""
from __future__ import annotations

import ipaddress
import struct
from dataclasses import dataclass
from typing import Optional

#: TCP option kinds.
OPT_EOL, OPT_NOP, OPT_MSS, OPT_WSCALE, OPT_SACK_PERM, OPT_SACK, OPT_TS = 0, 1, 2, 3, 4, 5, 8
OPT_TFO = 34                 # RFC 7413 Fast Open cookie option
OPT_EXP = 254                # experimental option (RFC 6994) ...
TFO_EXP_MAGIC = 0xF989       # ... with the Fast Open ExID (pre-RFC Linux, some middleboxes)

FLAG_FIN, FLAG_SYN, FLAG_RST, FLAG_PSH, FLAG_ACK = 0x01, 0x02, 0x04, 0x08, 0x10

#: What a probe SYN offers besides the TFO option: MSS 1460, SACK permitted, window scale 7.
BASE_OPTIONS = bytes([OPT_MSS, 4, 0x05, 0xB4, OPT_SACK_PERM, 2, OPT_NOP, OPT_WSCALE, 3, 7])
WINDOW = 64240


def tfo_option(cookie: Optional[bytes] = None, experimental: bool = False) -> bytes:
    """The Fast Open option: an empty one (cookie request) or one carrying ``cookie``."""
    c = cookie or b""
    if experimental:
        return bytes([OPT_EXP, 4 + len(c)]) + struct.pack("!H", TFO_EXP_MAGIC) + c
    return bytes([OPT_TFO, 2 + len(c)]) + c


def syn_options(cookie: Optional[bytes] = None, experimental: bool = False) -> bytes:
    """BASE_OPTIONS + the TFO option, NOP-padded to a multiple of 4 bytes."""
    opts = BASE_OPTIONS + tfo_option(cookie, experimental)
    opts += bytes([OPT_NOP]) * (-len(opts) % 4)
    if len(opts) > 40:
        raise ValueError("TCP options longer than 40 bytes")
    return opts


def _sum16(data: bytes) -> int:
    if len(data) % 2:
        data += b"\0"
    return sum(struct.unpack(f"!{len(data) // 2}H", data))


def fold(s: int) -> int:
    """One's-complement checksum of a 32-bit-or-more sum of 16-bit words."""
    s = (s & 0xFFFF) + (s >> 16)
    s = (s & 0xFFFF) + (s >> 16)
    return (~s) & 0xFFFF


@dataclass(frozen=True)
class SynTemplate:
    """A prebuilt IPv4 probe (IP + TCP header, options, payload) whose per-target fields —
    destination address, source port, sequence number — are patched in place with
    :meth:`fill`; the TCP checksum is updated from a precomputed partial sum."""

    packet: bytes          # the template, variable fields zero
    const_sum: int         # 16-bit-word sum of the constant part incl. pseudo-header

    @classmethod
    def ipv4(cls, src: str, dport: int, options: bytes, data: bytes = b"") -> "SynTemplate":
        tcp_len = 20 + len(options) + len(data)
        src_b = ipaddress.IPv4Address(src).packed
        ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + tcp_len, 0, 0x4000, 64, 6, 0, src_b, b"\0" * 4)
        tcp = struct.pack("!HHIIBBHHH", 0, dport, 0, 0, (20 + len(options)) // 4 << 4, FLAG_SYN, WINDOW, 0, 0)
        seg = tcp + options + data
        const = _sum16(src_b) + 6 + tcp_len + _sum16(seg)
        return cls(ip + seg, const)

    def fill(self, buf, offset: int, dst: int, sport: int, seq: int) -> None:
        """Write the packet for (dst as int, sport, seq) into ``buf`` at ``offset``."""
        s = self.const_sum + (dst >> 16) + (dst & 0xFFFF) + sport + (seq >> 16) + (seq & 0xFFFF)
        buf[offset:offset + len(self.packet)] = self.packet
        struct.pack_into("!I", buf, offset + 16, dst)
        struct.pack_into("!H", buf, offset + 20, sport)
        struct.pack_into("!I", buf, offset + 24, seq)
        struct.pack_into("!H", buf, offset + 36, fold(s))


def tcp_segment(sport: int, dport: int, seq: int, options: bytes, data: bytes = b"") -> bytes:
    """A SYN segment without checksum (IPv6: the kernel fills it via IPV6_CHECKSUM)."""
    return struct.pack("!HHIIBBHHH", sport, dport, seq, 0, (20 + len(options)) // 4 << 4, FLAG_SYN,
                       WINDOW, 0, 0) + options + data


@dataclass(frozen=True)
class ParsedOptions:
    """TCP options of a reply. ``tfo_kind`` is 'rfc7413' (option 34), 'experimental'
    (option 254 with magic 0xF989) or None; ``cookie`` the cookie bytes (b'' for an empty
    option); ``others`` the remaining options as short texts ('mss=1460', 'sackok', 'ws=7',
    'ts', 'opt<kind>:<len>'); ``malformed`` is True if the option list did not parse."""

    tfo_kind: Optional[str]
    cookie: Optional[bytes]
    others: tuple[str, ...]
    malformed: bool = False


def parse_options(opts: bytes) -> ParsedOptions:
    others: list[str]
    tfo_kind, cookie, others, i = None, None, [], 0
    while i < len(opts):
        kind = opts[i]
        if kind == OPT_EOL:
            break
        if kind == OPT_NOP:
            i += 1
            continue
        if i + 1 >= len(opts) or opts[i + 1] < 2 or i + opts[i + 1] > len(opts):
            return ParsedOptions(tfo_kind, cookie, tuple(others), True)
        ln = opts[i + 1]
        body = opts[i + 2:i + ln]
        if kind == OPT_TFO:
            tfo_kind, cookie = "rfc7413", bytes(body)
        elif kind == OPT_EXP and ln >= 4 and struct.unpack("!H", body[:2])[0] == TFO_EXP_MAGIC:
            tfo_kind, cookie = "experimental", bytes(body[2:])
        elif kind == OPT_MSS and ln == 4:
            others.append(f"mss={struct.unpack('!H', body)[0]}")
        elif kind == OPT_WSCALE and ln == 3:
            others.append(f"ws={body[0]}")
        elif kind == OPT_SACK_PERM:
            others.append("sackok")
        elif kind == OPT_TS:
            others.append("ts")
        else:
            others.append(f"opt{kind}:{ln}")
        i += ln
    return ParsedOptions(tfo_kind, cookie, tuple(others))
