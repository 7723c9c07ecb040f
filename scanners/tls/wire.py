"""TLS wire-format parsing of what the server sent: records, handshake messages,
NewSessionTicket (TLS 1.2, RFC 5077 §3.3; TLS 1.3, RFC 8446 §4.6.1) and alerts.

Pure functions over bytes; no sockets. Lengths are bytes, lifetimes seconds.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator, Optional

CT_CHANGE_CIPHER_SPEC = 20
CT_ALERT = 21
CT_HANDSHAKE = 22
CT_APPLICATION_DATA = 23

HT_SERVER_HELLO = 2
HT_NEW_SESSION_TICKET = 4

#: TLS alert descriptions (RFC 8446 §6, RFC 5246 §7.2).
ALERTS = {0: "close_notify", 10: "unexpected_message", 20: "bad_record_mac", 22: "record_overflow",
          40: "handshake_failure", 42: "bad_certificate", 43: "unsupported_certificate",
          44: "certificate_revoked", 45: "certificate_expired", 46: "certificate_unknown",
          47: "illegal_parameter", 48: "unknown_ca", 49: "access_denied", 50: "decode_error",
          51: "decrypt_error", 70: "protocol_version", 71: "insufficient_security", 80: "internal_error",
          86: "inappropriate_fallback", 90: "user_canceled", 109: "missing_extension",
          110: "unsupported_extension", 112: "unrecognized_name", 113: "bad_certificate_status_response",
          115: "unknown_psk_identity", 116: "certificate_required", 120: "no_application_protocol"}

KEY_NAME_BYTES = 16   # RFC 5077 §4 recommended ticket structure: key_name[16]
IV_BYTES = 16         # iv[16]
MAC_BYTES = 32        # HMAC-SHA256


@dataclass(frozen=True)
class Record:
    """One TLS record: content type, legacy version (e.g. 0x0303) and payload."""

    content_type: int
    version: int
    payload: bytes
    header: bytes


@dataclass(frozen=True)
class NewSessionTicket:
    """A NewSessionTicket message. ``lifetime`` is the TLS 1.2 ticket_lifetime_hint or the
    TLS 1.3 ticket_lifetime (seconds); ``max_early_data`` (bytes) only for TLS 1.3 tickets
    with the early_data extension; ``age_add``/``nonce`` only for TLS 1.3."""

    lifetime: int
    ticket: bytes
    tls13: bool
    age_add: Optional[int] = None
    nonce: Optional[bytes] = None
    max_early_data: Optional[int] = None


def split_records(data: bytes) -> tuple[list[Record], bytes]:
    """Split a byte stream into complete records; returns (records, incomplete rest)."""
    out = []
    i = 0
    while len(data) - i >= 5:
        n = int.from_bytes(data[i + 3:i + 5], "big")
        if len(data) - i - 5 < n:
            break
        out.append(Record(data[i], int.from_bytes(data[i + 1:i + 3], "big"), data[i + 5:i + 5 + n], data[i:i + 5]))
        i += 5 + n
    return out, data[i:]


def looks_like_tls(data: bytes) -> bool:
    """True if ``data`` starts like a TLS record (type 20..23, major version 3)."""
    if not data:
        return False
    if data[0] not in (20, 21, 22, 23):
        return False
    return len(data) < 2 or data[1] == 3


def handshake_messages(stream: bytes) -> Iterator[tuple[int, bytes]]:
    """(type, body) of each complete handshake message in a concatenation of handshake
    record payloads."""
    i = 0
    while len(stream) - i >= 4:
        n = int.from_bytes(stream[i + 1:i + 4], "big")
        if len(stream) - i - 4 < n:
            return
        yield stream[i], stream[i + 4:i + 4 + n]
        i += 4 + n


def parse_new_session_ticket(body: bytes, tls13: bool) -> NewSessionTicket:
    """Parse a NewSessionTicket body (raises ValueError if malformed)."""
    try:
        if not tls13:
            lifetime = int.from_bytes(body[0:4], "big")
            n = int.from_bytes(body[4:6], "big")
            ticket = body[6:6 + n]
            if len(ticket) != n:
                raise ValueError("truncated ticket")
            return NewSessionTicket(lifetime, ticket, False)
        lifetime = int.from_bytes(body[0:4], "big")
        age_add = int.from_bytes(body[4:8], "big")
        nl = body[8]
        nonce = body[9:9 + nl]
        i = 9 + nl
        tl = int.from_bytes(body[i:i + 2], "big")
        ticket = body[i + 2:i + 2 + tl]
        if len(ticket) != tl:
            raise ValueError("truncated ticket")
        i += 2 + tl
        el = int.from_bytes(body[i:i + 2], "big")
        ext = body[i + 2:i + 2 + el]
        max_early = None
        j = 0
        while len(ext) - j >= 4:
            et = int.from_bytes(ext[j:j + 2], "big")
            ln = int.from_bytes(ext[j + 2:j + 4], "big")
            if et == 42 and ln == 4:  # early_data
                max_early = int.from_bytes(ext[j + 4:j + 8], "big")
            j += 4 + ln
        return NewSessionTicket(lifetime, ticket, True, age_add, nonce, max_early)
    except IndexError:
        raise ValueError("truncated NewSessionTicket") from None


def ticket_format(ticket: bytes) -> str:
    """Classify a ticket's structure:

    - ``rfc5077``: key_name[16] iv[16] encrypted_state<0..2^16-1> (2-byte length) mac[32],
      exactly as RFC 5077 §4 recommends;
    - ``rfc5077-openssl``: key_name[16] iv[16] CBC blocks (no length field) mac[32], the
      layout OpenSSL (and so nginx, Apache, HAProxy) uses;
    - ``opaque``: anything else, e.g. a TLS 1.3 stateful ticket (a 32-byte session id) or
      a vendor format. Only the first two carry a key_name.
    """
    n = len(ticket)
    if n >= KEY_NAME_BYTES + IV_BYTES + 2 + MAC_BYTES:
        inner = int.from_bytes(ticket[32:34], "big")
        if KEY_NAME_BYTES + IV_BYTES + 2 + inner + MAC_BYTES == n:
            return "rfc5077"
    body = n - KEY_NAME_BYTES - IV_BYTES - MAC_BYTES
    if body >= 16 and body % 16 == 0:
        return "rfc5077-openssl"
    return "opaque"


def key_name(ticket: bytes) -> Optional[bytes]:
    """The first 16 bytes of a ticket following RFC 5077's structure, else None."""
    return ticket[:KEY_NAME_BYTES] if ticket_format(ticket) != "opaque" else None


def client_random(client_hello_record: bytes) -> Optional[bytes]:
    """The 32-byte random of a ClientHello (first record the client sent)."""
    if len(client_hello_record) < 43 or client_hello_record[0] != CT_HANDSHAKE or client_hello_record[5] != 1:
        return None
    return client_hello_record[11:43]


@dataclass(frozen=True)
class ServerFlight:
    """What the server sent in the clear before ChangeCipherSpec / encryption."""

    server_hello_version: Optional[int] = None     # legacy_version field
    session_id: bytes = b""                        # ServerHello session_id (TLS 1.2 meaning)
    tickets: tuple[NewSessionTicket, ...] = ()     # TLS 1.2 NewSessionTicket(s)
    alert: Optional[tuple[int, int]] = None        # (level, description) of a cleartext alert


def parse_cleartext_flight(records: list[Record]) -> ServerFlight:
    """ServerHello, TLS 1.2 NewSessionTicket and alerts from the records before the server's
    ChangeCipherSpec (TLS 1.2) or before encryption starts (TLS 1.3)."""
    hs = bytearray()
    alert = None
    for r in records:
        if r.content_type == CT_CHANGE_CIPHER_SPEC:
            # TLS 1.2: the ticket precedes CCS. TLS 1.3: middlebox CCS after ServerHello;
            # everything later is encrypted anyway.
            break
        if r.content_type == CT_HANDSHAKE:
            hs += r.payload
        elif r.content_type == CT_ALERT and len(r.payload) >= 2 and alert is None:
            alert = (r.payload[0], r.payload[1])
        elif r.content_type == CT_APPLICATION_DATA:
            break
    version = None
    sid = b""
    tickets = []
    for t, body in handshake_messages(bytes(hs)):
        if t == HT_SERVER_HELLO and len(body) >= 35:
            version = int.from_bytes(body[0:2], "big")
            sl = body[34]
            sid = body[35:35 + sl]
        elif t == HT_NEW_SESSION_TICKET:
            try:
                tickets.append(parse_new_session_ticket(body, tls13=False))
            except ValueError:
                pass
    return ServerFlight(version, sid, tuple(tickets), alert)


def first_alert(records: list[Record]) -> Optional[tuple[int, int]]:
    """The first cleartext alert record (level, description), if any."""
    for r in records:
        if r.content_type == CT_ALERT and len(r.payload) == 2:
            return r.payload[0], r.payload[1]
    return None
