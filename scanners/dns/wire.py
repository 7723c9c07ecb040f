"""DNS wire format for the scanner's hot path: prebuilt queries and a strict, fast reply
parser.

Queries are built once per (name, type, flags, ECS) as bytes; only the 16-bit ID is
patched per send (:func:`with_id`). Replies are parsed by :func:`parse_reply`, which
bounds-checks every read, follows compression pointers only backwards and at most
``MAX_POINTERS`` times, and raises :class:`MalformedReply` (never anything else) on bad
input, so a hostile or broken server cannot crash a scan. Names are returned lower-case
without the trailing dot. dnspython encodes query names (escapes, IDNA) and serves as the
reference parser in the tests.
"""
from __future__ import annotations

import functools
import ipaddress
import re
import socket
import struct
from dataclasses import dataclass
from socket import AF_INET, inet_ntop
from typing import NamedTuple, Optional

import dns.name

# RR types and classes used here (numbers from the IANA registry).
A, NS, CNAME, SOA, AAAA, OPT = 1, 2, 5, 6, 28, 41
TYPE_NUMBERS = {"A": A, "NS": NS, "CNAME": CNAME, "SOA": SOA, "AAAA": AAAA}
TYPE_NAMES = {v: k for k, v in TYPE_NUMBERS.items()}
CLASS_IN = 1
ECS_OPTION = 8
RCODE_NAMES = {0: "NOERROR", 1: "FORMERR", 2: "SERVFAIL", 3: "NXDOMAIN", 4: "NOTIMP", 5: "REFUSED",
               9: "NOTAUTH", 16: "BADVERS"}

FLAG_QR, FLAG_AA, FLAG_TC, FLAG_RD, FLAG_RA = 0x8000, 0x0400, 0x0200, 0x0100, 0x0080

#: Longest compression-pointer chain followed while reading one name.
MAX_POINTERS = 64
_HDR = struct.Struct("!HHHHHH")
_RR = struct.Struct("!HHIH")


class MalformedReply(ValueError):
    """A reply that cannot be parsed (short packet, bad pointer, overrun, ...)."""


@dataclass(frozen=True)
class EcsOption:
    """EDNS Client Subnet (RFC 7871) as sent or received: ``address`` is the (masked)
    prefix address, ``source`` the source prefix length in bits, ``scope`` the scope
    prefix length in bits (0 in queries)."""

    address: str
    source: int
    scope: int = 0


class RR(NamedTuple):
    """One resource record: owner ``name``, numeric ``rtype``, ``ttl`` in seconds and
    ``value`` as text (address for A/AAAA, target name for NS/CNAME, SOA minimum TTL
    for SOA, hex for anything else)."""

    name: str
    rtype: int
    ttl: int
    value: str


class Reply(NamedTuple):
    """A parsed reply (an immutable tuple: cheap to build on the hot path). ``rcode`` includes the EDNS extended bits; ``ecs`` is the ECS
    option of the OPT record if any; ``edns`` says whether an OPT record was present."""

    id: int
    flags: int
    rcode: int
    qname: str
    qtype: int
    answer: tuple[RR, ...]
    authority: tuple[RR, ...]
    additional: tuple[RR, ...]
    edns: bool
    ecs: Optional[EcsOption]

    @property
    def aa(self) -> bool:
        return bool(self.flags & FLAG_AA)

    @property
    def tc(self) -> bool:
        return bool(self.flags & FLAG_TC)

    @property
    def rcode_text(self) -> str:
        return RCODE_NAMES.get(self.rcode) or str(self.rcode)


# --------------------------------------------------------------------------- queries

#: Plain host names (labels of 1-63 letters, digits, '-', '_'), encoded without dnspython.
_PLAIN_NAME = re.compile(r"(?:[a-z0-9_-]{1,63}\.)*[a-z0-9_-]{1,63}")
_LABEL_LENGTH = [bytes((i,)) for i in range(64)]


def encode_name(name: str) -> bytes:
    """Wire form of an absolute domain name, lower-case. Plain host names are encoded here
    (~1.5 us); anything else (IDNA, escapes) by dnspython, which also raises on names that
    cannot be encoded."""
    text = name.rstrip(".").lower()
    if len(text) <= 253 and _PLAIN_NAME.fullmatch(text):
        return b"".join([_LABEL_LENGTH[len(p)] + p for p in text.encode().split(b".")]) + b"\x00"
    return dns.name.from_text(name.rstrip(".") + ".").canonicalize().to_wire()  # type: ignore[return-value]  # no file given: bytes


def ecs_option_bytes(ecs: EcsOption) -> bytes:
    """The ECS option (code, length, family, source, scope, address truncated to whole
    bytes of the source prefix, host bits zero)."""
    ip = ipaddress.ip_address(ecs.address)
    family = 1 if ip.version == 4 else 2
    net = ipaddress.ip_network(f"{ip}/{ecs.source}", strict=False)
    nbytes = (ecs.source + 7) // 8
    addr = net.network_address.packed[:nbytes]
    body = struct.pack("!HBB", family, ecs.source, ecs.scope) + addr
    return struct.pack("!HH", ECS_OPTION, len(body)) + body


def build_query(name: str, rtype: int, *, rd: bool = False, edns_payload: Optional[int] = 1232,
                ecs: Optional[EcsOption] = None) -> bytes:
    """A query with ID 0 (patch it with :func:`with_id`). ``edns_payload`` None sends no
    OPT record (plain DNS, 512-byte UDP limit); ECS needs EDNS."""
    head, end = _query_frame(rtype, rd, edns_payload, ecs)
    return head + encode_name(name) + end


@functools.lru_cache(maxsize=4096)
def _query_frame(rtype: int, rd: bool, edns_payload: Optional[int], ecs: Optional[EcsOption]) -> tuple[bytes, bytes]:
    """(header, bytes after the name) of a query: the same for every name, so built once."""
    flags = FLAG_RD if rd else 0
    arcount = 1 if (edns_payload is not None or ecs is not None) else 0
    end = struct.pack("!HH", rtype, CLASS_IN)
    if arcount:
        rdata = ecs_option_bytes(ecs) if ecs is not None else b""
        end += b"\x00" + struct.pack("!HHIH", OPT, edns_payload or 1232, 0, len(rdata)) + rdata
    return _HDR.pack(0, flags, 1, 0, 0, arcount), end


def with_id(query: bytes, qid: int) -> bytes:
    """The prebuilt ``query`` with its ID set to ``qid``."""
    return qid.to_bytes(2, "big") + query[2:]


# --------------------------------------------------------------------------- replies

def _read_name(buf: bytes, pos: int) -> tuple[str, int]:
    """(name, offset after the name in the original position)."""
    name, end, _ = _read_name_j(buf, pos)
    return name, end


def _read_name_j(buf: bytes, pos: int) -> tuple[str, int, int]:
    """(name, offset after the name in the original position, pointers followed)."""
    labels: list[bytes] = []
    end = -1
    jumps = 0
    try:
        while True:
            ln = buf[pos]
            if ln < 64:
                if not ln:
                    break
                pos += 1
                labels.append(buf[pos:pos + ln])  # a label past the end: the next read fails
                pos += ln
                continue
            if ln < 0xC0:
                raise MalformedReply(f"unsupported label type 0x{ln & 0xC0:02x}")
            target = ((ln & 0x3F) << 8) | buf[pos + 1]
            if end < 0:
                end = pos + 2
            jumps += 1
            if target >= pos or jumps > MAX_POINTERS:
                raise MalformedReply("bad compression pointer (forward or loop)")
            if len(labels) > 127:  # more than a 255-octet name holds; bounds the work per name
                raise MalformedReply("name longer than 255 octets")
            pos = target
    except IndexError:
        raise MalformedReply("name runs past the end of the packet") from None
    if end < 0:
        end = pos + 1
    name = b".".join(labels)
    if len(name) > 254:
        raise MalformedReply("name longer than 255 octets")
    return name.decode("latin-1").lower(), end, jumps


def _rdata_text(buf: bytes, rtype: int, start: int, length: int) -> str:
    if rtype == A:
        if length != 4:
            raise MalformedReply("A record with rdata length != 4")
        return socket.inet_ntop(socket.AF_INET, buf[start:start + 4])
    if rtype == AAAA:
        if length != 16:
            raise MalformedReply("AAAA record with rdata length != 16")
        text = socket.inet_ntop(socket.AF_INET6, buf[start:start + 16])
        # inet_ntop writes embedded IPv4 in dotted form; keep Python's canonical text
        return str(ipaddress.IPv6Address(buf[start:start + 16])) if "." in text else text
    if rtype in (NS, CNAME):
        name, end = _read_name(buf, start)
        if end > start + length:
            raise MalformedReply("name overruns its rdata")
        return name
    if rtype == SOA:
        _, p = _read_name(buf, start)
        _, p = _read_name(buf, p)
        if p + 20 > start + length:
            raise MalformedReply("short SOA rdata")
        return str(struct.unpack_from("!I", buf, p + 16)[0])
    return buf[start:start + length].hex()


def _parse_ecs(data: bytes) -> Optional[EcsOption]:
    pos, n = 0, len(data)
    while pos + 4 <= n:
        code, ln = struct.unpack_from("!HH", data, pos)
        pos += 4
        if pos + ln > n:
            raise MalformedReply("EDNS option overruns the OPT record")
        if code == ECS_OPTION:
            if ln < 4:
                raise MalformedReply("short ECS option")
            family, source, scope = struct.unpack_from("!HBB", data, pos)
            raw = data[pos + 4:pos + ln]
            size = 4 if family == 1 else 16 if family == 2 else 0
            if not size or len(raw) > size or source > size * 8 or scope > size * 8:
                raise MalformedReply("bad ECS option")
            packed = raw + b"\x00" * (size - len(raw))
            addr = ipaddress.IPv4Address(packed) if size == 4 else ipaddress.IPv6Address(packed)
            return EcsOption(str(addr), source, scope)
        pos += ln
    return None


def parse_reply(buf: bytes) -> Reply:
    """Parse a reply; raises MalformedReply on anything that is not a well-formed
    message (see module docstring)."""
    try:
        return _parse(buf)
    except MalformedReply:
        raise
    except (struct.error, ValueError, IndexError) as exc:  # defence in depth
        raise MalformedReply(f"{type(exc).__name__}: {exc}") from None


def _parse(buf: bytes) -> Reply:
    n = len(buf)
    if n < 12:
        raise MalformedReply(f"packet shorter than a DNS header ({n} bytes)")
    qid, flags, qd, an, ns, ar = _HDR.unpack_from(buf, 0)
    if not flags & FLAG_QR:
        raise MalformedReply("QR bit not set")
    pos = 12
    qname, qtype = "", 0
    qptr = False  # the first question's name was read at offset 12 without pointers
    for i in range(qd):
        name, pos, jumps = _read_name_j(buf, pos)
        if pos + 4 > n:
            raise MalformedReply("truncated question")
        if i == 0:
            qname, qtype, qptr = name, (buf[pos] << 8) | buf[pos + 1], jumps == 0
        pos += 4
    answer: list[RR] = []
    authority: list[RR] = []
    additional: list[RR] = []
    rcode = flags & 0xF
    edns = False
    ecs = None
    unpack_rr = _RR.unpack_from
    sec, left = answer, an
    for _ in range(an + ns + ar):
        while not left:  # next section (an empty one is skipped)
            sec, left = (authority, ns) if sec is answer else (additional, ar)
        left -= 1
        # fast paths: a pointer to the first question's name (offset 12), the root
        if pos + 1 < n and buf[pos] == 0xC0 and buf[pos + 1] == 12 and qptr:
            name, pos = qname, pos + 2
        elif pos < n and buf[pos] == 0:
            name, pos = "", pos + 1
        else:
            name, pos, _ = _read_name_j(buf, pos)
        if pos + 10 > n:
            raise MalformedReply("truncated resource record header")
        rtype, _, ttl, rdlen = unpack_rr(buf, pos)
        pos += 10
        if pos + rdlen > n:
            raise MalformedReply("rdata runs past the end of the packet")
        if rtype == A and rdlen == 4:
            sec.append(RR(name, A, ttl, inet_ntop(AF_INET, buf[pos:pos + 4])))
        elif rtype == OPT:
            edns = True
            rcode |= (ttl >> 24) << 4
            ecs = _parse_ecs(buf[pos:pos + rdlen])
        else:
            sec.append(RR(name, rtype, ttl, _rdata_text(buf, rtype, pos, rdlen)))
        pos += rdlen
    return Reply(qid, flags, rcode, qname, qtype, tuple(answer), tuple(authority), tuple(additional), edns, ecs)


def question_of(query: bytes) -> bytes:
    """The question section of a prebuilt query (name + type + class), lower-case, for
    matching replies to queries."""
    end = 12
    while query[end]:
        end += query[end] + 1
    return query[12:end + 1].lower() + query[end + 1:end + 5]


def reply_question(buf: bytes) -> bytes:
    """The raw question of a reply (uncompressed by convention), lower-case; b'' if absent
    or unreadable."""
    if len(buf) < 17 or buf[4:6] == b"\x00\x00":
        return b""
    end = 12
    n = len(buf)
    while end < n and buf[end]:
        if buf[end] & 0xC0:
            return b""
        end += buf[end] + 1
    if end + 5 > n:
        return b""
    return buf[12:end + 1].lower() + buf[end + 1:end + 5]
