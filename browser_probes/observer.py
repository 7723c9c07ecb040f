"""Server-side observer of what browsers present: a raw AF_PACKET socket in the namespace
of the servers (the testbed's web namespace) that reassembles the start of each TCP
connection to the watched addresses and prints one JSON line per connection:

* the SYN's TCP Fast Open option (kind 34, or 254 with magic 0xF989): the cookie, and the
  cookie the server's SYN-ACK issued;
* the ClientHello: SNI, legacy session ID, SessionTicket extension, TLS 1.3
  pre_shared_key identities;
* the server's cleartext flight: ServerHello (version, session ID, selected PSK) and, for
  TLS 1.2, the NewSessionTicket (ticket and lifetime hint);
* ``handshake_rtt_ms``: the round trip seen from the server, the kernel's capture time of the
  server's SYN-ACK to that of the client's next segment (the ACK, or data): the path's RTT
  as the server side observes it, whatever the client's profile claims (issue 25: the
  delay a tracking experiment ran under, observed from outside the client).

Run (root): ``ip netns exec nstb-web python3 -m browser_probes.observer --address 198.18.2.60``.
Prints ``READY`` once capturing. Lines are flushed ``--linger`` seconds after the
ClientHello (or when the server's cleartext flight is complete).
"""
from __future__ import annotations

import argparse
import json
import select
import socket
import struct
import time
from dataclasses import dataclass, field
from typing import Optional

ETH_P_ALL = 0x0003
SO_TIMESTAMPNS = getattr(socket, "SO_TIMESTAMPNS", 35)   # Linux; no constant in Python 3.11
MAX_STREAM = 65536


def parse_tcp_options(opts: bytes) -> Optional[bytes]:
    """The TFO cookie in TCP options (b'' = cookie request), None if no TFO option."""
    i = 0
    while i < len(opts):
        kind = opts[i]
        if kind == 0:
            break
        if kind == 1:
            i += 1
            continue
        if i + 1 >= len(opts):
            break
        ln = opts[i + 1]
        if ln < 2:
            break
        body = opts[i + 2:i + ln]
        if kind == 34:
            return bytes(body)
        if kind == 254 and body[:2] == b"\xf9\x89":
            return bytes(body[2:])
        i += ln
    return None


def _records(stream: bytes) -> tuple[list[tuple[int, bytes]], bool]:
    """Complete TLS records at the start of ``stream`` and whether a CCS/app-data record
    (end of the cleartext part) was reached."""
    out, i, end = [], 0, False
    while i + 5 <= len(stream):
        ctype, ln = stream[i], struct.unpack("!H", stream[i + 3:i + 5])[0]
        if i + 5 + ln > len(stream):
            break
        out.append((ctype, stream[i + 5:i + 5 + ln]))
        i += 5 + ln
        if ctype in (20, 23):
            end = True
            break
    return out, end


def _handshake_messages(records: list[tuple[int, bytes]]) -> list[tuple[int, bytes]]:
    buf = b"".join(body for ctype, body in records if ctype == 22)
    msgs, i = [], 0
    while i + 4 <= len(buf):
        t, ln = buf[i], int.from_bytes(buf[i + 1:i + 4], "big")
        if i + 4 + ln > len(buf):
            break
        msgs.append((t, buf[i + 4:i + 4 + ln]))
        i += 4 + ln
    return msgs


def _extensions(data: bytes, i: int) -> dict[int, bytes]:
    exts: dict[int, bytes] = {}
    if i + 2 > len(data):
        return exts
    total = struct.unpack("!H", data[i:i + 2])[0]
    i += 2
    end = min(len(data), i + total)
    while i + 4 <= end:
        t, ln = struct.unpack("!HH", data[i:i + 4])
        exts[t] = data[i + 4:i + 4 + ln]
        i += 4 + ln
    return exts


def _grease(v: int) -> bool:
    return (v & 0x0F0F) == 0x0A0A


# extensions whose presence depends on resumption state / padding, not on the client software
_STATE_EXTENSIONS = {21, 35, 41, 42}


def client_fingerprint(ciphers: list[int], exts: dict[int, bytes]) -> str:
    """Which TLS client software sent a ClientHello: cipher suites in order and the set of
    extension types, without GREASE values and without the resumption-dependent extensions
    (padding, session_ticket, pre_shared_key, early_data); extension order is ignored
    (Chromium permutes it)."""
    et = sorted(t for t in exts if not _grease(t) and t not in _STATE_EXTENSIONS)
    return ",".join(f"{c:x}" for c in ciphers) + "|" + ",".join(map(str, et))


def parse_client_hello(body: bytes) -> dict:
    """SNI, session ID, SessionTicket and PSK identities of a ClientHello body."""
    i = 2 + 32
    sid_len = body[i]
    sid = body[i + 1:i + 1 + sid_len]
    i += 1 + sid_len
    cs_len = struct.unpack("!H", body[i:i + 2])[0]
    ciphers = [c for (c,) in struct.iter_unpack("!H", body[i + 2:i + 2 + cs_len]) if not _grease(c)]
    i += 2 + cs_len
    i += 1 + body[i]
    exts = _extensions(body, i)
    out: dict = {"session_id": sid.hex() or None, "ticket": None, "psk_identities": None, "psk_identity": None,
                 "sni": None, "fingerprint": client_fingerprint(ciphers, exts)}
    if 0 in exts and len(exts[0]) > 5:
        n = struct.unpack("!H", exts[0][3:5])[0]
        out["sni"] = exts[0][5:5 + n].decode("ascii", "replace")
    if 35 in exts:
        out["ticket"] = exts[35].hex()
    if 41 in exts:
        psk = exts[41]
        ids_len = struct.unpack("!H", psk[0:2])[0]
        j, ids = 2, []
        while j < 2 + ids_len:
            ln = struct.unpack("!H", psk[j:j + 2])[0]
            ids.append(psk[j + 2:j + 2 + ln])
            j += 2 + ln + 4
        out["psk_identities"] = len(ids)
        out["psk_identity"] = ids[0].hex() if ids else None
    return out


def parse_server_flight(msgs: list[tuple[int, bytes]]) -> dict:
    out: dict = {"server_version": None, "server_session_id": None, "server_accepted_psk": None,
                 "issued_ticket": None, "issued_ticket_lifetime_s": None}
    for t, body in msgs:
        if t == 2 and out["server_version"] is None:
            i = 2 + 32
            sid_len = body[i]
            out["server_session_id"] = body[i + 1:i + 1 + sid_len].hex() or None
            i += 1 + sid_len + 2 + 1
            exts = _extensions(body, i)
            ver = "1.2"
            if 43 in exts and exts[43] == b"\x03\x04":
                ver = "1.3"
            out["server_version"] = ver
            out["server_accepted_psk"] = (41 in exts) if ver == "1.3" else None
        elif t == 4 and len(body) >= 6:   # TLS 1.2 NewSessionTicket (cleartext)
            out["issued_ticket_lifetime_s"] = struct.unpack("!I", body[0:4])[0]
            ln = struct.unpack("!H", body[4:6])[0]
            out["issued_ticket"] = body[6:6 + ln].hex()
    return out


@dataclass
class _Flow:
    client: str
    cport: int
    server: str
    first_seen: float
    tfo_cookie: Optional[str] = None
    issued_tfo_cookie: Optional[str] = None
    syn_seen: bool = False
    c_isn: Optional[int] = None
    s_isn: Optional[int] = None
    c_data: dict = field(default_factory=dict)   # offset -> bytes
    s_data: dict = field(default_factory=dict)
    hello_at: Optional[float] = None
    done: bool = False
    synack_at: Optional[float] = None   # kernel capture time of the server's first SYN-ACK
    ack_at: Optional[float] = None      # ... of the client's first segment after it


def _assemble(chunks: dict) -> bytes:
    out = bytearray()
    for off in sorted(chunks):
        if off > len(out):
            break
        piece = chunks[off]
        if off + len(piece) > len(out):
            out += piece[len(out) - off:]
    return bytes(out)


class Observer:
    """Captures on every interface of the current namespace; ``poll`` returns finished
    connection records."""

    def __init__(self, addresses: set[str], port: int = 443, linger: float = 1.0):
        self.addresses, self.port, self.linger = addresses, port, linger
        self.sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 << 20)
        # kernel capture timestamps: a batch of packets read after select() would otherwise
        # share one userspace time, and the handshake RTT (below) needs each packet's own
        self.sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
        self.flows: dict[tuple, _Flow] = {}

    def _packet(self, pkt: bytes, outgoing: bool, at: Optional[float] = None) -> None:
        at = time.time() if at is None else at
        if len(pkt) < 14 + 20:
            return
        et = pkt[12:14]
        ip = pkt[14:]
        if et == b"\x08\x00":
            ihl = (ip[0] & 0x0F) * 4
            if ip[9] != 6:
                return
            total = struct.unpack("!H", ip[2:4])[0] or len(ip)
            src, dst = socket.inet_ntoa(ip[12:16]), socket.inet_ntoa(ip[16:20])
            tcp = ip[ihl:total]
        elif et == b"\x86\xdd" and len(ip) >= 40:   # IPv6 without extension headers
            if ip[6] != 6:
                return
            total = 40 + struct.unpack("!H", ip[4:6])[0]
            src, dst = socket.inet_ntop(socket.AF_INET6, ip[8:24]), socket.inet_ntop(socket.AF_INET6, ip[24:40])
            tcp = ip[40:total]
        else:
            return
        if len(tcp) < 20:
            return
        sport, dport, seq = struct.unpack("!HHI", tcp[0:8])
        off = (tcp[12] >> 4) * 4
        flags = tcp[13]
        payload = tcp[off:]
        if dst in self.addresses and dport == self.port:
            key, to_server = (src, sport, dst), True
        elif src in self.addresses and sport == self.port:
            key, to_server = (dst, dport, src), False
        else:
            return
        syn = bool(flags & 0x02)
        f = self.flows.get(key)
        if syn and to_server:
            f = _Flow(key[0], key[1], key[2], time.time())
            f.syn_seen = True
            f.c_isn = seq
            c = parse_tcp_options(tcp[20:off])
            f.tfo_cookie = None if c is None else c.hex()
            self.flows[key] = f
            if payload:
                f.c_data[0] = payload
            return
        if f is None or f.done:
            return
        if not syn and to_server and f.synack_at is not None and f.ack_at is None:
            f.ack_at = at
        if syn and not to_server:
            if f.synack_at is None:
                f.synack_at = at
            f.s_isn = seq
            c = parse_tcp_options(tcp[20:off])
            f.issued_tfo_cookie = c.hex() if c else None
            return
        if not payload:
            return
        if to_server and f.c_isn is not None:
            o = (seq - f.c_isn - 1) % (1 << 32)
            if o < MAX_STREAM:
                f.c_data.setdefault(o, payload)
        elif not to_server and f.s_isn is not None:
            o = (seq - f.s_isn - 1) % (1 << 32)
            if o < MAX_STREAM:
                f.s_data.setdefault(o, payload)

    def _record(self, f: _Flow, force: bool) -> Optional[dict]:
        crec, _ = _records(_assemble(f.c_data))
        cmsgs = _handshake_messages(crec)
        if not cmsgs or cmsgs[0][0] != 1:
            return None
        if f.hello_at is None:
            f.hello_at = time.time()
        srec, s_end = _records(_assemble(f.s_data))
        if not (s_end or force):
            return None
        rec = {"ts": f.hello_at, "server": f.server, "client": f.client, "client_port": f.cport,
               "tfo_cookie": f.tfo_cookie, "issued_tfo_cookie": f.issued_tfo_cookie,
               "handshake_rtt_ms": None if f.synack_at is None or f.ack_at is None
               else round((f.ack_at - f.synack_at) * 1000, 3)}
        try:
            rec.update(parse_client_hello(cmsgs[0][1]))
            rec.update(parse_server_flight(_handshake_messages(srec)))
        except (IndexError, struct.error) as exc:
            rec["parse_error"] = str(exc)
        return rec

    def poll(self, timeout: float) -> list[dict]:
        out = []
        r, _, _ = select.select([self.sock], [], [], timeout)
        while r:
            try:
                pkt, anc, _, addr = self.sock.recvmsg(262144, socket.CMSG_SPACE(16), socket.MSG_DONTWAIT)
            except BlockingIOError:
                break
            at = None
            for level, kind, data in anc:
                if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPNS and len(data) >= 16:
                    sec, nsec = struct.unpack("qq", data[:16])
                    at = sec + nsec / 1e9
            self._packet(pkt, addr[2] == socket.PACKET_OUTGOING, at)
        now = time.time()
        for key, f in list(self.flows.items()):
            if f.done:
                if now - f.first_seen > 120:
                    del self.flows[key]
                continue
            rec = self._record(f, force=f.hello_at is not None and now - f.hello_at > self.linger)
            if rec is not None:
                f.done = True
                f.c_data.clear()
                f.s_data.clear()
                out.append(rec)
            elif now - f.first_seen > 30:
                del self.flows[key]
        return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--address", action="append", required=True, help="server address to watch (repeat)")
    ap.add_argument("--port", type=int, default=443)
    ap.add_argument("--linger", type=float, default=1.0, help="s to wait for the server flight")
    a = ap.parse_args()
    obs = Observer(set(a.address), a.port, a.linger)
    print("READY", flush=True)
    try:
        while True:
            for rec in obs.poll(0.1):
                print(json.dumps(rec), flush=True)
    except (KeyboardInterrupt, BrokenPipeError):
        pass


if __name__ == "__main__":
    main()
