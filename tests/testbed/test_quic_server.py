"""testbed.quic_server against aioquic's client, on loopback only (127.0.0.1 and ::1).

Each server runs as a real subprocess (``python -m testbed.quic_server --config``); the tests
compare what the client measures (NEW_TOKEN tokens, ticket bytes and lifetimes, Retry,
resumption, 0-RTT) and the server's JSON log with the configured values.
"""
from __future__ import annotations

import asyncio
import dataclasses
import datetime
import ipaddress
import json
import math
import os
import socket
import ssl
import struct
import subprocess
import sys
import time
from pathlib import Path

import pytest
from aioquic.asyncio import connect
from aioquic.asyncio.protocol import QuicConnectionProtocol
from aioquic.h3.connection import H3_ALPN, H3Connection
from aioquic.h3.events import DataReceived, HeadersReceived
from aioquic.quic.configuration import QuicConfiguration
from aioquic.quic.events import HandshakeCompleted
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.hkdf import HKDF
from cryptography.x509.oid import NameOID

from conftest import REPO

if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from testbed.model import QuicHost  # noqa: E402
from testbed.quic_server import build_config_json  # noqa: E402

pytestmark = pytest.mark.timeout(120)

HOSTNAME = "quic.example.test"
SECRET = "5eed" * 8
MAX_EARLY_DATA = 0xFFFFFFFF
#: Server policies under test; rotation periods and ages in seconds.
PLAIN = dict(retry=False, issue_tokens=True, token_max_age=3, token_key_rotation=2,
             ticket_lifetime=30, ticket_key_rotation=2, early_data=True)
RETRY = dict(retry=True, issue_tokens=True, token_max_age=2, token_key_rotation=0,
             ticket_lifetime=3, ticket_key_rotation=0, early_data=False)
NO_TOKENS = dict(retry=False, issue_tokens=False, token_max_age=600, token_key_rotation=0,
                 ticket_lifetime=3600, ticket_key_rotation=0, early_data=True)


# --------------------------------------------------------------------------- fixtures


@pytest.fixture(scope="module")
def cert(tmp_path_factory) -> tuple[Path, Path]:
    """A self-signed ECDSA certificate for HOSTNAME: (certfile, keyfile)."""
    d = tmp_path_factory.mktemp("quic-cert")
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, HOSTNAME)])
    now = datetime.datetime.now(datetime.timezone.utc)
    crt = (x509.CertificateBuilder().subject_name(name).issuer_name(name)
           .public_key(key.public_key()).serial_number(x509.random_serial_number())
           .not_valid_before(now - datetime.timedelta(days=1))
           .not_valid_after(now + datetime.timedelta(days=2))
           .add_extension(x509.SubjectAlternativeName([x509.DNSName(HOSTNAME)]), critical=False)
           .sign(key, hashes.SHA256()))
    (d / "cert.pem").write_bytes(crt.public_bytes(serialization.Encoding.PEM))
    (d / "key.pem").write_bytes(key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption()))
    return d / "cert.pem", d / "key.pem"


def _free_udp_port() -> int:
    """A UDP port free on both 127.0.0.1 and ::1."""
    for _ in range(50):
        s4 = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        s4.bind(("127.0.0.1", 0))
        port = s4.getsockname()[1]
        s6 = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
        try:
            s6.bind(("::1", port))
            return port
        except OSError:
            continue
        finally:
            s4.close()
            s6.close()
    raise RuntimeError("no free UDP port")


class Server:
    """A running quic_server subprocess; ``policy`` holds its configured values."""

    def __init__(self, proc: subprocess.Popen, port: int, log: Path, policy: dict):
        self.proc, self.port, self.log, self.policy = proc, port, log, policy

    def events(self, event: str | None = None, **match) -> list[dict]:
        out = []
        for line in self.log.read_text().splitlines():
            rec = json.loads(line)
            if (event is None or rec["event"] == event) and all(rec.get(k) == v for k, v in match.items()):
                out.append(rec)
        return out

    def one(self, event: str, **match) -> dict:
        recs = self.events(event, **match)
        assert len(recs) == 1, f"expected one {event} {match}, got {recs}"
        return recs[0]


def _start_server(tmp: Path, cert, policy: dict) -> Server:
    port = _free_udp_port()
    host = QuicHost(hostname=HOSTNAME, addresses=["127.0.0.1", "::1"], port=port, **policy)
    cfg = build_config_json(host, cert[0], cert[1], SECRET, tmp / "quic.log")
    (tmp / "quic.json").write_text(json.dumps(cfg))
    proc = subprocess.Popen([sys.executable, "-m", "testbed.quic_server", "--config", str(tmp / "quic.json")],
                            cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    server = Server(proc, port, tmp / "quic.log", policy)
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"server exited {proc.returncode}: {proc.stdout.read().decode()}")
        if server.log.exists() and server.events("started", pid=proc.pid):
            return server
        time.sleep(0.05)
    proc.kill()
    raise AssertionError("server did not start within 15 s")


def _stop_server(server: Server) -> None:
    server.proc.terminate()
    try:
        rc = server.proc.wait(10)
    except subprocess.TimeoutExpired:
        server.proc.kill()
        server.proc.wait(5)
        raise AssertionError("server ignored SIGTERM") from None
    assert rc == 0, server.proc.stdout.read().decode()
    assert server.events("stopped", pid=server.proc.pid)


def _server_fixture(policy):
    @pytest.fixture(scope="module")
    def fixture(tmp_path_factory, cert):
        server = _start_server(tmp_path_factory.mktemp("quic"), cert, policy)
        yield server
        _stop_server(server)
    return fixture


plain_server = _server_fixture(PLAIN)
retry_server = _server_fixture(RETRY)
notoken_server = _server_fixture(NO_TOKENS)


# --------------------------------------------------------------------------- client


class _Client(QuicConnectionProtocol):
    """aioquic client protocol doing HTTP/3 GETs and timing HandshakeCompleted."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.h3 = H3Connection(self._quic)
        self.handshake: HandshakeCompleted | None = None
        self.handshake_at: float | None = None
        self._responses: dict[int, dict] = {}
        self._waiters: dict[int, asyncio.Future] = {}

    def quic_event_received(self, event) -> None:
        if isinstance(event, HandshakeCompleted):
            self.handshake, self.handshake_at = event, time.monotonic()
        for ev in self.h3.handle_event(event):
            if isinstance(ev, (HeadersReceived, DataReceived)):
                r = self._responses.setdefault(ev.stream_id, {"headers": {}, "body": b""})
                if isinstance(ev, HeadersReceived):
                    r["headers"].update(ev.headers)
                else:
                    r["body"] += ev.data
                if ev.stream_ended and ev.stream_id in self._waiters:
                    self._waiters.pop(ev.stream_id).set_result(r)

    def send_get(self, path: str = "/") -> asyncio.Future:
        sid = self._quic.get_next_available_stream_id()
        self.h3.send_headers(sid, [(b":method", b"GET"), (b":scheme", b"https"),
                                   (b":authority", HOSTNAME.encode()), (b":path", path.encode())],
                             end_stream=True)
        fut = asyncio.get_running_loop().create_future()
        self._waiters[sid] = fut
        self.transmit()
        return fut


@dataclasses.dataclass
class Visit:
    """What one client connection measured."""

    status: int | None
    headers: dict
    body: bytes
    tokens: list[tuple[float, bytes]]   # (monotonic time, token)
    tickets: list
    session_resumed: bool
    early_data_accepted: bool
    retried: bool
    handshake_at: float
    client_port: int


def _visit(server: Server, addr: str = "127.0.0.1", *, ticket=None, token: bytes = b"",
           early: bool = False, wait_token: float = 1.0, want_response: bool = True) -> Visit:
    """Connect, GET /, then wait up to ``wait_token`` s for a NEW_TOKEN (s)."""
    return asyncio.run(_avisit(server, addr, ticket, token, early, wait_token, want_response))


async def _avisit(server, addr, ticket, token, early, wait_token, want_response) -> Visit:
    tokens: list = []
    tickets: list = []
    cfg = QuicConfiguration(is_client=True, alpn_protocols=H3_ALPN, verify_mode=ssl.CERT_NONE,
                            server_name=HOSTNAME, session_ticket=ticket, token=token)
    async with connect(addr, server.port, configuration=cfg, create_protocol=_Client,
                       session_ticket_handler=tickets.append,
                       token_handler=lambda t: tokens.append((time.monotonic(), t)),
                       wait_connected=not early) as client:
        fut = client.send_get("/")
        if early:
            await asyncio.wait_for(client.wait_connected(), 5)
        resp = await asyncio.wait_for(fut, 5) if want_response else {"headers": {}, "body": b""}
        deadline = time.monotonic() + wait_token
        while time.monotonic() < deadline and not tokens:
            await asyncio.sleep(0.01)
        hs = client.handshake
        return Visit(
            status=int(resp["headers"][b":status"]) if want_response else None,
            headers=resp["headers"], body=resp["body"], tokens=tokens, tickets=tickets,
            session_resumed=hs.session_resumed, early_data_accepted=hs.early_data_accepted,
            retried=client._quic._retry_source_connection_id is not None,
            handshake_at=client.handshake_at,
            client_port=client._transport.get_extra_info("sockname")[1])


def _token_parts(token: bytes, client_ip: str) -> tuple[int, float]:
    """Decrypt a NEW_TOKEN token independently of the server code: (key id, issue time s)."""
    assert token[0] == 0x01
    key_id = int.from_bytes(token[1:5], "big")
    key = HKDF(algorithm=hashes.SHA256(), length=16, salt=None,
               info=b"netsurvey quic token key" + token[1:5]).derive(bytes.fromhex(SECRET))
    plain = AESGCM(key).decrypt(token[5:17], token[17:], token[:5])
    assert plain[:-8] == ipaddress.ip_address(client_ip).packed
    return key_id, struct.unpack("!d", plain[-8:])[0]


def _kid(now: float, rotation: int) -> int:
    return int(now // rotation) if rotation else 0


def _sleep_until(when: float) -> None:
    """Sleep until unix time ``when`` (s); no-op if it has passed."""
    time.sleep(max(0.0, when - time.time()))


def _avoid_period_end(rotation: int, guard: float = 0.6) -> None:
    """If less than ``guard`` s remain in the current ``rotation`` s period, wait for the next."""
    now = time.time()
    end = (math.floor(now / rotation) + 1) * rotation
    if end - now < guard:
        _sleep_until(end + 0.05)


def _extend(ticket):
    """The same ticket, but the client believes it valid for another hour (the server decides)."""
    return dataclasses.replace(ticket, not_valid_after=ticket.not_valid_after + datetime.timedelta(hours=1))


# --------------------------------------------------------------------------- tests


def test_build_config_json(cert, tmp_path):
    host = QuicHost(hostname="h.test", addresses=["198.18.2.30", "2001:2:0:2::30"], retry=True,
                    token_max_age=5, token_key_rotation=20, ticket_lifetime=120,
                    ticket_key_rotation=20, early_data=False)
    cfg = build_config_json(host, cert[0], cert[1], bytes.fromhex(SECRET), tmp_path / "l")
    assert cfg == {"hostname": "h.test", "addresses": ["198.18.2.30", "2001:2:0:2::30"], "port": 443,
                   "retry": True, "issue_tokens": True, "token_max_age": 5, "token_key_rotation": 20,
                   "ticket_lifetime": 120, "ticket_key_rotation": 20, "early_data": False,
                   "certfile": str(cert[0]), "keyfile": str(cert[1]), "secret": SECRET,
                   "log": str(tmp_path / "l")}


@pytest.mark.parametrize("addr", ["127.0.0.1", "::1"])
def test_page_token_and_ticket(plain_server, addr):
    t0 = time.time()
    v = _visit(plain_server, addr)
    t1 = time.time()
    assert v.status == 200 and v.headers[b"x-testbed-host"] == HOSTNAME.encode()
    assert b"<html>" in v.body and v.headers[b"content-type"].startswith(b"text/html")
    assert not v.retried and not v.session_resumed

    # NEW_TOKEN: one token, sent after (not with) the handshake flight, current key id.
    assert len(v.tokens) == 1
    at, token = v.tokens[0]
    assert at - v.handshake_at >= 0.03
    key_id, issued = _token_parts(token, addr)
    assert len(token) == 1 + 4 + 12 + (4 if ":" not in addr else 16) + 8 + 16
    assert key_id in {_kid(t0, 2), _kid(t1, 2)} and t0 - 0.01 <= issued <= t1 + 0.01
    rec = plain_server.one("token_issued", token=token.hex())
    assert rec["key_id"] == key_id and rec["client_address"] == addr
    assert rec["client_port"] == v.client_port

    # Ticket: configured lifetime, 64 bytes starting with the current key id, 0-RTT allowed.
    assert len(v.tickets) == 1
    ticket = v.tickets[0]
    assert ticket.not_valid_after - ticket.not_valid_before == datetime.timedelta(seconds=30)
    assert len(ticket.ticket) == 64
    assert int.from_bytes(ticket.ticket[:4], "big") in {_kid(t0, 2), _kid(t1, 2)}
    assert ticket.max_early_data_size == MAX_EARLY_DATA
    trec = plain_server.one("ticket_issued", ticket_prefix=ticket.ticket[:16].hex())
    assert trec["lifetime"] == 30 and trec["key_id"] == int.from_bytes(ticket.ticket[:4], "big")

    conn = plain_server.one("connection", client_port=v.client_port, client_address=addr)
    assert conn["token_status"] == "none" and conn["retry_sent"] is False
    assert conn["session_resumed"] is False and conn["ticket_status"] == "none"
    assert plain_server.one("request", client_port=v.client_port)["path"] == "/"


def test_key_rotation_and_previous_key(plain_server):
    _avoid_period_end(2)
    v1 = _visit(plain_server)
    kid_token = int.from_bytes(v1.tokens[0][1][1:5], "big")
    kid_ticket = int.from_bytes(v1.tickets[0].ticket[:4], "big")
    assert kid_token == kid_ticket  # both rotate every 2 s on the same clock
    _sleep_until((kid_token + 1) * 2 + 0.15)  # start of the next key period
    v2 = _visit(plain_server, ticket=v1.tickets[0], token=v1.tokens[0][1], early=True)
    assert int.from_bytes(v2.tokens[0][1][1:5], "big") == kid_token + 1
    assert int.from_bytes(v2.tickets[0].ticket[:4], "big") == kid_ticket + 1
    # Keys of the previous period are still accepted.
    assert v2.session_resumed and v2.early_data_accepted and v2.status == 200
    conn = plain_server.one("connection", client_port=v2.client_port)
    assert conn["ticket_status"] == "valid" and conn["ticket_key_id"] == kid_ticket
    assert conn["token_status"] == "valid" and conn["token_key_id"] == kid_token


def test_resumption_with_0rtt(plain_server):
    v1 = _visit(plain_server, "::1")
    v2 = _visit(plain_server, "::1", ticket=v1.tickets[0], token=v1.tokens[0][1], early=True)
    assert v2.session_resumed is True and v2.early_data_accepted is True and v2.status == 200
    conn = plain_server.one("connection", client_port=v2.client_port)
    assert conn["session_resumed"] is True and conn["early_data_accepted"] is True
    assert conn["ticket_presented"] == v1.tickets[0].ticket[:16].hex()
    assert conn["token_status"] == "valid" and conn["retry_sent"] is False


def test_foreign_tokens_without_retry(plain_server):
    v6 = _visit(plain_server, "::1")
    # A token issued to ::1, presented from 127.0.0.1: wrong address.
    v = _visit(plain_server, "127.0.0.1", token=v6.tokens[0][1])
    conn = plain_server.one("connection", client_port=v.client_port, client_address="127.0.0.1")
    assert (conn["token_status"], conn["token_reason"]) == ("foreign", "address")
    assert v.status == 200 and not v.retried
    # A token in our format under another secret: does not decrypt.
    forged = bytes([1]) + v6.tokens[0][1][1:5] + os.urandom(12 + 4 + 8 + 16)
    v = _visit(plain_server, "127.0.0.1", token=forged)
    conn = plain_server.one("connection", client_port=v.client_port, client_address="127.0.0.1")
    assert (conn["token_status"], conn["token_reason"]) == ("foreign", "decrypt")


def test_no_tokens_when_disabled(notoken_server):
    v = _visit(notoken_server, wait_token=0.4)
    assert v.status == 200 and v.tokens == []
    assert notoken_server.events("token_issued") == []
    assert v.tickets and v.tickets[0].not_valid_after - v.tickets[0].not_valid_before == datetime.timedelta(seconds=3600)
    assert v.tickets[0].ticket[:4] == b"\0\0\0\0"  # rotation 0: key id 0


def test_retry_server_tokens(retry_server):
    # No token: Retry, then the connection succeeds.
    v1 = _visit(retry_server)
    assert v1.retried and v1.status == 200
    c1 = retry_server.one("connection", client_port=v1.client_port)
    assert c1["retry_sent"] is True and c1["token_status"] == "none"
    assert retry_server.one("retry_sent", client_port=v1.client_port)["token_status"] == "none"
    key_id, _ = _token_parts(v1.tokens[0][1], "127.0.0.1")
    assert key_id == 0  # token_key_rotation = 0

    # Fresh NEW_TOKEN token: address validated, no Retry.
    v2 = _visit(retry_server, token=v1.tokens[0][1])
    assert not v2.retried and v2.status == 200
    c2 = retry_server.one("connection", client_port=v2.client_port)
    assert c2["token_status"] == "valid" and c2["retry_sent"] is False
    assert c2["token_presented"] == v1.tokens[0][1].hex()
    assert retry_server.events("retry_sent", client_port=v2.client_port) == []

    # Foreign token (not ours): a fresh Retry, not INVALID_TOKEN.
    v3 = _visit(retry_server, "::1", token=b"\x07" * 40)
    assert v3.retried and v3.status == 200
    c3 = retry_server.one("connection", client_port=v3.client_port)
    assert c3["token_status"] == "foreign" and c3["retry_sent"] is True


def test_retry_server_tickets_without_early_data(retry_server):
    v1 = _visit(retry_server, "::1")
    ticket = v1.tickets[0]
    assert ticket.not_valid_after - ticket.not_valid_before == datetime.timedelta(seconds=3)
    assert ticket.max_early_data_size is None  # early_data = false
    v2 = _visit(retry_server, "::1", ticket=ticket, token=v1.tokens[0][1])
    assert v2.session_resumed is True and v2.early_data_accepted is False and not v2.retried
    # A client that tries 0-RTT anyway is refused (but resumed).
    forced = dataclasses.replace(v2.tickets[0], max_early_data_size=MAX_EARLY_DATA)
    v3 = _visit(retry_server, "::1", ticket=forced, token=v2.tokens[0][1], early=True,
                want_response=False, wait_token=0.0)
    assert v3.session_resumed is True and v3.early_data_accepted is False
    c3 = retry_server.one("connection", client_port=v3.client_port)
    assert c3["early_data_accepted"] is False and c3["session_resumed"] is True


def test_expiry(plain_server, retry_server):
    """Tokens older than token_max_age, tickets older than ticket_lifetime or whose key id is
    older than the previous one are refused; one shared sleep."""
    r = _visit(retry_server)
    p = _visit(plain_server)
    kid = int.from_bytes(p.tickets[0].ticket[:4], "big")
    # Wait until the retry server's token (2 s) and ticket (3 s) are too old, and the plain
    # server's key id is two periods further on (current and previous keys only).
    _sleep_until(max(time.time() + 3.3, (kid + 2) * 2 + 0.15))

    v = _visit(retry_server, token=r.tokens[0][1], ticket=_extend(r.tickets[0]))
    assert v.retried and v.status == 200 and v.session_resumed is False
    c = retry_server.one("connection", client_port=v.client_port)
    assert (c["token_status"], c["token_reason"], c["retry_sent"]) == ("expired", "age", True)
    assert c["token_presented"] == r.tokens[0][1].hex()
    assert c["ticket_status"] == "expired" and c["session_resumed"] is False

    v = _visit(plain_server, token=p.tokens[0][1], ticket=p.tickets[0])
    assert v.session_resumed is False and v.early_data_accepted is False and v.status == 200
    c = plain_server.one("connection", client_port=v.client_port)
    assert c["ticket_status"] == "key_retired" and c["ticket_key_id"] == kid
    assert c["token_status"] == "expired" and c["retry_sent"] is False
