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
    """Classify a ticket's structure (the legacy ``ticket_format`` column):

    - ``rfc5077``: key_name[16] iv[16] encrypted_state<0..2^16-1> (2-byte length) mac[32],
      exactly as RFC 5077 §4 recommends;
    - ``rfc5077-openssl``: key_name[16] iv[16] CBC blocks (no length field) mac[32], the
      layout OpenSSL (and so nginx, Apache, HAProxy) uses;
    - ``opaque``: anything else (GnuTLS's 20-byte MAC variant of the first, Go, JSSE,
      a TLS 1.3 stateful ticket = 32-byte session id, ...).

    Which family issued a ticket and whether it carries a key id is ``ticket_layout`` /
    ``infer_layout`` below; this function is kept for the ``ticket_format`` column.
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


# --------------------------------------------------------------------- ticket layouts
# How each implementation lays out the tickets its *default* ticketer issues (the one a
# server uses without a ticket-key callback or a custom wrapper). Only the layout is
# visible to us; the contents are encrypted. Sources (function names are stable across
# versions; the versions are the ones the testbed's zoo runs or that we read):
#
# openssl  key_name[16] iv[16] AES-256-CBC(state, PKCS#7)[16k] HMAC-SHA256[32].
#          OpenSSL ssl/statem/statem_srvr.c construct_stateless_ticket() (TLSEXT_KEYNAME_LENGTH
#          16, "AES-256-CBC", iv_len = EVP_CIPHER_CTX_get_iv_length); the same for TLS 1.2
#          and 1.3. BoringSSL ssl/ssl_session.cc ssl_encrypt_ticket_with_cipher_ctx()
#          (key_name[16], EVP_aes_128_cbc iv[16], HMAC tlsext_tick_md = SHA-256) and rustls
#          with the aws-lc-rs provider (rustls/src/crypto/aws_lc_rs/ticketer.rs
#          Rfc5077Ticketer::encrypt: key_name[16] iv[16] AES-256-CBC mac[32]) are the same
#          layout and cannot be told apart from OpenSSL by their tickets.
#          H2O (2.2, src/ssl.c ticket_key_callback(): its own rotating keys handed to
#          OpenSSL's ticket-key callback, name[16], AES-256-CBC, HMAC-SHA256) is this layout.
# boringssl BoringSSL ssl/ssl_session.cc ssl_encrypt_ticket_with_cipher_ctx(): key_name[16]
#          iv[16] AES-128-CBC HMAC-SHA256[32] - the openssl layout, byte for byte in shape.
#          What tells it apart is the TLS 1.3 NewSessionTicket around it: BoringSSL's
#          ticket_nonce is ONE byte (ssl/tls13_server.cc add_new_session_tickets(): nonce[] =
#          {i}), OpenSSL's is 8 (ssl/statem/statem_srvr.c TICKET_NONCE_SIZE 8), rustls's 32. So the
#          family is boringssl where the openssl-shaped tickets came with 1-byte nonces; a
#          TLS 1.2 probe has no nonce and reads openssl (the survey relabels it when its key
#          name equals one of the same target's boringssl TLS 1.3 tickets: one ticket key).
# gnutls   key_name[16] IV[16] uint16 length AES-256-CBC(state, zero-padded)[16k]
#          HMAC-SHA1[20]. GnuTLS lib/ext/session_ticket.c _gnutls_encrypt_session_ticket()
#          and pack_ticket(); sizes in lib/gnutls_int.h (TICKET_KEY_NAME_SIZE 16,
#          TICKET_IV_SIZE 16, TICKET_MAC_ALGO GNUTLS_MAC_SHA1, TICKET_MAC_SIZE 20), 3.7.9 and
#          master; TLS 1.3 tickets go through the same function (lib/tls13/session_ticket.c
#          generate_session_ticket()).
# rfc5077  key_name[16] iv[16] uint16 length state mac[32]: RFC 5077 §4 "Recommended
#          Ticket Construction" verbatim (no zoo member uses it; kept from the old parser).
# go       iv[16] AES-CTR(state)[len(state)] HMAC-SHA256[32] - no key name: the server
#          tries every key (Go >= 1.21, src/crypto/tls/ticket.go Config.encryptTicket() /
#          decryptTicket(); Go <= 1.20 prefixed a 16-byte keyName).
# jsse     key_id[4] (int, +1 per key) iv[16] AES-GCM(state)+tag[16]. OpenJDK
#          src/java.base/share/classes/sun/security/ssl/SessionTicketExtension.java
#          SessionTicketSpec.encrypt(); keys change every jdk.tls.server.statelessKeyTimeout
#          (default 3600 s, KeyState.getCurrentKey()).
# rustls   key_name[16] nonce[12] ChaCha20-Poly1305(state)+tag[16] with the ring provider
#          (rustls/src/crypto/ring/ticketer.rs AeadTicketer::encrypt).
# unknown  anything else, e.g. a TLS 1.3 stateful ticket (OpenSSL with SSL_OP_NO_TICKET
#          sends a 32-byte session id) or a vendor format.
#
# A single ticket proves only the two length-carrying layouts (gnutls, rfc5077). The
# others are told apart by what stays constant between two tickets of one server: a key
# id is the same in both (16 bytes: openssl/rustls, 4 bytes: jsse), a random IV is not
# (go). ``infer_layout`` does that.

GNUTLS_MAC_BYTES = 20
JSSE_KEY_ID_BYTES = 4
GO_MIN_BYTES = IV_BYTES + 1 + MAC_BYTES          # iv, >= 1 byte of state, mac
RUSTLS_RING_MIN_BYTES = KEY_NAME_BYTES + 12 + 16 + 1

#: family -> key id length in bytes (0: the layout has no key id).
FAMILY_KEY_ID_BYTES = {"openssl": 16, "gnutls": 16, "rfc5077": 16, "rustls": 16, "jsse": 4, "go": 0,
                       "boringssl": 16, "unknown": 0}
#: TLS 1.3 ticket_nonce length of BoringSSL's NewSessionTicket (see the table above).
BORINGSSL_NONCE_BYTES = 1
FAMILIES = tuple(FAMILY_KEY_ID_BYTES)


@dataclass(frozen=True)
class TicketLayout:
    """The inferred layout of a server's tickets.

    :ivar family: one of FAMILIES (see the table above).
    :ivar key_id_len: bytes of the key id at the ticket's start (0: no key id, so no
        STEK rotation can be read from the tickets).
    :ivar basis: how many tickets the inference compared (1: structure only).
    """

    family: str
    key_id_len: int
    basis: int = 1


def _structural(ticket: bytes) -> str:
    """Family from one ticket's structure alone: ``gnutls`` / ``rfc5077`` (length field
    and MAC size match exactly), ``openssl`` (CBC-shaped between a 32-byte head and a
    32-byte MAC: also what a Go ticket of a 16k-byte state looks like), else ``unknown``."""
    n = len(ticket)
    if n >= KEY_NAME_BYTES + IV_BYTES + 2 + 16 + GNUTLS_MAC_BYTES:
        inner = int.from_bytes(ticket[32:34], "big")
        if inner and inner % 16 == 0 and KEY_NAME_BYTES + IV_BYTES + 2 + inner + GNUTLS_MAC_BYTES == n:
            return "gnutls"
        if KEY_NAME_BYTES + IV_BYTES + 2 + inner + MAC_BYTES == n:
            return "rfc5077"
    body = n - KEY_NAME_BYTES - IV_BYTES - MAC_BYTES
    if body >= 16 and body % 16 == 0:
        return "openssl"
    return "unknown"


def ticket_layout(ticket: bytes) -> TicketLayout:
    """The layout of one ticket from its structure alone (basis 1)."""
    fam = _structural(ticket)
    return TicketLayout(fam, FAMILY_KEY_ID_BYTES[fam], 1)


def _common_prefix(tickets: list[bytes]) -> int:
    """The longest prefix some two of the tickets share (a pair, not all: a key rotation
    between two of a probe's tickets must not hide the key id the others share)."""
    best = 0
    for i, a in enumerate(tickets):
        for b in tickets[i + 1:]:
            n = min(len(a), len(b))
            k = 0
            while k < n and a[k] == b[k]:
                k += 1
            best = max(best, k)
    return best


def infer_layout(tickets, nonce_lens=()) -> Optional[TicketLayout]:
    """The layout of a server's tickets from all tickets one probe received (same server,
    same moment, so mostly the same ticket key). None without tickets. With one ticket, the
    structure decides (``ticket_layout``). With two or more, the longest prefix two of
    them share decides
    where the structure cannot: >= 16 equal bytes = a 16-byte key name (openssl, or
    rustls when not CBC-shaped), 4..15 = JSSE's 4-byte key id, < 4 = a random IV first
    (go, if long enough; else unknown). The length-carrying layouts (gnutls, rfc5077) are
    kept whatever the prefix (a key change between the two tickets does not change the
    layout). ``nonce_lens``: the TLS 1.3 ticket_nonce lengths of those tickets (empty for
    TLS 1.2): an openssl-shaped layout whose nonces are all 1 byte is ``boringssl``."""
    lay = _infer_layout(tickets)
    nl = [n for n in nonce_lens if n is not None]
    if lay is not None and lay.family == "openssl" and nl and all(n == BORINGSSL_NONCE_BYTES for n in nl):
        return TicketLayout("boringssl", FAMILY_KEY_ID_BYTES["boringssl"], lay.basis)
    return lay


def _infer_layout(tickets) -> Optional[TicketLayout]:
    tickets = [bytes(t) for t in tickets if t]
    if not tickets:
        return None
    fams = {_structural(t) for t in tickets}
    if len(tickets) == 1:
        return ticket_layout(tickets[0])
    basis = len(tickets)
    if len(fams) == 1 and next(iter(fams)) in ("gnutls", "rfc5077"):
        fam = next(iter(fams))
        return TicketLayout(fam, FAMILY_KEY_ID_BYTES[fam], basis)
    p = _common_prefix(tickets)
    shortest = min(len(t) for t in tickets)
    if p >= KEY_NAME_BYTES:
        fam = "openssl" if fams == {"openssl"} else ("rustls" if shortest >= RUSTLS_RING_MIN_BYTES else "unknown")
    elif p >= JSSE_KEY_ID_BYTES:
        fam = "jsse" if shortest >= JSSE_KEY_ID_BYTES + IV_BYTES + 16 else "unknown"
    else:
        fam = "go" if shortest >= GO_MIN_BYTES else "unknown"
    if fam == "unknown":
        return TicketLayout("unknown", 0, basis)
    return TicketLayout(fam, FAMILY_KEY_ID_BYTES[fam], basis)


def key_id(ticket: bytes, layout: Optional[TicketLayout]) -> Optional[bytes]:
    """The key id bytes of ``ticket`` under ``layout`` (None where the layout has none)."""
    if layout is None or layout.key_id_len <= 0 or len(ticket) < layout.key_id_len:
        return None
    return bytes(ticket[:layout.key_id_len])


def key_name(ticket: bytes) -> Optional[bytes]:
    """The key id of one ticket judged by its structure alone (16 bytes for the
    openssl/gnutls/rfc5077 layouts), else None. A probe with several tickets uses
    ``infer_layout`` + ``key_id`` instead."""
    return key_id(ticket, ticket_layout(ticket))


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
