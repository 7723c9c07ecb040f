"""Misbehaving UDP "QUIC" servers for tests and the demo (never contacted in a real scan).

``python -m scanners.quic.oddservers --bind ADDRESS`` serves, each on its own UDP port:

* ``vn-only``: answers every long-header packet with a Version Negotiation listing only
  versions no client speaks (:data:`VN_ONLY_VERSIONS`), i.e. a host that never completes a
  handshake;
* ``close``: a real aioquic server whose only ALPN is ``nope``: it closes every handshake
  with CONNECTION_CLOSE 0x178 (TLS alert no_application_protocol);
* ``garbage``: answers every datagram with junk: short random datagrams, a Version
  Negotiation for other connection IDs, a truncated long header.

It prints ``READY vn-only=PORT close=PORT garbage=PORT`` on stdout and runs until killed.
"""
from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import os
import struct
import sys
import tempfile
from pathlib import Path

#: Versions the vn-only server offers (a draft version and a reserved one): no overlap with
#: QUIC v1/v2, so clients fail version negotiation.
VN_ONLY_VERSIONS = (0xFF00001D, 0x0A0A0A0A)
CLOSE_ALPN = "nope"
#: TLS alert no_application_protocol (120) as a QUIC CRYPTO_ERROR.
CLOSE_CODE = 0x100 + 120


class _VnOnly(asyncio.DatagramProtocol):
    def connection_made(self, transport) -> None:
        self.t = transport

    def datagram_received(self, data: bytes, addr) -> None:
        if len(data) < 7 or not data[0] & 0x80:
            return
        dl = data[5]
        dcid = data[6:6 + dl]
        if 6 + dl >= len(data):
            return
        sl = data[6 + dl]
        scid = data[7 + dl:7 + dl + sl]
        vn = bytes([0x80 | 0x2A]) + b"\x00\x00\x00\x00" + bytes([len(scid)]) + scid + bytes([len(dcid)]) + dcid
        self.t.sendto(vn + b"".join(struct.pack("!I", v) for v in VN_ONLY_VERSIONS), addr)


class _Garbage(asyncio.DatagramProtocol):
    def connection_made(self, transport) -> None:
        self.t = transport

    def datagram_received(self, data: bytes, addr) -> None:
        for junk in (os.urandom(1), os.urandom(23), os.urandom(1200),
                     b"\x80\x00\x00\x00\x00\x08" + os.urandom(8) + b"\x08" + os.urandom(8) + b"\x00\x00\x00\x01",
                     b"\xc0\x00\x00\x00\x01\x14"):
            self.t.sendto(junk, addr)


def _self_signed(dir_: Path) -> tuple[str, str]:
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "close.quic.test")])
    now = dt.datetime.now(dt.timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(now - dt.timedelta(days=1))
            .not_valid_after(now + dt.timedelta(days=30))
            .add_extension(x509.SubjectAlternativeName([x509.DNSName("close.quic.test")]), critical=False)
            .sign(key, hashes.SHA256()))
    c, k = dir_ / "cert.pem", dir_ / "key.pem"
    c.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    k.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                    serialization.NoEncryption()))
    return str(c), str(k)


async def serve(bind: str) -> None:
    from aioquic.asyncio import serve as quic_serve
    from aioquic.quic.configuration import QuicConfiguration

    loop = asyncio.get_running_loop()
    ports = {}
    t1, _ = await loop.create_datagram_endpoint(_VnOnly, local_addr=(bind, 0))
    ports["vn-only"] = t1.get_extra_info("sockname")[1]
    t2, _ = await loop.create_datagram_endpoint(_Garbage, local_addr=(bind, 0))
    ports["garbage"] = t2.get_extra_info("sockname")[1]
    with tempfile.TemporaryDirectory() as d:
        cfg = QuicConfiguration(is_client=False, alpn_protocols=[CLOSE_ALPN])
        cfg.load_cert_chain(*_self_signed(Path(d)))
        import socket

        probe = socket.socket(socket.AF_INET6 if ":" in bind else socket.AF_INET, socket.SOCK_DGRAM)
        probe.bind((bind, 0))
        port = probe.getsockname()[1]
        probe.close()
        server = await quic_serve(bind, port, configuration=cfg)
        ports["close"] = port
        print("READY " + " ".join(f"{k}={v}" for k, v in sorted(ports.items())), flush=True)
        try:
            await asyncio.Event().wait()
        finally:
            server.close()


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m scanners.quic.oddservers", description=__doc__.split("\n")[0])
    ap.add_argument("--bind", required=True, help="address to listen on (e.g. the vantage's 198.18.0.1)")
    args = ap.parse_args(argv)
    try:
        asyncio.run(serve(args.bind))
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
