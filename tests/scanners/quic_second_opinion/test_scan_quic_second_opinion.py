"""scan quic-second-opinion (issue 24): ngtcp2's client's log read into verdicts (no network:
log lines in the format Debian's gtlsclient 0.12.1 prints, built here byte for byte); bad
input is one line and exit 2. The verdicts against real servers are checked on the QUIC zoo
(tests/testbed/test_zoo_quic.py::test_zoo_table_quic_rows)."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import run_cli


def _dump(data: bytes) -> str:
    """ngtcp2's examples/util.cc hexdump() format."""
    out = []
    for off in range(0, len(data), 16):
        chunk = data[off:off + 16]
        h = " ".join(f"{b:02x}" for b in chunk[:8]) + "  " + " ".join(f"{b:02x}" for b in chunk[8:])
        out.append(f"{off:08x}  {h:<48}  |{''.join(chr(b) if 32 <= b < 127 else '.' for b in chunk)}|")
    out.append(f"{len(data):08x}")
    return "\n".join(out)


def _msg(t: int, body: bytes) -> bytes:
    return bytes([t]) + len(body).to_bytes(3, "big") + body


def _nst(lifetime: int, early) -> bytes:
    ext = b"" if early is None else (42).to_bytes(2, "big") + (4).to_bytes(2, "big") + early.to_bytes(4, "big")
    return _msg(4, lifetime.to_bytes(4, "big") + b"\x01\x02\x03\x04" + b"\x01\x00" + (3).to_bytes(2, "big") + b"tkt"
                + len(ext).to_bytes(2, "big") + ext)


def _log(handshake: list[bytes], app: list[bytes], extra: str = "") -> str:
    return "\n".join([
        "I00000000 0xab pkt tx pkn=0 dcid=0x01 scid=0xab version=0x00000001 type=Initial len=0",
        "Ordered CRYPTO data in Handshake crypto level", _dump(b"".join(handshake)),
        "I00000014 0xab frm rx 1 Handshake CRYPTO(0x06) offset=0 len=161",
        "Negotiated cipher suite is AES-128-GCM", "Negotiated ALPN is h3",
        "I00000024 0xab frm rx 4 1RTT NEW_TOKEN(0x07) token=0xc3ad",
        "I00000024 0xab frm rx 4 1RTT NEW_TOKEN(0x07) token=0xc3ae",
        "I00000024 0xab frm rx 4 1RTT HANDSHAKE_DONE(0x1e)",
        "Ordered CRYPTO data in Application crypto level", _dump(b"".join(app)), extra])


def test_fresh_and_resumed_logs_read(tmp_path):
    from scanners.quic_second_opinion.scanner import parse_fresh, parse_resume, parse_vn, reserved

    sess = tmp_path / "session"
    sess.write_bytes(b"x")
    full = [_msg(8, b"\x00" * 20), _msg(11, b"\x00" * 300), _msg(15, b"\x00" * 70), _msg(20, b"\x00" * 32)]
    log = _log(full, [_nst(21600, 0xFFFFFFFF), _nst(21600, 0xFFFFFFFF)])
    got = {f.fact: f.value for f in parse_fresh(log, sess)}
    assert got == {"retry": "false", "new_token_count": "2", "tickets": "true", "ticket_count": "2",
                   "ticket_lifetime_s": "21600", "ticket_max_early_data": "4294967295"}
    got = {f.fact: f.value for f in parse_fresh(log.replace("type=Initial", "type=Retry").replace(
        "pkt tx", "pkt rx"), tmp_path / "none")}
    assert got["retry"] == "true" and got["tickets"] == "false"
    assert {f.fact: f.value for f in parse_fresh(_log(full, [_nst(7, None)]), sess)}["ticket_max_early_data"] == "none"
    psk = [_msg(8, b"\x00" * 20), _msg(20, b"\x00" * 32)]
    assert {f.fact: f.value for f in parse_resume(_log(psk, [], "I00000000 0xab frm tx 0 0RTT STREAM(0x0b)"))} == \
        {"resumption": "true", "zero_rtt": "true"}
    rej = _log(psk, [], "I00000000 0xab frm tx 0 0RTT STREAM(0x0b)\nEarly data was rejected by server")
    assert {f.fact: f.value for f in parse_resume(rej)} == {"resumption": "true", "zero_rtt": "false"}
    r = {f.fact: (f.value, f.error) for f in parse_resume(_log(full, []))}
    assert r["resumption"] == ("false", None) and r["zero_rtt"][0] is None and "no early data" in r["zero_rtt"][1]
    # a run that never finished its handshake has no verdict
    assert all(f.value is None and f.error.startswith("handshake: ") for f in parse_resume("Sent packet: 40 bytes"))
    vn = "\n".join(f"I00000033 0xbd pkt rx 0 VN v={v}" for v in ("0x0a1a2a3a", "0x00000001", "0xff00001d"))
    assert parse_vn(vn) == [0x0A1A2A3A, 1, 0xFF00001D] and reserved(0x0A1A2A3A) and not reserved(1)
    assert parse_vn("no VN here") is None


@pytest.mark.parametrize("args", [["--target", "198.18.2.10"], ["--target", "x.test=not-an-ip"],
                                  ["--target", "x test=198.18.2.10"], ["--target", "x/../y=198.18.2.10"],
                                  ["--target", "x.test=198.18.2.10", "--timeout", "0"],
                                  ["--target", "x.test=198.18.2.10", "--port", "0"]])
def test_bad_input_is_one_line_exit_2(db, args):
    r = run_cli("scan", "quic-second-opinion", *args, dsn=db.dsn)
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1, r.stderr
    with db.connect() as conn:
        assert conn.execute("SELECT count(*) FROM scan_run WHERE kind = 'quic-second-opinion'").fetchone()[0] == 0


# An aioquic server offering a preferred_address (RFC 9000 9.6) that is not the target: a
# hostile server, or one whose operator opted that address out, moves the client there.
PA_SERVER = r'''
import asyncio, os, sys
import aioquic.quic.connection as qc
from aioquic.asyncio import QuicConnectionProtocol, serve
from aioquic.quic.events import HandshakeCompleted
from aioquic.quic.configuration import QuicConfiguration
from aioquic.quic.packet import QuicPreferredAddress

PA = []

class TP(qc.QuicTransportParameters):
    def __init__(self, **kw):
        super().__init__(**kw)
        if PA:
            self.preferred_address = PA[0]
qc.QuicTransportParameters = TP
plain = qc.QuicConnection._serialize_transport_parameters

def serialize(self):
    if self._is_client:
        return plain(self)
    if not hasattr(self, "_pa"):   # the preferred address's CID has sequence number 1 (RFC 9000 5.1.1)
        self._pa = qc.QuicConnectionId(os.urandom(8), self._host_cid_seq, os.urandom(16), True)
        self._host_cid_seq += 1
        self._host_cids.append(self._pa)
    PA[:] = [QuicPreferredAddress((sys.argv[3], int(sys.argv[2])), None, self._pa.cid, self._pa.stateless_reset_token)]
    try:
        return plain(self)
    finally:
        PA.clear()
qc.QuicConnection._serialize_transport_parameters = serialize

class Closing(QuicConnectionProtocol):   # no HTTP/3: closes 1 s after the handshake, so the client ends
    def quic_event_received(self, event):
        if isinstance(event, HandshakeCompleted):
            asyncio.get_running_loop().call_later(1, lambda: (self._quic.close(), self.transmit()))

async def main():
    cfg = QuicConfiguration(is_client=False, alpn_protocols=["h3"])
    cfg.load_cert_chain(sys.argv[4], sys.argv[5])
    await serve(sys.argv[1], int(sys.argv[2]), configuration=cfg, create_protocol=Closing)
    print("ready", flush=True)
    await asyncio.Future()
asyncio.run(main())
'''

PA_SINK = r'''
import socket, sys
u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); u.bind((sys.argv[1], int(sys.argv[2])))
print("ready", flush=True)
while True:
    u.recvfrom(65535)
    print("datagram", flush=True)
'''

@pytest.mark.skipif(not Path("/usr/bin/gtlsclient").exists(), reason="ngtcp2-client not installed")
def test_quic_second_opinion_never_follows_a_preferred_address(db, tmp_path):
    """ngtcp2's client moves to a server's preferred_address by default (--no-preferred-addr
    turns it off): quic-second-opinion sent datagrams to an address that is no target."""
    if os.geteuid() != 0:
        pytest.skip("needs root (a network namespace)")
    import time

    ns, target, other, port = "nsadv31b-q", "198.18.77.1", "198.18.77.2", 4433
    subprocess.run(["ip", "netns", "del", ns], capture_output=True)
    subprocess.run(["ip", "netns", "add", ns], check=True)
    procs = []
    try:
        for argv in (["link", "set", "lo", "up"], ["link", "add", "d0", "type", "veth", "peer", "name", "d1"],
                     ["link", "set", "d0", "up"], ["link", "set", "d1", "up"],
                     ["addr", "add", f"{target}/32", "dev", "d0"], ["addr", "add", f"{other}/32", "dev", "d0"]):
            subprocess.run(["ip", "-n", ns, *argv], check=True)
        key, cert = tmp_path / "k.pem", tmp_path / "c.pem"
        subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
                        "-keyout", str(key), "-out", str(cert), "-subj", "/CN=pa.test", "-days", "2",
                        "-addext", "subjectAltName=DNS:pa.test"], check=True, capture_output=True)
        server = subprocess.Popen(["ip", "netns", "exec", ns, sys.executable, "-c", PA_SERVER, target, str(port), other,
                                   str(cert), str(key)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        sink = subprocess.Popen(["ip", "netns", "exec", ns, sys.executable, "-c", PA_SINK, other, str(port)],
                                stdout=subprocess.PIPE, text=True)
        procs = [server, sink]
        assert server.stdout.readline().strip() == "ready", server.stderr.read()
        assert sink.stdout.readline().strip() == "ready"
        r = run_cli("scan", "quic-second-opinion", "--target", f"pa.test={target}", "--port", str(port),
                    "--timeout", "3", "--json", dsn=db.dsn, netns=ns, timeout=120)
        assert r.returncode == 0, r.stderr[-2000:]
        time.sleep(1)
        sink.kill()
        datagrams = sink.stdout.read().count("datagram")
        with db.connect() as conn:   # the client did reach the target (the check is not vacuous)
            facts = {f: (v, e) for f, v, e in conn.execute("SELECT fact, value, error FROM quic_second_opinion")}
        assert facts["vn_versions"][0] and facts["new_token_count"][0] is not None, facts
        assert datagrams == 0, f"{datagrams} datagrams to {other}, which is no target"
    finally:
        for p in procs:
            p.kill()
            p.wait()
        subprocess.run(["ip", "netns", "del", ns], capture_output=True)
