"""Hostile hosts: servers that misbehave the way some Internet hosts do.

One asyncio process in the ``hostile`` namespace (a local-route range, so it may bind any
address of it) serves every behaviour below, each on its own IPv4 address. The table
``HOSTILE_HOSTS`` is the ground truth (``netsurvey testbed status --json`` ->
``ground_truth.hostile``); config/testbed.toml gives each address a name under
``hostile.test``. Scanners must finish over these hosts within their own timeouts, record a
reason per target, keep bounded memory, and never crash.

Behaviours (ports: TCP 80/443 unless stated):

* ``stall``     accept the connection (the kernel sends the SYN-ACK), then never read or
                write; UDP 443 is bound and silent. Held open up to ``STALL_HOLD`` s.
* ``endless``   after the first bytes (ClientHello), stream TLS handshake records of 16 KiB
                filled with HelloRequest messages (which TLS clients skip) forever, at most
                ``ENDLESS_RATE`` bytes/s, until the client leaves (cap ``ENDLESS_MAX_S`` s).
* ``bigcert``   a real TLS 1.2/1.3 server (Python ssl) whose certificate, issued by the
                testbed CA, carries ``BIGCERT_SANS`` SANs: a chain of ~81 KB (OpenSSL clients
                accept up to 100 KiB, Go's crypto/tls 64 KiB).
* ``badticket`` a raw TLS 1.2 ServerHello (session_ticket extension) followed at once by a
                NewSessionTicket whose ticket length (65535) exceeds its message (16 bytes).
* ``reset``     read the ClientHello, then close with SO_LINGER 0 (TCP RST mid-handshake).
* ``garbage``   answer anything (TCP, UDP 443, UDP 53) with ``GARBAGE_BYTES`` random bytes.
* ``quicbad``   UDP 443: answer every datagram with four broken QUIC packets: a Version
                Negotiation whose version list is 3 bytes, a Version Negotiation whose DCID
                length (255) runs past the datagram, an Initial whose Length field (1200)
                exceeds the datagram, and a Retry with a truncated integrity tag.
* ``dns``       UDP/TCP 53: by the first label of the question: ``loop`` (default) - the
                answer's owner name is label 'a' + a backward pointer to itself (endless
                name); ``forward`` - owner name points forward at its RDATA, which points
                back; ``self`` - a pointer to itself; ``trunc`` - ANCOUNT=1 but the packet
                ends inside the answer; ``garbage`` - random bytes; ``wrongid`` - a valid
                answer with the wrong transaction id.

Usage: python -m testbed.hostile [--bigcert CERT --bigkey KEY]
"""
from __future__ import annotations

import argparse
import asyncio
import os
import signal
import socket
import ssl
import struct
from dataclasses import asdict, dataclass
from pathlib import Path

#: Seconds a stalled connection is held before the server lets go.
STALL_HOLD = 120.0
#: Bytes per second the endless-records host sends at most.
ENDLESS_RATE = 1 << 20
#: Seconds after which the endless host stops (protects the shared machine).
ENDLESS_MAX_S = 60.0
#: Random bytes the garbage host sends per answer.
GARBAGE_BYTES = 1024
#: SAN count of the oversized certificate.
BIGCERT_SANS = 2600
#: Announced ticket length of the bogus NewSessionTicket (bytes) and bytes actually sent.
BADTICKET_CLAIMED_LEN = 65535
BADTICKET_SENT_LEN = 16

NAMESPACE = "hostile"
V4_PREFIX = "198.18.30.0/24"
V6_PREFIX = "2001:2:0:30::/64"


@dataclass(frozen=True)
class HostileHost:
    """One misbehaving host. ``tcp``/``udp``: ports it listens on (everything else on its
    address is closed: the kernel answers TCP with RST, UDP with ICMP port unreachable)."""

    label: str
    hostname: str
    address: str
    behaviour: str
    tcp: tuple[int, ...] = ()
    udp: tuple[int, ...] = ()


HOSTILE_HOSTS: tuple[HostileHost, ...] = (
    HostileHost("stall", "stall.hostile.test", "198.18.30.1", "accept, then silence", (80, 443), (443,)),
    HostileHost("endless", "endless.hostile.test", "198.18.30.2", "endless TLS records (HelloRequest)", (80, 443)),
    HostileHost("bigcert", "bigcert.hostile.test", "198.18.30.3",
                f"TLS server with a {BIGCERT_SANS}-SAN (~81 KB) certificate chain", (443,)),
    HostileHost("badticket", "badticket.hostile.test", "198.18.30.4",
                "TLS 1.2 ServerHello + NewSessionTicket with ticket length 65535 > message", (443,)),
    HostileHost("reset", "reset.hostile.test", "198.18.30.5", "RST after the ClientHello", (80, 443)),
    HostileHost("garbage", "garbage.hostile.test", "198.18.30.6", "random bytes on TCP and UDP", (80, 443), (53, 443)),
    HostileHost("quicbad", "quicbad.hostile.test", "198.18.30.7", "QUIC packets with wrong lengths", (), (443,)),
    HostileHost("dns", "ns.hostile.test", "198.18.30.53",
                "DNS replies: compression loops, truncation, garbage, wrong id", (53,), (53,)),
)

#: Names under hostile.test that resolve into ranges a scanner must never contact
#: (DATA only: nothing in the testbed listens there). name -> addresses.
UNSAFE_NAMES: dict[str, tuple[str, ...]] = {
    "lo.hostile.test": ("127.0.0.1", "::1"),
    "private.hostile.test": ("10.0.0.1",),
    "public.hostile.test": ("8.8.8.8",),
    "metadata.hostile.test": ("169.254.169.254",),
    "mapped.hostile.test": ("::ffff:10.0.0.1",),
}


def by_label(label: str) -> HostileHost:
    for h in HOSTILE_HOSTS:
        if h.label == label:
            return h
    raise KeyError(label)


def hostile_ground_truth() -> dict:
    return {"namespace": NAMESPACE, "hosts": [asdict(h) for h in HOSTILE_HOSTS],
            "unsafe_names": {k: list(v) for k, v in UNSAFE_NAMES.items()},
            "dns_modes": ["loop", "forward", "self", "trunc", "garbage", "wrongid"],
            "stall_hold_s": STALL_HOLD, "endless_rate_bytes_per_s": ENDLESS_RATE,
            "garbage_bytes": GARBAGE_BYTES, "bigcert_sans": BIGCERT_SANS,
            "badticket_claimed_len": BADTICKET_CLAIMED_LEN, "badticket_sent_len": BADTICKET_SENT_LEN}


def bigcert_sans() -> list[str]:
    return ["bigcert.hostile.test"] + [f"san{i:05d}.bigcert.hostile.test" for i in range(BIGCERT_SANS - 1)]


# ------------------------------------------------------------------------------ TLS bytes
def _record(content_type: int, body: bytes) -> bytes:
    return struct.pack("!BHH", content_type, 0x0303, len(body)) + body


def _handshake(msg_type: int, body: bytes) -> bytes:
    return struct.pack("!B", msg_type) + len(body).to_bytes(3, "big") + body


def client_hello_suites(data: bytes) -> list[int]:
    """Cipher suites offered in a ClientHello record (best effort; [] if unparsable)."""
    try:
        p = 5 + 4 + 2 + 32
        sid = data[p]
        p += 1 + sid
        n = struct.unpack_from("!H", data, p)[0]
        p += 2
        return [struct.unpack_from("!H", data, p + i)[0] for i in range(0, n, 2)]
    except (IndexError, struct.error):
        return []


def badticket_flight(client_hello: bytes) -> bytes:
    """ServerHello (TLS 1.2, empty session id, session_ticket ext) + bogus NewSessionTicket."""
    suites = [s for s in client_hello_suites(client_hello) if s >> 8 != 0x13 and s not in (0x00FF, 0x5600)]
    suite = suites[0] if suites else 0xC02F
    ext = struct.pack("!HH", 0x0023, 0) + struct.pack("!HHB", 0xFF01, 1, 0)
    sh = struct.pack("!H", 0x0303) + os.urandom(32) + b"\x00" + struct.pack("!HB", suite, 0) \
        + struct.pack("!H", len(ext)) + ext
    nst = struct.pack("!IH", 7200, BADTICKET_CLAIMED_LEN) + os.urandom(BADTICKET_SENT_LEN)
    return _record(0x16, _handshake(2, sh)) + _record(0x16, _handshake(4, nst))


ENDLESS_RECORD = _record(0x16, b"\x00\x00\x00\x00" * 4096)


# ------------------------------------------------------------------------------ QUIC bytes
def _quic_cids(data: bytes) -> tuple[bytes, bytes]:
    """(dcid, scid) of a long-header datagram, or random ones."""
    try:
        if data[0] & 0x80:
            dl = data[5]
            dcid = data[6:6 + dl]
            sl = data[6 + dl]
            scid = data[7 + dl:7 + dl + sl]
            return dcid, scid
    except IndexError:
        pass
    return os.urandom(8), os.urandom(8)


def quicbad_replies(data: bytes) -> list[bytes]:
    dcid, scid = _quic_cids(data)
    # we answer to the client's SCID, from the client's DCID
    head = lambda first, version: bytes([first]) + struct.pack("!I", version) + bytes([len(scid)]) + scid \
        + bytes([len(dcid)]) + dcid  # noqa: E731
    vn_short = head(0x80 | 0x2A, 0) + b"\x00\x00\x00"                         # 3-byte version list
    vn_cidlen = bytes([0x80]) + struct.pack("!I", 0) + b"\xff" + scid           # DCID length 255
    initial = head(0xC0, 1) + b"\x00" + b"\x44\xb0" + os.urandom(20)           # Length 1200, 20 bytes
    retry = head(0xF0, 1) + b"retry-token" + os.urandom(8)                      # tag 8 of 16 bytes
    return [vn_short, vn_cidlen, initial, retry]


# ------------------------------------------------------------------------------ DNS bytes
def dns_reply(query: bytes) -> bytes | None:
    """A hostile reply to ``query`` (None if it is too short to answer)."""
    if len(query) < 12:
        return None
    qid = query[:2]
    p = 12
    labels = []
    try:
        while query[p] != 0:
            n = query[p]
            if n > 63:
                return None
            labels.append(query[p + 1:p + 1 + n])
            p += 1 + n
        p += 5
    except IndexError:
        return None
    question = query[12:p]
    if len(question) < 5:
        return None
    mode = labels[0].decode("ascii", "replace").lower() if labels else "loop"
    if mode == "garbage":
        return os.urandom(GARBAGE_BYTES)
    flags = b"\x84\x00"  # QR, AA, NOERROR
    header = lambda an, i=qid: i + flags + struct.pack("!HHHH", 1, an, 0, 0)  # noqa: E731
    if mode == "wrongid":
        wrong = struct.pack("!H", (struct.unpack("!H", qid)[0] + 1) & 0xFFFF)
        rr = b"\xc0\x0c" + struct.pack("!HHIH", 1, 1, 60, 4) + bytes([198, 18, 30, 53])
        return header(1, wrong) + question + rr
    x = 12 + len(question)  # offset of the answer's owner name
    if mode == "trunc":
        return header(1) + question + b"\xc0\x0c" + struct.pack("!HH", 1, 1) + b"\x00\x00"
    if mode == "self":
        return header(1) + question + struct.pack("!H", 0xC000 | x) + struct.pack("!HHIH", 5, 1, 60, 2) \
            + struct.pack("!H", 0xC000 | x)
    if mode == "forward":
        # owner name -> rdata (offset x+12, a forward pointer) -> owner name
        return header(1) + question + struct.pack("!H", 0xC000 | (x + 12)) + struct.pack("!HHIH", 5, 1, 60, 2) \
            + struct.pack("!H", 0xC000 | x)
    # loop: owner name = label 'a' + a (backward) pointer to itself: a, a, a, ... forever
    return header(1) + question + b"\x01a" + struct.pack("!H", 0xC000 | x) + struct.pack("!HHIH", 1, 1, 60, 4) \
        + bytes([198, 18, 30, 53])


# ------------------------------------------------------------------------------ servers
def _abort_with_rst(writer: asyncio.StreamWriter) -> None:
    sock = writer.get_extra_info("socket")
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    except OSError:
        pass
    writer.transport.abort()


async def _first_bytes(reader: asyncio.StreamReader, timeout: float = 10.0) -> bytes:
    try:
        return await asyncio.wait_for(reader.read(16384), timeout)
    except (asyncio.TimeoutError, ConnectionError, OSError):
        return b""


def _tcp_handler(label: str):
    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            if label == "stall":
                # never read: the client's bytes sit in our receive buffer
                loop = asyncio.get_running_loop()
                deadline = loop.time() + STALL_HOLD
                writer.transport.pause_reading()
                while loop.time() < deadline and not writer.is_closing():
                    await asyncio.sleep(1.0)
            elif label == "endless":
                await _first_bytes(reader)
                loop = asyncio.get_running_loop()
                t0 = loop.time()
                per = len(ENDLESS_RECORD) / ENDLESS_RATE
                while loop.time() - t0 < ENDLESS_MAX_S:
                    writer.write(ENDLESS_RECORD)
                    await writer.drain()
                    await asyncio.sleep(per)
            elif label == "badticket":
                hello = await _first_bytes(reader)
                if hello:
                    writer.write(badticket_flight(hello))
                    await writer.drain()
                    await _first_bytes(reader, 5.0)
            elif label == "reset":
                await _first_bytes(reader)
                _abort_with_rst(writer)
                return
            elif label == "garbage":
                await _first_bytes(reader, 2.0)
                writer.write(os.urandom(GARBAGE_BYTES))
                await writer.drain()
            elif label == "dns":
                while True:
                    n = await asyncio.wait_for(reader.readexactly(2), 10.0)
                    q = await asyncio.wait_for(reader.readexactly(struct.unpack("!H", n)[0]), 10.0)
                    r = dns_reply(q)
                    if r is None:
                        break
                    writer.write(struct.pack("!H", len(r)) + r)
                    await writer.drain()
        except (ConnectionError, OSError, asyncio.TimeoutError, asyncio.IncompleteReadError):
            pass
        finally:
            try:
                writer.close()
            except Exception:
                pass
    return handle


async def _bigcert_handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        await asyncio.wait_for(reader.read(4096), 5.0)
        body = b"bigcert\n"
        writer.write(b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body))
        await writer.drain()
    except (ConnectionError, OSError, asyncio.TimeoutError, ssl.SSLError):
        pass
    finally:
        try:
            writer.close()
        except Exception:
            pass


class _Udp(asyncio.DatagramProtocol):
    def __init__(self, label: str):
        self.label = label
        self.transport = None

    def connection_made(self, transport):
        self.transport = transport

    def datagram_received(self, data: bytes, addr) -> None:
        if self.label == "garbage":
            self.transport.sendto(os.urandom(GARBAGE_BYTES), addr)
        elif self.label == "quicbad":
            for pkt in quicbad_replies(data):
                self.transport.sendto(pkt, addr)
        elif self.label == "dns":
            r = dns_reply(data)
            if r is not None:
                self.transport.sendto(r, addr)
        # stall: silence


def _tcp_sock(addr: str, port: int) -> socket.socket:
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.setsockopt(socket.IPPROTO_IP, 15, 1)  # IP_FREEBIND: addresses come from a local route
    s.bind((addr, port))
    s.listen(4096)
    s.setblocking(False)
    return s


def _udp_sock(addr: str, port: int) -> socket.socket:
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.setsockopt(socket.IPPROTO_IP, 15, 1)
    s.bind((addr, port))
    s.setblocking(False)
    return s


def _local_routes() -> None:
    """Answer the whole prefix in this namespace (like a ``local_ranges`` entry)."""
    import subprocess

    for p in (V4_PREFIX, V6_PREFIX):
        subprocess.run(["ip", "route", "replace", "local", p, "dev", "lo"], check=True)


async def _main(bigcert: tuple[str, str] | None) -> None:
    _local_routes()
    loop = asyncio.get_running_loop()
    servers, transports = [], []
    for h in HOSTILE_HOSTS:
        for port in h.tcp:
            if h.label == "bigcert":
                if not bigcert:
                    continue
                ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
                ctx.minimum_version = ssl.TLSVersion.TLSv1_2
                ctx.load_cert_chain(*bigcert)
                servers.append(await asyncio.start_server(_bigcert_handler, sock=_tcp_sock(h.address, port), ssl=ctx,
                                                          ssl_handshake_timeout=10.0))
            else:
                servers.append(await asyncio.start_server(_tcp_handler(h.label), sock=_tcp_sock(h.address, port)))
        for port in h.udp:
            t, _ = await loop.create_datagram_endpoint(lambda lab=h.label: _Udp(lab), sock=_udp_sock(h.address, port))
            transports.append(t)
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    print(f"hostile: {len(servers)} TCP listeners, {len(transports)} UDP sockets", flush=True)
    await stop.wait()
    for s in servers:
        s.close()
    for t in transports:
        t.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--bigcert", help="PEM chain of the oversized certificate")
    ap.add_argument("--bigkey", help="its key")
    a = ap.parse_args()
    asyncio.run(_main((a.bigcert, a.bigkey) if a.bigcert and Path(a.bigcert).exists() else None))


if __name__ == "__main__":
    main()


def render_hostile(cfg, pki_dir: Path) -> list:
    """Process spec of the hostile server (empty unless config/testbed.toml has a
    ``hostile`` namespace)."""
    import sys

    from .pki import issue_cert
    from .procs import ProcSpec

    if not any(n.name == NAMESPACE for n in cfg.namespaces):
        return []
    cert, key = issue_cert(pki_dir, "bigcert.hostile.test", bigcert_sans())
    return [ProcSpec(name="hostile", namespace=NAMESPACE,
                     argv=[sys.executable, "-m", "testbed.hostile", "--bigcert", str(cert), "--bigkey", str(key)],
                     env={"PYTHONPATH": str(Path(__file__).resolve().parent.parent)},
                     ready_tcp=(by_label("reset").address, 443))]
