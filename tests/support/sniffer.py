"""Record every IP packet that leaves a network interface (used by tests/promises/test_promises.py).

Run as root inside the namespace to watch, e.g. in the testbed's vantage::

    ip netns exec nstb-vantage python3 tests/support/sniffer.py --out pkts.jsonl [--iface tbbr0]

(On a TUN device, such as the timing testbed's tmv0, frames carry no link header: they are
read as the IP packets they are.)

An AF_PACKET socket (ETH_P_ALL) bound to the interface keeps only frames the kernel marks
PACKET_OUTGOING, i.e. what this namespace sent (raw-socket frames included, as a scanner
that builds its own SYNs sends them); with ``--incoming``, frames marked PACKET_HOST, i.e. what
this namespace received. Each IPv4/IPv6 packet becomes one JSON line:

    {"t": kernel receive time (s, SO_TIMESTAMPNS), "src", "dst", "proto": "tcp"|"udp"|"icmp"|
     "icmp6"|<number>, "sport", "dport", "syn": SYN without ACK, "synack": SYN+ACK (run in a
     server's namespace, it counts the connections the server accepted), "quic_initial": UDP payload
     is a QUIC long-header Initial, "dns_id": DNS query id (UDP to port 53, QR=0), "len"}

The first line on stdout is "ready" once the socket is bound; on SIGTERM/SIGINT (or after
--seconds) the file is flushed and the last stdout line is
``{"packets": N, "kernel_drops": D}`` (PACKET_STATISTICS), so a test can tell a quiet
command from a sniffer that missed packets.
"""
from __future__ import annotations

import argparse
import json
import signal
import socket
import struct
import sys
import time

ETH_P_ALL = 0x0003
PACKET_OUTGOING = 4
PACKET_HOST = 0        # addressed to this host (received)
ARPHRD_NONE = 0xFFFE   # hardware type of a TUN device: frames are IP packets without a link header
SOL_PACKET = 263
PACKET_STATISTICS = 6
SO_TIMESTAMPNS = 35
PROTOS = {6: "tcp", 17: "udp", 1: "icmp", 58: "icmp6"}


def parse(frame: bytes) -> dict | None:
    """One Ethernet frame -> the packet's summary, or None when it is not IP."""
    etype = frame[12:14]
    if etype == b"\x81\x00":          # 802.1Q tag
        frame = frame[4:]
        etype = frame[12:14]
    ip = frame[14:]
    if etype == b"\x08\x00" and len(ip) >= 20:
        ihl = (ip[0] & 15) * 4
        proto = ip[9]
        src, dst = socket.inet_ntop(socket.AF_INET, ip[12:16]), socket.inet_ntop(socket.AF_INET, ip[16:20])
        l4 = ip[ihl:]
    elif etype == b"\x86\xdd" and len(ip) >= 40:
        proto = ip[6]
        src, dst = socket.inet_ntop(socket.AF_INET6, ip[8:24]), socket.inet_ntop(socket.AF_INET6, ip[24:40])
        l4 = ip[40:]
        # skip the common extension headers (hop-by-hop, routing, destination options)
        while proto in (0, 43, 60) and len(l4) >= 8:
            proto, l4 = l4[0], l4[(l4[1] + 1) * 8:]
    else:
        return None
    rec = {"src": src, "dst": dst, "proto": PROTOS.get(proto, proto), "len": len(ip)}
    if proto in (6, 17) and len(l4) >= 4:
        rec["sport"], rec["dport"] = struct.unpack(">HH", l4[:4])
    if proto == 6 and len(l4) >= 14:
        flags = l4[13]
        rec["syn"] = bool(flags & 0x02) and not flags & 0x10
        rec["synack"] = flags & 0x12 == 0x12      # what a server sends per accepted connection attempt
    elif proto == 17 and len(l4) >= 9:
        payload = l4[8:]
        # QUIC long header, Initial packet type (v1: type bits 00; v2: 01), version != 0 (not VN)
        if payload and payload[0] & 0xC0 == 0xC0 and len(payload) >= 5 and payload[1:5] != b"\0\0\0\0":
            version = payload[1:5]
            ptype = (payload[0] & 0x30) >> 4
            rec["quic_initial"] = ptype == (1 if version == b"\x6b\x33\x43\xcf" else 0)
        if rec.get("dport") == 53 and len(payload) >= 12 and not payload[2] & 0x80:
            rec["dns_id"] = struct.unpack(">H", payload[:2])[0]
    elif proto == 58 and len(l4) >= 1:
        rec["icmp_type"] = l4[0]
    return rec


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, help="JSON-lines file to write")
    ap.add_argument("--iface", default="tbbr0", help="interface to watch (default: the testbed bridge)")
    ap.add_argument("--seconds", type=float, default=600, help="stop after this long at the latest")
    ap.add_argument("--incoming", action="store_true", help="record what this namespace receives (PACKET_HOST) "
                    "instead of what it sends: in a server's namespace, the packets that reach the server")
    a = ap.parse_args(argv)

    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
    try:
        s.setsockopt(socket.SOL_SOCKET, 33, 64 << 20)   # SO_RCVBUFFORCE (root)
    except OSError:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 << 20)
    s.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
    s.bind((a.iface, ETH_P_ALL))
    s.settimeout(0.1)
    stop = False

    def on_signal(*_):
        nonlocal stop
        stop = True

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    n = 0
    end = time.time() + a.seconds
    with open(a.out, "w", buffering=1) as out:   # line-buffered: tests read it while it runs
        print("ready", flush=True)
        while not stop and time.time() < end:
            try:
                frame, anc, _flags, addr = s.recvmsg(65536, 64)
            except socket.timeout:
                continue
            except InterruptedError:
                continue
            if addr[2] != (PACKET_HOST if a.incoming else PACKET_OUTGOING):
                continue
            if addr[3] == ARPHRD_NONE and frame:   # a TUN device (the timing testbed): bare IP packets
                frame = bytes(12) + (b"\x08\x00" if frame[0] >> 4 == 4 else b"\x86\xdd") + frame
            rec = parse(frame)
            if rec is None:
                continue
            t = time.time()
            for level, kind, data in anc:
                if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPNS and len(data) >= 16:
                    sec, nsec = struct.unpack("qq", data[:16])
                    t = sec + nsec / 1e9
            rec["t"] = round(t, 6)
            out.write(json.dumps(rec) + "\n")
            n += 1
        out.flush()
    try:
        _packets, drops = struct.unpack("II", s.getsockopt(SOL_PACKET, PACKET_STATISTICS, 8))
    except OSError:
        drops = -1
    print(json.dumps({"packets": n, "kernel_drops": drops}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
