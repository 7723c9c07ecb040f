"""Options and result records of the TLS scanners (frozen; units in the docstrings)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from .wire import TicketLayout

VERSIONS = ("1.2", "1.3")


@dataclass(frozen=True)
class TlsOptions:
    """Options of the handshake survey (``netsurvey scan tls``).

    :ivar versions: TLS versions probed separately per target, each pinned (min = max).
    :ivar port: TCP port.
    :ivar timeout: seconds for connect and for each read.
    :ivar deadline: seconds one handshake may take in all, from connect to the end of the
        TLS 1.3 ticket read (a server trickling records never trips the per-read timeout);
        None = 2 x ``timeout``. Exceeding it is recorded as ``io-timeout`` with reason
        ``handshake-deadline: ...``. A target costs at most about (2 + resumption checks) x
        deadline per version.
    :ivar verify: verify the certificate chain and hostname (a failure is recorded as
        ``bad-certificate``); False accepts any certificate and still records it.
    :ivar check_resumption: after the initial handshake, try once to resume by session ID
        (TLS 1.2, tickets disabled) and by ticket, immediately (classifies support).
    :ivar ipv6: also probe the target's IPv6 addresses.
    :ivar tls13_request: the request sent after a TLS 1.3 handshake to collect the
        post-handshake tickets: ``HEAD`` (default) or ``GET``. BoringSSL sends its tickets
        only with the server's next write (ssl/tls13_server.cc do_send_new_session_ticket), so
        a server that answers HEAD with nothing (``bssl server -www``) shows them only to GET.
    """

    versions: tuple[str, ...] = VERSIONS
    port: int = 443
    timeout: float = 5.0
    deadline: Optional[float] = None
    verify: bool = True
    check_resumption: bool = True
    ipv6: bool = True
    tls13_request: str = "HEAD"


@dataclass(frozen=True)
class TicketInfo:
    """One session ticket the server issued.

    :ivar lifetime: ticket_lifetime_hint (TLS 1.2) / ticket_lifetime (TLS 1.3), seconds.
    :ivar length: ticket length, bytes.
    :ivar key_name: the key id judged from this ticket's structure alone (16 bytes for the
        openssl/gnutls/rfc5077 layouts, see wire.ticket_layout), else None.
    :ivar format: ``rfc5077``, ``rfc5077-openssl`` or ``opaque`` (see wire.ticket_format).
    :ivar family: layout family from this ticket's structure alone (wire.ticket_layout);
        the probe's verdict over all its tickets is HandshakeObservation.layout.
    :ivar max_early_data: TLS 1.3 early_data extension's max_early_data_size, bytes (None if absent).
    :ivar ticket: the ticket bytes.
    :ivar nonce_len: TLS 1.3 ticket_nonce length, bytes (None for TLS 1.2): BoringSSL's is 1
        (wire.infer_layout tells its openssl-shaped tickets apart by it).
    """

    lifetime: int
    length: int
    key_name: Optional[bytes]
    format: str
    max_early_data: Optional[int]
    ticket: bytes
    family: str = "unknown"
    nonce_len: Optional[int] = None


@dataclass(frozen=True)
class HandshakeObservation:
    """One full handshake with one address, SNI and pinned version.

    :ivar version: requested version ('1.2' / '1.3').
    :ivar status: ScanStatus value ('success', 'application-error', ...).
    :ivar error: failure reason ('tls-alert:protocol_version', 'bad-certificate: ...',
        'not-tls', 'reset', 'timeout', 'handshake-deadline: ...', ...). On success None, or
        why the resumption checks could not be run although the handshake succeeded
        ('session-unavailable: i2d() failed': OpenSSL cannot export the session, e.g. for
        a very large certificate chain; id_resumed / ticket_resumed are then None).
    :ivar negotiated: negotiated version as Python reports it ('TLSv1.3'), None on failure.
    :ivar cipher: negotiated cipher suite name.
    :ivar session_id_len: ServerHello session_id length in bytes (TLS 1.2 only; None for 1.3,
        where the field only echoes the client's).
    :ivar tickets: the tickets issued (TLS 1.2: in the handshake; TLS 1.3: after it).
    :ivar cert_sha256: SHA-256 of the leaf certificate (DER), bytes.
    :ivar cert_issuer: issuer DN (RFC 4514).
    :ivar cert_sans: DNS names of the subjectAltName extension.
    :ivar id_resumed: an immediate resumption by session ID (tickets disabled) succeeded
        (TLS 1.2; None if not tried).
    :ivar ticket_resumed: an immediate resumption with the first ticket succeeded (None if
        not tried, e.g. no ticket).
    :ivar handshake_ms: time from TCP connect to handshake completion, milliseconds.
    :ivar cert_verified: the certificate chain and name verified against the system CAs
        (None: verification off, ``--no-verify``, or no handshake). A host whose
        certificate fails is measured regardless (a second, unverified handshake), as the
        thesis did: figures may filter on this.
    :ivar cert_error: why verification failed (OpenSSL's verify message), else None.
    :ivar layout: the ticket layout inferred from every ticket this probe received
        (wire.infer_layout; None without tickets).
    :ivar layout_tickets: the ticket bytes that inference compared.
    """

    version: str
    status: str
    error: Optional[str] = None
    negotiated: Optional[str] = None
    cipher: Optional[str] = None
    session_id_len: Optional[int] = None
    tickets: tuple[TicketInfo, ...] = ()
    cert_sha256: Optional[bytes] = None
    cert_issuer: Optional[str] = None
    cert_sans: tuple[str, ...] = ()
    id_resumed: Optional[bool] = None
    ticket_resumed: Optional[bool] = None
    handshake_ms: Optional[float] = None
    cert_verified: Optional[bool] = None
    cert_error: Optional[str] = None
    layout: Optional[TicketLayout] = None
    layout_tickets: tuple[bytes, ...] = ()


@dataclass(frozen=True)
class TlsSurveyResult:
    """All versions probed at one (hostname, address)."""

    observations: tuple[HandshakeObservation, ...]


@dataclass(frozen=True)
class ResumptionAttempt:
    """One attempt to resume a session (lifetime and shared-state probes).

    :ivar mechanism: 'id' (TLS 1.2 session ID, tickets disabled) or 'ticket'.
    :ivar version: '1.2' or '1.3'.
    :ivar origin_host / origin_address: where the session was established.
    :ivar host / address: where resumption was attempted (SNI / destination).
    :ivar age: seconds between the initial handshake's completion and this attempt.
    :ivar resumed: the server accepted the session (abbreviated handshake / PSK).
    :ivar status / error: outcome of the attempt's handshake itself.
    :ivar chain_index: position in a --chain sequence (0 = first resumption after the
        initial handshake; always 0 without --chain).
    :ivar key_name: key_name of the presented ticket (None for IDs / opaque tickets).
    """

    mechanism: str
    version: str
    origin_host: str
    origin_address: str
    host: str
    address: str
    age: float
    resumed: bool
    status: str
    error: Optional[str] = None
    chain_index: int = 0
    key_name: Optional[bytes] = None
