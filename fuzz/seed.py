"""Write the seed inputs of every fuzz target into fuzz/corpus/<target>/seed-*.

Seeds are small well-formed (and a few hostile) inputs built here, plus the hostile
testbed's own replies (testbed/hostile.py), so the fuzzer starts from the formats it must
mutate. Deterministic; run once (``python3 -m fuzz.seed``), the files are kept in the repo.
"""
from __future__ import annotations

import json
import struct

from fuzz.targets import CORPUS_DIR


def _tls_seeds() -> list[bytes]:
    from testbed.hostile import ENDLESS_RECORD, badticket_flight

    sh = struct.pack("!H", 0x0303) + bytes(32) + b"\x20" + bytes(range(32)) + b"\xc0\x2f\x00\x00\x00"
    rec = lambda ct, b: struct.pack("!BHH", ct, 0x0303, len(b)) + b  # noqa: E731
    hs = lambda t, b: bytes([t]) + len(b).to_bytes(3, "big") + b  # noqa: E731
    ticket = bytes(16) + bytes(16) + bytes(64) + bytes(32)
    nst = struct.pack("!IH", 300, len(ticket)) + ticket
    flight = rec(22, hs(2, sh)) + rec(22, hs(4, nst)) + rec(20, b"\x01")
    ch = rec(22, hs(1, struct.pack("!H", 0x0303) + bytes(32) + b"\x00" + b"\x00\x04\xc0\x2f\x13\x01\x01\x00"))
    return [flight, rec(21, b"\x02\x28"), badticket_flight(ch), ENDLESS_RECORD[:200], ch]


def _ticket_seeds() -> list[bytes]:
    t12 = struct.pack("!IH", 7200, 128) + bytes(128)
    t13 = struct.pack("!IIB", 7200, 1234, 8) + bytes(8) + struct.pack("!H", 64) + bytes(64) \
        + struct.pack("!HHHI", 8, 42, 4, 16384)
    return [t12, t13, struct.pack("!IH", 7200, 65535) + bytes(16)]


def _layout_seeds() -> list[bytes]:
    """Two tickets of each family's layout (wire.py's table), as [count][len16 ticket]..."""
    import hashlib

    rnd = lambda tag, n: (hashlib.sha256(tag).digest() * (n // 32 + 1))[:n]  # noqa: E731
    def pack(*ts):
        return bytes([len(ts)]) + b"".join(struct.pack("!H", len(t)) + t for t in ts)
    kn = rnd(b"kn", 16)
    openssl = [kn + rnd(b"iv%d" % i, 16) + rnd(b"c%d" % i, 176) + rnd(b"m%d" % i, 32) for i in range(2)]
    gnutls = [kn + rnd(b"iv%d" % i, 16) + struct.pack("!H", 160) + rnd(b"c%d" % i, 160) + rnd(b"m%d" % i, 20)
              for i in range(2)]
    go = [rnd(b"iv%d" % i, 16) + rnd(b"c%d" % i, 141) + rnd(b"m%d" % i, 32) for i in range(2)]
    jsse = [b"\x12\x34\x56\x78" + rnd(b"iv%d" % i, 16) + rnd(b"c%d" % i, 150) for i in range(2)]
    rustls = [kn + rnd(b"n%d" % i, 12) + rnd(b"c%d" % i, 101) for i in range(2)]
    return [pack(*openssl), pack(*gnutls), pack(*go), pack(*jsse), pack(*rustls), pack(openssl[0]),
            pack(rnd(b"s", 32), rnd(b"t", 32)), pack()]


def _cert_seeds() -> list[bytes]:
    import tempfile
    from pathlib import Path

    from cryptography import x509
    from cryptography.hazmat.primitives.serialization import Encoding

    from testbed.pki import issue_cert

    with tempfile.TemporaryDirectory() as d:
        c, _ = issue_cert(Path(d), "seed.test", ["seed.test", "www.seed.test", "198.18.2.10"])
        return [x509.load_pem_x509_certificate(c.read_bytes()).public_bytes(Encoding.DER)]


def _dns_seeds() -> list[bytes]:
    import dns.message
    import dns.rrset

    from testbed.hostile import dns_reply

    q = dns.message.make_query("www.example.test", "A", use_edns=0)
    r = dns.message.make_response(q)
    r.answer.append(dns.rrset.from_text("www.example.test.", 300, "IN", "A", "198.18.2.10"))
    r.answer.append(dns.rrset.from_text("www.example.test.", 300, "IN", "CNAME", "a.example.test."))
    r.authority.append(dns.rrset.from_text("example.test.", 300, "IN", "NS", "ns.example.test."))
    qe = dns.message.make_query("ecs.example.test", "AAAA", use_edns=0,
                                options=[dns.edns.ECSOption("198.18.0.0", 24)])
    re_ = dns.message.make_response(qe)
    out = [r.to_wire(), re_.to_wire()]
    for mode in ("loop", "forward", "self", "trunc", "wrongid"):
        out.append(dns_reply(dns.message.make_query(f"{mode}.x.test", "A").to_wire()))
    return out


def _quic_seeds() -> list[bytes]:
    from scanners.quic.vn import build_probe
    from testbed.hostile import quicbad_replies

    dcid, scid = bytes(range(8)), bytes(range(8, 16))
    vn = b"\x80" + bytes(4) + bytes([8]) + scid + bytes([8]) + dcid + struct.pack("!II", 1, 0x6B3343CF)
    return [dcid + scid + vn, dcid + scid + build_probe(dcid, scid)[:100]] + \
        [dcid + scid + p for p in quicbad_replies(build_probe(dcid, scid))]


def _tp_seeds() -> list[bytes]:
    from aioquic.buffer import Buffer
    from aioquic.quic.packet import QuicTransportParameters, push_quic_transport_parameters

    b = Buffer(capacity=512)
    push_quic_transport_parameters(b, QuicTransportParameters(
        initial_max_data=1 << 20, initial_max_stream_data_bidi_local=1 << 18, max_idle_timeout=30000,
        active_connection_id_limit=8, original_destination_connection_id=bytes(8)))
    return [b.data]


def _zgrab_seeds() -> list[bytes]:
    import base64

    ok = {"ip": "198.18.2.13", "domain": "tls12.example.test", "data": {"tls": {"status": "success", "result": {
        "handshake_log": {"server_hello": {"version": {"name": "TLSv1.2"}, "cipher_suite": {"name": "x"},
                                           "session_id": base64.b64encode(bytes(32)).decode()},
                          "session_ticket": {"value": base64.b64encode(bytes(160)).decode(), "length": 160,
                                             "lifetime_hint": 120},
                          "server_certificates": {"certificate": {"raw": base64.b64encode(b"cert").decode(),
                                                                  "parsed": {"issuer_dn": "CN=x"}}}}}}}}
    bad = {"ip": "198.18.30.2", "data": {"tls": {"status": "io-timeout", "error": "read timeout"}}}
    return [(json.dumps(ok) + "\n" + json.dumps(bad) + "\n").encode()]


def _atlas_seeds() -> list[bytes]:
    from pathlib import Path

    out = []
    fx = Path(__file__).resolve().parent.parent / "testbed" / "atlas_fixtures"
    dns_r = {"msm_id": 1, "prb_id": 2, "timestamp": 1700000000, "type": "dns", "af": 4, "from": "198.18.110.1", "fw": 5080,
             "resultset": [{"af": 4, "dst_addr": "198.18.110.53", "src_addr": "198.18.110.1", "subid": 1,
                            "result": {"rt": 12.5, "ANCOUNT": 1, "abuf": "AAGBgAABAAEAAAAAA3d3dwdleGFtcGxlBHRlc3QAAAEAAcAMAAEAAQAAASwABMYSAgo="}},
                           {"af": 4, "dst_addr": "10.0.0.1", "error": {"timeout": 5000}, "subid": 2}]}
    ping = {"msm_id": 3, "prb_id": 2, "timestamp": 1700000000, "type": "ping", "af": 4, "dst_addr": "198.18.110.53",
            "dst_name": "198.18.110.53", "from": "198.18.110.1", "fw": 5080, "proto": "ICMP", "sent": 3, "rcvd": 2,
            "avg": 10.0, "min": 9.0, "max": 11.0, "result": [{"rtt": 9.0}, {"rtt": 11.0}, {"x": "*"}]}
    out += [b"\x00" + json.dumps(dns_r).encode(), b"\x01" + json.dumps(ping).encode()]
    for p in sorted(fx.rglob("*.json"))[:4] if fx.exists() else []:
        if p.stat().st_size < 4000:
            out.append(b"\x00" + p.read_bytes())
    return out

def _token_seeds() -> list[bytes]:
    """[family byte][count][len16 token]...: each layout scanners/quic/tokens.py knows, twice,
    a mix, and an unknown one (issue 24)."""
    import hashlib

    rnd = lambda tag, n: (hashlib.sha256(tag).digest() * (n // 32 + 1))[:n]  # noqa: E731

    def pack(fam, *ts):
        return bytes([fam, len(ts)]) + b"".join(struct.pack("!H", len(t)) + t for t in ts)
    ng = [b"\x36" + rnd(b"ng%d" % i, 56) for i in range(2)]
    ours = [b"\x01\x00\x00\x00\x07" + rnd(b"o%d" % i, 40) for i in range(2)]
    qg4 = [rnd(b"q%d" % i, 91) for i in range(2)]
    qg6 = [rnd(b"q6%d" % i, 103) for i in range(2)]
    return [pack(0, *ng), pack(1, *ours), pack(1, *qg4), pack(2, *qg6), pack(0, b"\xb6" + rnd(b"r", 77)),
            pack(2, ng[0], ours[0]), pack(1, rnd(b"u", 95)), pack(0)]


SEEDS = {
    "tfo_options": lambda: [b"\x02\x04\x05\xb4\x04\x02\x08\x0a" + bytes(8) + b"\x01\x03\x03\x07\x22\x0a" + bytes(8),
                            b"\xfe\x0c\xf9\x89" + bytes(8), b"\x22\x02", b"\x22\x01", b"\x22\x28" + bytes(10)],
    "tls_records": _tls_seeds,
    "tls_ticket": _ticket_seeds,
    "tls_ticket_layout": _layout_seeds,
    "quic_token_layout": _token_seeds,
    "tls_certificate": _cert_seeds,
    "dns_reply": _dns_seeds,
    "quic_version_negotiation": _quic_seeds,
    "quic_packet_header": lambda: [s[16:] for s in _quic_seeds()],
    "quic_transport_parameters": _tp_seeds,
    "zgrab_json": _zgrab_seeds,
    "atlas_result_json": _atlas_seeds,
    "target_list": lambda: [b"rank,domain\n1,example.test\n2,www.example.test.\n3,B\xc3\xbccher.test\n#x\n\n4,bad name\n",
                            b"1,a.test\n1,a.test\n0,x.test\nfoo\n"],
    "survey_config": lambda: [b'[database]\ndsn = "postgresql:///x"\n[etiquette]\nallow = ["198.18.0.0/15"]\n'
                              b'block = ["198.18.30.0/24"]\nrate_pps = 1000\n',
                              b"[etiquette]\nallow = [\"not-a-net\"]\n"],
    "testbed_config": lambda: [(CORPUS_DIR.parent.parent / "config" / "testbed.toml").read_bytes()[:4000],
                               b'[[namespace]]\nname = "x"\nprefixes = ["198.18.40.0/24"]\n'],
    "blocklist_file": lambda: [b"# c\n198.18.30.0/24\n2001:2::/48 # x\n\n10.0.0.1\n", b"nonsense\n"],
}


def main() -> None:
    for name, make in SEEDS.items():
        d = CORPUS_DIR / name
        d.mkdir(parents=True, exist_ok=True)
        for i, data in enumerate(make()):
            (d / f"seed-{i:02d}").write_bytes(data)
        print(f"{name}: {len(list(d.iterdir()))} files")


if __name__ == "__main__":
    main()
