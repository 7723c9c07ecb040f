"""HTTP/3 test server on aioquic that issues NEW_TOKEN tokens and controls its session tickets.

One process serves one ``[[quic_host]]`` of ``config/testbed.toml`` on every address given
(one UDP endpoint each). Its configuration is the ground truth that scanners and browser
probes are checked against, and its JSON-lines log (``--log``) is the server-side view.

Run: ``python -m testbed.quic_server --config FILE.json`` (foreground until SIGTERM/SIGINT);
the JSON is what :func:`build_config_json` returns. Units: seconds for every duration and
time (unix seconds for timestamps), bytes for every length.

Byte formats
------------
NEW_TOKEN token (45 bytes for IPv4 clients, 57 for IPv6)::

    0x01 | key_id (4, big-endian) | nonce (12) | AES-128-GCM(ip (4|16) || issue_time (8, IEEE-754
    double, unix seconds)) with AAD = first 5 bytes, tag 16

    token key = HKDF-SHA256(secret, salt=None, info=b"netsurvey quic token key" || key_id, 16 bytes)

Retry token: ``0x02`` followed by aioquic's own Retry token (random per process, 30 s).
Session ticket (64 bytes): ``key_id (4, big-endian) | 60 random bytes``.

Key ids: ``floor(now / rotation)`` (32 bits) when the rotation period is > 0, else 0.
The server holds the *current and the previous* key id: a token or ticket whose key id is
older than the previous one is refused ("key_retired"), even if its age is within
``token_max_age`` / ``ticket_lifetime``. So, for tokens: accepted iff it decrypts, the
address matches, age <= token_max_age and key id in {current, previous}. For tickets:
accepted iff this process issued it, age <= ticket_lifetime and key id in {current,
previous}. Tickets may be used several times (stateless-ticket semantics, as nginx).

Behaviour with ``retry``: a valid NEW_TOKEN token validates the address (no Retry, the
anti-amplification limit is lifted); an absent, expired or foreign one gets a Retry (RFC 9000
section 8.1.3), never INVALID_TOKEN. Only an invalid *Retry* token (prefix 0x02) is answered
with INVALID_TOKEN, as RFC 9000 section 8.1.2 asks. Without ``retry``, tokens are only checked
and logged.

Log lines (one JSON object each, appended; every line has ``ts`` (unix s), ``event``, ``host``):

* ``started`` / ``stopped``: addresses, port, and the policy values.
* ``retry_sent``: server_address, server_port, client_address, client_port, token_presented
  (hex, "" if none), token_status, token_reason.
* ``invalid_retry_token``: server/client address and port, token_presented.
* ``connection`` (handshake completed): server_address, server_port, client_address,
  client_port, alpn, session_resumed, early_data_accepted, token_presented (hex of the
  NEW_TOKEN token of the first Initial, "" if none), token_status (valid/expired/foreign/none),
  token_reason (ok/age/key_retired/decrypt/address/format/future_key/none), token_key_id
  (int or null), token_issue_time (unix s or null), retry_sent, ticket_presented (hex of the
  first 16 bytes of the PSK identity, "" if none), ticket_status
  (valid/expired/key_retired/unknown/none), ticket_key_id (int or null).
* ``token_issued``: token (hex), key_id, issue_time, client_address, client_port.
* ``ticket_issued``: ticket_prefix (hex of the first 16 bytes), ticket_len, key_id, lifetime,
  max_early_data (int or null), issue_time, client_address, client_port.
* ``request``: client_address, client_port, method, path, authority, status.
"""
from __future__ import annotations

import argparse
import asyncio
import functools
import gc
import ipaddress
import json
import os
import signal
import socket
import struct
import sys
import time
from dataclasses import dataclass, field
from functools import lru_cache, partial
from pathlib import Path
from typing import Any, Optional

from aioquic import tls
from aioquic.asyncio.protocol import QuicConnectionProtocol
from aioquic.asyncio.server import QuicServer, _encode_invalid_token_close
from aioquic.buffer import Buffer
from aioquic.h3.connection import H3_ALPN, H3Connection
from aioquic.h3.events import HeadersReceived
from aioquic.quic import connection as _aioquic_connection, events
from aioquic.quic.configuration import SMALLEST_MAX_DATAGRAM_SIZE, QuicConfiguration
from aioquic.quic.connection import MAX_EARLY_DATA, NetworkAddress, QuicConnection
from aioquic.quic.packet import (
    QuicFrameType,
    QuicPacketType,
    encode_quic_retry,
    encode_quic_version_negotiation,
    pull_quic_header,
)
from aioquic.quic.packet_builder import QuicDeliveryState, QuicPacketBuilder
from aioquic.quic.retry import QuicRetryTokenHandler
from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

# aioquic rebuilds its frame-handler table (33 frozensets from EPOCHS("...")) for every
# connection, ~50 us; the sets are immutable, so cache them once per process.
if not hasattr(_aioquic_connection.EPOCHS, "cache_info"):
    _aioquic_connection.EPOCHS = functools.lru_cache(maxsize=None)(_aioquic_connection.EPOCHS)

#: First byte of a NEW_TOKEN token (format version 1).
TOKEN_VERSION = 0x01
#: First byte of a Retry token (followed by aioquic's Retry token).
RETRY_TOKEN_PREFIX = 0x02
TOKEN_NONCE_LEN = 12  # bytes
TOKEN_HEADER_LEN = 1 + 4 + TOKEN_NONCE_LEN  # bytes
TICKET_LEN = 64  # bytes, 4 key id + 60 random
TICKET_PREFIX_LOG_LEN = 16  # bytes of a ticket written to the log
#: Delay between handshake completion and the NEW_TOKEN frame, seconds (Chromium drops a
#: NEW_TOKEN sent in the same flight as HANDSHAKE_DONE).
TOKEN_DELAY = 0.05
#: How long a Retry remembers the NEW_TOKEN token it replaced, seconds.
RETRY_MEMORY = 60.0

REQUIRED_KEYS = ("hostname", "addresses", "port", "retry", "issue_tokens", "token_max_age",
                 "token_key_rotation", "ticket_lifetime", "ticket_key_rotation", "early_data",
                 "certfile", "keyfile", "secret", "log")


# --------------------------------------------------------------------------- config


def build_config_json(host, certfile, keyfile, secret, log) -> dict:
    """The JSON configuration (a dict) for one :class:`testbed.model.QuicHost`.

    :param secret: bytes or a hex string; token keys are derived from it (deterministic
        across restarts).
    :param log: path of the JSON-lines log (appended).
    """
    if isinstance(secret, (bytes, bytearray)):
        secret = bytes(secret).hex()
    bytes.fromhex(secret)  # validate
    return {
        "hostname": host.hostname,
        "addresses": list(host.addresses),
        "port": int(host.port),
        "retry": bool(host.retry),
        "issue_tokens": bool(host.issue_tokens),
        "token_max_age": int(host.token_max_age),
        "token_key_rotation": int(host.token_key_rotation),
        "ticket_lifetime": int(host.ticket_lifetime),
        "ticket_key_rotation": int(host.ticket_key_rotation),
        "early_data": bool(host.early_data),
        "certfile": str(certfile),
        "keyfile": str(keyfile),
        "secret": secret,
        "log": str(log),
    }


@dataclass(frozen=True)
class ServerConfig:
    """Parsed ``--config`` JSON; durations in seconds."""

    hostname: str
    addresses: list[str]
    port: int
    retry: bool
    issue_tokens: bool
    token_max_age: float
    token_key_rotation: int
    ticket_lifetime: int
    ticket_key_rotation: int
    early_data: bool
    certfile: str
    keyfile: str
    secret: bytes
    log: str

    @classmethod
    def from_dict(cls, d: dict) -> "ServerConfig":
        missing = [k for k in REQUIRED_KEYS if k not in d]
        if missing:
            raise ValueError(f"config misses {', '.join(missing)}")
        unknown = sorted(set(d) - set(REQUIRED_KEYS))
        if unknown:
            raise ValueError(f"config has unknown keys {', '.join(unknown)}")
        for a in d["addresses"]:
            ipaddress.ip_address(a)
        if not d["addresses"]:
            raise ValueError("config lists no addresses")
        for k in ("token_max_age", "token_key_rotation", "ticket_lifetime", "ticket_key_rotation"):
            if d[k] < 0:
                raise ValueError(f"{k} must be >= 0")
        if not 0 < d["ticket_lifetime"] <= 604800:
            raise ValueError("ticket_lifetime must be in 1..604800 s (RFC 8446)")
        return cls(
            hostname=d["hostname"], addresses=list(d["addresses"]), port=int(d["port"]),
            retry=bool(d["retry"]), issue_tokens=bool(d["issue_tokens"]),
            token_max_age=float(d["token_max_age"]),
            token_key_rotation=int(d["token_key_rotation"]),
            ticket_lifetime=int(d["ticket_lifetime"]),
            ticket_key_rotation=int(d["ticket_key_rotation"]),
            early_data=bool(d["early_data"]), certfile=d["certfile"], keyfile=d["keyfile"],
            secret=bytes.fromhex(d["secret"]), log=d["log"],
        )


# --------------------------------------------------------------------------- helpers


def key_id_at(now: float, rotation: int) -> int:
    """Key id in force at unix time ``now`` (s) for a rotation period (s, 0 = never)."""
    if rotation <= 0:
        return 0
    return int(now // rotation) & 0xFFFFFFFF


def _key_age_status(key_id: int, now: float, rotation: int) -> Optional[str]:
    """None if ``key_id`` is the current or previous key, else 'key_retired'/'future_key'."""
    current = key_id_at(now, rotation)
    if key_id == current or (rotation > 0 and key_id == (current - 1) & 0xFFFFFFFF):
        return None
    if rotation > 0 and key_id > current:
        return "future_key"
    return "key_retired"


def _ip_packed(ip: str) -> bytes:
    """Packed address (4 or 16 bytes); IPv4-mapped IPv6 addresses become IPv4."""
    a = ipaddress.ip_address(ip.split("%", 1)[0])
    if isinstance(a, ipaddress.IPv6Address) and a.ipv4_mapped is not None:
        a = a.ipv4_mapped
    return a.packed


class _Log:
    """Appends one JSON object per line to a file (flushed at once)."""

    def __init__(self, path: str, hostname: str):
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        self._f = open(path, "a", encoding="utf-8", buffering=1)
        self._host = hostname

    def write(self, event: str, **fields: Any) -> None:
        rec = {"ts": round(time.time(), 6), "event": event, "host": self._host, **fields}
        self._f.write(json.dumps(rec, sort_keys=False) + "\n")
        self._f.flush()

    def close(self) -> None:
        self._f.close()


# --------------------------------------------------------------------------- tokens


@dataclass
class TokenCheck:
    """Outcome of checking a token from a client Initial; times in unix seconds."""

    status: str  # valid / expired / foreign / none
    reason: str  # ok / age / key_retired / decrypt / address / format / future_key / none
    key_id: Optional[int] = None
    issue_time: Optional[float] = None


class TokenBox:
    """Issues and checks NEW_TOKEN tokens (see the module docstring for the format)."""

    def __init__(self, secret: bytes, rotation: int, max_age: float):
        """:param rotation: key rotation period, s (0 = never). :param max_age: s."""
        self._secret = secret
        self.rotation = rotation
        self.max_age = max_age

    @lru_cache(maxsize=64)  # noqa: B019 - one TokenBox per server process (ServerState), kept for its life
    def _aead(self, key_id: int) -> AESGCM:
        info = b"netsurvey quic token key" + key_id.to_bytes(4, "big")
        key = HKDF(algorithm=hashes.SHA256(), length=16, salt=None, info=info).derive(self._secret)
        return AESGCM(key)

    def issue(self, client_ip: str, now: float) -> tuple[bytes, int]:
        """A new token for ``client_ip`` at unix time ``now`` (s); returns (token, key id)."""
        key_id = key_id_at(now, self.rotation)
        header = bytes([TOKEN_VERSION]) + key_id.to_bytes(4, "big")
        nonce = os.urandom(TOKEN_NONCE_LEN)
        plain = _ip_packed(client_ip) + struct.pack("!d", now)
        return header + nonce + self._aead(key_id).encrypt(nonce, plain, header), key_id

    def check(self, token: bytes, client_ip: str, now: float) -> TokenCheck:
        """Classify ``token`` presented by ``client_ip`` at unix time ``now`` (s)."""
        if not token:
            return TokenCheck("none", "none")
        if token[0] != TOKEN_VERSION or len(token) < TOKEN_HEADER_LEN + 16 + 4 + 8:
            return TokenCheck("foreign", "format")
        key_id = int.from_bytes(token[1:5], "big")
        nonce = token[5:TOKEN_HEADER_LEN]
        try:
            plain = self._aead(key_id).decrypt(nonce, token[TOKEN_HEADER_LEN:], token[:5])
        except InvalidTag:
            return TokenCheck("foreign", "decrypt", key_id)
        if len(plain) not in (4 + 8, 16 + 8):
            return TokenCheck("foreign", "format", key_id)
        (issued,) = struct.unpack("!d", plain[-8:])
        if plain[:-8] != _ip_packed(client_ip):
            return TokenCheck("foreign", "address", key_id, issued)
        key_status = _key_age_status(key_id, now, self.rotation)
        if key_status == "future_key":
            return TokenCheck("foreign", key_status, key_id, issued)
        if key_status == "key_retired":
            return TokenCheck("expired", key_status, key_id, issued)
        if now - issued > self.max_age:
            return TokenCheck("expired", "age", key_id, issued)
        return TokenCheck("valid", "ok", key_id, issued)


# --------------------------------------------------------------------------- tickets


@dataclass
class _TicketRecord:
    ticket: tls.SessionTicket
    key_id: int
    issue_time: float  # unix s


class TicketStore:
    """Session tickets this process issued, with key-id rotation and lifetime checks."""

    def __init__(self, lifetime: int, rotation: int):
        """:param lifetime: ticket lifetime, s. :param rotation: key id period, s (0 = never)."""
        self.lifetime = lifetime
        self.rotation = rotation
        self._tickets: dict[bytes, _TicketRecord] = {}

    def new_ticket_bytes(self, now: float) -> tuple[bytes, int]:
        """Fresh ticket bytes (key id + random) at unix time ``now`` (s); (ticket, key id)."""
        key_id = key_id_at(now, self.rotation)
        return key_id.to_bytes(4, "big") + os.urandom(TICKET_LEN - 4), key_id

    def store(self, ticket: tls.SessionTicket, now: float) -> _TicketRecord:
        self._purge(now)
        rec = _TicketRecord(ticket, int.from_bytes(ticket.ticket[:4], "big"), now)
        self._tickets[ticket.ticket] = rec
        return rec

    def lookup(self, label: bytes, now: float) -> tuple[Optional[tls.SessionTicket], str, Optional[int]]:
        """(ticket or None, status valid/expired/key_retired/unknown, key id)."""
        rec = self._tickets.get(label)
        if rec is None:
            return None, "unknown", None
        if now - rec.issue_time > self.lifetime:
            return None, "expired", rec.key_id
        if _key_age_status(rec.key_id, now, self.rotation) is not None:
            return None, "key_retired", rec.key_id
        return rec.ticket, "valid", rec.key_id

    def _purge(self, now: float) -> None:
        """Drop expired tickets. The dict is in issue order and the lifetime is fixed, so
        expired ones lead it: stop at the first live one (each ticket is looked at once,
        not the whole store per handshake)."""
        while self._tickets:
            label = next(iter(self._tickets))
            if now - self._tickets[label].issue_time <= self.lifetime:
                break
            del self._tickets[label]


# --------------------------------------------------------------------------- shared state


@dataclass
class ConnInfo:
    """What the server learnt about a connection before its handshake completed."""

    client: NetworkAddress
    server: tuple[str, int]
    token_presented: bytes = b""
    token: TokenCheck = field(default_factory=lambda: TokenCheck("none", "none"))
    retry_sent: bool = False
    ticket_presented: bytes = b""
    ticket_status: str = "none"
    ticket_key_id: Optional[int] = None


class ServerState:
    """State shared by every endpoint of one server: config, keys, tickets, log."""

    def __init__(self, cfg: ServerConfig):
        self.cfg = cfg
        self.log = _Log(cfg.log, cfg.hostname)
        self.tokens = TokenBox(cfg.secret, cfg.token_key_rotation, cfg.token_max_age)
        self.tickets = TicketStore(cfg.ticket_lifetime, cfg.ticket_key_rotation)
        self.retry = QuicRetryTokenHandler() if cfg.retry else None
        #: (client ip, client port, original DCID) -> (time.monotonic(), token, TokenCheck)
        self.pending_retry: dict[tuple, tuple[float, bytes, TokenCheck]] = {}
        self.quic_config = QuicConfiguration(is_client=False, alpn_protocols=H3_ALPN)
        self.quic_config.load_cert_chain(cfg.certfile, cfg.keyfile)
        # Send no self-signed root (the testbed CA): clients verify against their own copy
        # (RFC 8446 section 4.4.2 lets it be omitted). With the leaf alone the server's
        # first flight fits one datagram, one packet fewer each way per handshake.
        self.quic_config.certificate_chain = [
            c for c in self.quic_config.certificate_chain if c.issuer != c.subject]

    def remember_retry(self, key: tuple, token: bytes, check: TokenCheck) -> None:
        now = time.monotonic()
        while self.pending_retry:  # in insertion (= time) order: stale entries lead
            k = next(iter(self.pending_retry))
            if now - self.pending_retry[k][0] <= RETRY_MEMORY:
                break
            del self.pending_retry[k]
        self.pending_retry.pop(key, None)
        self.pending_retry[key] = (now, token, check)


# --------------------------------------------------------------------------- TLS / QUIC


class _TicketContext(tls.Context):
    """aioquic's TLS context with our ticket lifetime, ticket bytes and early-data policy.

    aioquic hard-codes ``ticket_lifetime=86400`` and ``ticket=os.urandom(64)`` in
    ``Context._server_handle_finished``; we suppress its ticket and send our own.
    Instances are made by class swap in :meth:`_Connection._initialize`.
    """

    _ns_state: ServerState

    @property
    def early_data_accepted(self) -> bool:  # type: ignore[override]
        return self.__dict__.get("_ns_early", False)

    @early_data_accepted.setter
    def early_data_accepted(self, value: bool) -> None:
        # Refuse 0-RTT (EncryptedExtensions without early_data) when disabled.
        self.__dict__["_ns_early"] = bool(value) and self._ns_state.cfg.early_data

    def _server_handle_finished(self, input_buf: Buffer, output_buf: Buffer) -> None:
        cb = self.new_session_ticket_cb
        self.new_session_ticket_cb = None
        try:
            super()._server_handle_finished(input_buf, output_buf)
        finally:
            self.new_session_ticket_cb = cb
        if cb is None or self._psk_key_exchange_mode is None:
            return
        ticket, _ = self._ns_state.tickets.new_ticket_bytes(time.time())
        nst = tls.NewSessionTicket(
            ticket_lifetime=self._ns_state.cfg.ticket_lifetime,
            ticket_age_add=struct.unpack("I", os.urandom(4))[0],
            ticket_nonce=b"",
            ticket=ticket,
            max_early_data_size=self._max_early_data,
        )
        tls.push_new_session_ticket(output_buf, nst)
        self._new_session_ticket = nst
        cb(self._build_session_ticket(nst, self.handshake_extensions))


class _Connection(QuicConnection):
    """Server connection that sends NEW_TOKEN frames and applies our ticket policy."""

    def __init__(self, *, state: ServerState, info: ConnInfo, **kwargs: Any):
        self._ns_state = state
        self.ns_info = info
        self._new_token_pending: Optional[bytes] = None
        super().__init__(configuration=state.quic_config, **kwargs)

    # ---- NEW_TOKEN
    def send_new_token(self, token: bytes) -> None:
        """Queue a NEW_TOKEN frame (sent in the next 1-RTT packet, retransmitted if lost)."""
        self._new_token_pending = token

    def _write_connection_limits(self, builder: QuicPacketBuilder, space) -> None:
        super()._write_connection_limits(builder=builder, space=space)
        token = self._new_token_pending
        if token is not None:
            buf = builder.start_frame(
                QuicFrameType.NEW_TOKEN, capacity=1 + 8 + len(token),
                handler=self._on_new_token_delivery, handler_args=(token,),
            )
            buf.push_uint_var(len(token))
            buf.push_bytes(token)
            self._new_token_pending = None
            if self._quic_logger is not None:
                builder.quic_logger_frames.append(self._quic_logger.encode_new_token_frame(token=token))

    def _on_new_token_delivery(self, delivery: QuicDeliveryState, token: bytes) -> None:
        if delivery != QuicDeliveryState.ACKED and self._new_token_pending is None:
            self._new_token_pending = token

    # ---- TLS policy
    def _initialize(self, peer_cid: bytes) -> None:
        super()._initialize(peer_cid)
        ctx = self.tls
        ctx.__class__ = _TicketContext
        ctx._ns_state = self._ns_state
        ctx.early_data_accepted = False
        ctx._max_early_data = MAX_EARLY_DATA if self._ns_state.cfg.early_data else None
        ctx.get_session_ticket_cb = self._fetch_ticket
        ctx.new_session_ticket_cb = self._ticket_issued

    def _fetch_ticket(self, label: bytes) -> Optional[tls.SessionTicket]:
        ticket, status, key_id = self._ns_state.tickets.lookup(label, time.time())
        self.ns_info.ticket_presented = label
        self.ns_info.ticket_status = status
        self.ns_info.ticket_key_id = key_id
        return ticket

    def _ticket_issued(self, ticket: tls.SessionTicket) -> None:
        now = time.time()
        rec = self._ns_state.tickets.store(ticket, now)
        lifetime = round((ticket.not_valid_after - ticket.not_valid_before).total_seconds())
        self._ns_state.log.write(
            "ticket_issued", ticket_prefix=ticket.ticket[:TICKET_PREFIX_LOG_LEN].hex(),
            ticket_len=len(ticket.ticket), key_id=rec.key_id, lifetime=lifetime,
            max_early_data=ticket.max_early_data_size, issue_time=now,
            client_address=self.ns_info.client[0], client_port=self.ns_info.client[1],
        )

    def _update_traffic_key(self, direction, epoch, cipher_suite, secret) -> None:
        # Without early data, never install 0-RTT read keys: 0-RTT packets are dropped.
        if (not self._ns_state.cfg.early_data and direction == tls.Direction.DECRYPT
                and epoch == tls.Epoch.ZERO_RTT):
            return
        super()._update_traffic_key(direction, epoch, cipher_suite, secret)


# --------------------------------------------------------------------------- HTTP/3


PAGE = (b"<!doctype html>\n<html><head><meta charset=\"utf-8\"><title>%s</title></head>\n"
        b"<body><h1>%s</h1><p>netsurvey testbed HTTP/3 server.</p></body></html>\n")


class _H3Protocol(QuicConnectionProtocol):
    """One server connection: HTTP/3 replies, connection log line, delayed NEW_TOKEN."""

    def __init__(self, quic: _Connection, *, state: ServerState):
        super().__init__(quic)
        self._state = state
        self._h3: Optional[H3Connection] = None
        self._token_timer: Optional[asyncio.TimerHandle] = None
        self._addr_validated = False
        self.cids: set[bytes] = set()  # connection ids routed to us by the endpoint

    def datagram_received(self, data: bytes, addr: NetworkAddress) -> None:
        super().datagram_received(data, addr)
        if not self._addr_validated and self._quic.ns_info.token.status == "valid":
            # A valid NEW_TOKEN token validates the address (RFC 9000 section 8.1.3).
            for path in self._quic._network_paths:
                if path.addr == self._quic.ns_info.client:
                    path.is_validated = True
                    self._addr_validated = True

    def quic_event_received(self, event: events.QuicEvent) -> None:
        if isinstance(event, events.ProtocolNegotiated) and event.alpn_protocol in H3_ALPN:
            self._h3 = H3Connection(self._quic)
        elif isinstance(event, events.HandshakeCompleted):
            self._on_handshake(event)
        elif isinstance(event, events.ConnectionTerminated):
            if self._token_timer is not None:
                self._token_timer.cancel()
        if self._h3 is not None:
            for h3_event in self._h3.handle_event(event):
                if isinstance(h3_event, HeadersReceived):
                    self._respond(h3_event)

    def _on_handshake(self, event: events.HandshakeCompleted) -> None:
        info: ConnInfo = self._quic.ns_info
        self._state.log.write(
            "connection", server_address=info.server[0], server_port=info.server[1],
            client_address=info.client[0], client_port=info.client[1],
            alpn=event.alpn_protocol, session_resumed=event.session_resumed,
            early_data_accepted=event.early_data_accepted,
            token_presented=info.token_presented.hex(), token_status=info.token.status,
            token_reason=info.token.reason, token_key_id=info.token.key_id,
            token_issue_time=info.token.issue_time, retry_sent=info.retry_sent,
            ticket_presented=info.ticket_presented[:TICKET_PREFIX_LOG_LEN].hex(),
            ticket_status=info.ticket_status, ticket_key_id=info.ticket_key_id,
        )
        if self._state.cfg.issue_tokens:
            self._token_timer = self._loop.call_later(TOKEN_DELAY, self._issue_token)

    def _issue_token(self) -> None:
        self._token_timer = None
        if self._closed.is_set() or self._quic._close_event is not None:
            return  # closed, closing or draining: a NEW_TOKEN frame could not be sent
        info: ConnInfo = self._quic.ns_info
        now = time.time()
        token, key_id = self._state.tokens.issue(info.client[0], now)
        self._quic.send_new_token(token)
        self.transmit()
        self._state.log.write("token_issued", token=token.hex(), key_id=key_id, issue_time=now,
                              client_address=info.client[0], client_port=info.client[1])

    def _respond(self, ev: HeadersReceived) -> None:
        hdr = {k: v for k, v in ev.headers if k.startswith(b":")}
        method = hdr.get(b":method", b"GET")
        host = self._state.cfg.hostname.encode()
        body = b"" if method == b"HEAD" else PAGE % (host, host)
        self._h3.send_headers(ev.stream_id, [
            (b":status", b"200"),
            (b"server", b"netsurvey-quic"),
            (b"content-type", b"text/html; charset=utf-8"),
            (b"content-length", str(len(PAGE % (host, host))).encode()),
            (b"cache-control", b"no-store"),
            (b"x-testbed-host", host),
        ])
        self._h3.send_data(ev.stream_id, body, end_stream=True)
        info: ConnInfo = self._quic.ns_info
        self._state.log.write(
            "request", client_address=info.client[0], client_port=info.client[1],
            method=method.decode(errors="replace"),
            path=hdr.get(b":path", b"").decode(errors="replace")[:200],
            authority=hdr.get(b":authority", b"").decode(errors="replace")[:200], status=200)


# --------------------------------------------------------------------------- endpoint


class _Endpoint(QuicServer):
    """One UDP endpoint; like aioquic's QuicServer but with our token and Retry handling."""

    def __init__(self, state: ServerState, local: tuple[str, int]):
        super().__init__(configuration=state.quic_config, retry=False)
        self._state = state
        self._local = local

    def datagram_received(self, data: bytes, addr: NetworkAddress) -> None:
        buf = Buffer(data=data)
        try:
            header = pull_quic_header(buf, host_cid_length=self._configuration.connection_id_length)
        except ValueError:
            return
        if (header.packet_type != QuicPacketType.VERSION_NEGOTIATION
                and header.version is not None
                and header.version not in self._configuration.supported_versions):
            self._transport.sendto(encode_quic_version_negotiation(
                source_cid=header.destination_cid, destination_cid=header.source_cid,
                supported_versions=self._configuration.supported_versions), addr)
            return
        protocol = self._protocols.get(header.destination_cid)
        if (protocol is None and len(data) >= SMALLEST_MAX_DATAGRAM_SIZE
                and header.packet_type == QuicPacketType.INITIAL):
            protocol = self._new_connection(header, addr)
        if protocol is not None:
            protocol.datagram_received(data, addr)

    def _new_connection(self, header, addr: NetworkAddress) -> Optional[_H3Protocol]:
        state = self._state
        info = ConnInfo(client=(addr[0], addr[1]), server=self._local)
        token = header.token or b""
        odcid, rscid = header.destination_cid, None
        if state.retry is not None and token[:1] == bytes([RETRY_TOKEN_PREFIX]):
            try:
                odcid = state.retry.validate_token(
                    address=addr, destination_cid=header.destination_cid, token=token[1:],
                    now=self._loop.time())
            except ValueError:
                state.log.write("invalid_retry_token", server_address=self._local[0],
                                server_port=self._local[1], client_address=addr[0],
                                client_port=addr[1], token_presented=token.hex())
                self._transport.sendto(_encode_invalid_token_close(
                    version=header.version, source_cid=header.destination_cid,
                    destination_cid=header.source_cid), addr)
                return None
            rscid = header.destination_cid
            info.retry_sent = True
            remembered = state.pending_retry.pop((addr[0], addr[1], odcid), None)
            if remembered is not None:
                info.token_presented, info.token = remembered[1], remembered[2]
        else:
            info.token_presented = token
            info.token = state.tokens.check(token, addr[0], time.time())
            if state.retry is not None and info.token.status != "valid":
                self._send_retry(header, addr, info)
                return None
        connection = _Connection(state=state, info=info,
                                 original_destination_connection_id=odcid,
                                 retry_source_connection_id=rscid)
        protocol = _H3Protocol(connection, state=state)
        protocol.connection_made(self._transport)
        protocol._connection_id_issued_handler = partial(self._connection_id_issued, protocol=protocol)
        protocol._connection_id_retired_handler = partial(self._connection_id_retired, protocol=protocol)
        protocol._connection_terminated_handler = partial(self._connection_terminated, protocol=protocol)
        for cid in (header.destination_cid, connection.host_cid):
            self._protocols[cid] = protocol
            protocol.cids.add(cid)
        return protocol

    # aioquic's QuicServer forgets a terminated connection by scanning every entry of
    # _protocols (all connections' ids); we keep each connection's ids with it.
    def _connection_id_issued(self, cid: bytes, protocol: "_H3Protocol") -> None:
        self._protocols[cid] = protocol
        protocol.cids.add(cid)

    def _connection_id_retired(self, cid: bytes, protocol: "_H3Protocol") -> None:
        super()._connection_id_retired(cid, protocol)
        protocol.cids.discard(cid)

    def _connection_terminated(self, protocol: "_H3Protocol") -> None:
        for cid in protocol.cids:
            if self._protocols.get(cid) is protocol:
                del self._protocols[cid]
        protocol.cids.clear()

    def _send_retry(self, header, addr: NetworkAddress, info: ConnInfo) -> None:
        source_cid = os.urandom(8)
        retry_token = bytes([RETRY_TOKEN_PREFIX]) + self._state.retry.create_token(
            address=addr, original_destination_connection_id=header.destination_cid,
            retry_source_connection_id=source_cid, now=self._loop.time())
        self._transport.sendto(encode_quic_retry(
            version=header.version, source_cid=source_cid, destination_cid=header.source_cid,
            original_destination_cid=header.destination_cid, retry_token=retry_token), addr)
        self._state.remember_retry((addr[0], addr[1], header.destination_cid),
                                   info.token_presented, info.token)
        self._state.log.write(
            "retry_sent", server_address=self._local[0], server_port=self._local[1],
            client_address=addr[0], client_port=addr[1],
            token_presented=info.token_presented.hex(), token_status=info.token.status,
            token_reason=info.token.reason)


# --------------------------------------------------------------------------- main


def _bind_socket(address: str, port: int) -> socket.socket:
    """A UDP socket bound to (address, port); IPv6 sockets are v6-only."""
    family = socket.AF_INET6 if ipaddress.ip_address(address).version == 6 else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_DGRAM)
    try:
        if family == socket.AF_INET6:
            sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
        sock.bind((address, port))
    except OSError:
        sock.close()
        raise
    sock.setblocking(False)
    return sock


async def serve(cfg: ServerConfig, stop: Optional[asyncio.Event] = None) -> None:
    """Serve until ``stop`` is set (or SIGTERM/SIGINT when ``stop`` is None)."""
    loop = asyncio.get_running_loop()
    state = ServerState(cfg)
    if stop is None:
        stop = asyncio.Event()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
    endpoints: list[_Endpoint] = []
    try:
        for address in cfg.addresses:
            sock = _bind_socket(address, cfg.port)
            local = (address, sock.getsockname()[1])
            _, ep = await loop.create_datagram_endpoint(partial(_Endpoint, state, local), sock=sock)
            endpoints.append(ep)
        state.log.write(
            "started", pid=os.getpid(), addresses=cfg.addresses, port=cfg.port, retry=cfg.retry,
            issue_tokens=cfg.issue_tokens, token_max_age=cfg.token_max_age,
            token_key_rotation=cfg.token_key_rotation, ticket_lifetime=cfg.ticket_lifetime,
            ticket_key_rotation=cfg.ticket_key_rotation, early_data=cfg.early_data)
        # aioquic's connections are reference cycles, so the cyclic collector runs often;
        # keep the start-up objects (modules, certificate, config) out of it, and run the
        # middle generation 10x less often so cycles mostly die there, not in full passes
        # (as scanners.quic.handshake.settle_gc).
        gc.collect()
        gc.freeze()
        young, _, old = gc.get_threshold()
        gc.set_threshold(young, 100, old)
        await stop.wait()
    finally:
        for ep in endpoints:
            ep.close()
        state.log.write("stopped", pid=os.getpid())
        state.log.close()


def main(argv: Optional[list[str]] = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m testbed.quic_server", description=__doc__.split("\n")[0])
    ap.add_argument("--config", required=True, help="JSON file (see build_config_json)")
    ap.add_argument("--log", help="override the config's log path (JSON lines, appended)")
    args = ap.parse_args(argv)
    try:
        d = json.loads(Path(args.config).read_text())
        if args.log:
            d["log"] = args.log
        cfg = ServerConfig.from_dict(d)
    except (OSError, ValueError, TypeError, KeyError) as exc:
        print(f"quic_server: bad config: {exc}", file=sys.stderr)
        return 2
    try:
        asyncio.run(serve(cfg))
    except OSError as exc:
        print(f"quic_server: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
