"""scan quic-second-opinion (issue 24): ngtcp2's client's log read into verdicts (no network:
log lines in the format Debian's gtlsclient 0.12.1 prints, built here byte for byte); bad
input is one line and exit 2. The verdicts against real servers are checked on the QUIC zoo
(tests/test_zoo_quic.py::test_zoo_table_quic_rows)."""
from __future__ import annotations

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
