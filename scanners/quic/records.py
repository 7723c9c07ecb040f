"""Options and result records of the QUIC scanners (frozen dataclasses; units in names or
docstrings: seconds ``_s``, milliseconds ``_ms``, bytes ``_len``)."""
from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from typing import Optional

#: QUIC version 1 (RFC 9000) and version 2 (RFC 9369).
QUIC_V1 = 0x00000001
QUIC_V2 = 0x6B3343CF
#: Reserved ("greasing") version of the form 0x?a?a?a?a (RFC 9000 section 15): a server
#: never supports it, so an Initial carrying it forces a Version Negotiation packet.
RESERVED_VERSION = 0x1A2A3A4A


@dataclass(frozen=True)
class ConnectOptions:
    """How one QUIC connection is made.

    :ivar timeout_s: limit for the whole connection (handshake, request, waiting for state), s.
    :ivar state_wait_s: after the HTTP/3 response, how long to keep listening for NEW_TOKEN
        frames and session tickets, s (the testbed sends its token 50 ms after the handshake).
    :ivar alpn: ALPN protocols offered.
    :ivar path: HTTP/3 request path (one GET per connection, so tickets arrive).
    :ivar early_data: send the request as 0-RTT when a ticket allowing early data is presented.
    :ivar request: send the GET at all; False = close right after the handshake (benchmarks).
    :ivar user_agent: the GET's user-agent header (the CLI puts etiquette.contact in it).
    """

    timeout_s: float = 5.0
    state_wait_s: float = 0.25
    alpn: tuple[str, ...] = ("h3",)
    path: str = "/"
    early_data: bool = True
    request: bool = True
    user_agent: str = "netsurvey"


@dataclass(frozen=True)
class TokenSeen:
    """One NEW_TOKEN token received.

    :ivar after_handshake_ms: time from handshake completion to its arrival, ms.
    :ivar token: the token bytes (opaque to the client).
    """

    received_at: dt.datetime
    after_handshake_ms: float
    token: bytes


@dataclass(frozen=True)
class TicketSeen:
    """One TLS 1.3 NewSessionTicket received.

    :ivar lifetime_s: ticket_lifetime the server advertised, s.
    :ivar max_early_data: max_early_data_size (bytes), None without the early_data extension.
    :ivar ticket: the ticket (PSK identity) bytes.
    """

    received_at: dt.datetime
    after_handshake_ms: float
    lifetime_s: int
    max_early_data: Optional[int]
    ticket: bytes
    age_add: int


@dataclass(frozen=True)
class Certificate:
    """Leaf certificate of the server (not verified; recorded)."""

    sha256: str
    subject: str
    issuer: str
    not_after: dt.datetime
    sans: tuple[str, ...]


@dataclass(frozen=True)
class HandshakeResult:
    """One QUIC connection to one address.

    :ivar client_port: our UDP port (links the connection to server-side logs).
    :ivar version: negotiated QUIC version (int), None if no handshake.
    :ivar retry: the server answered the first Initial with a Retry (address validation).
    :ivar handshake_ms: first Initial sent to handshake completion, ms.
    :ivar presented_token_len: bytes of the NEW_TOKEN token put in the first Initial, None if none.
    :ivar presented_ticket: the session ticket offered for resumption, None if none.
    :ivar session_resumed: the server accepted the ticket (PSK).
    :ivar early_data_sent: the request went out as 0-RTT.
    :ivar early_data_accepted: the server accepted the 0-RTT data.
    :ivar transport_parameters: the server's transport parameters (name -> value; bytes as hex).
    :ivar close_code: error code of a CONNECTION_CLOSE the server sent, None if none.
    """

    hostname: Optional[str]
    address: str
    port: int
    started_at: dt.datetime
    client_port: Optional[int] = None
    version: Optional[int] = None
    alpn: Optional[str] = None
    retry: bool = False
    handshake_ms: Optional[float] = None
    http_status: Optional[int] = None
    presented_token_len: Optional[int] = None
    presented_ticket: Optional[bytes] = None
    presented_beyond_lifetime: bool = False
    session_resumed: bool = False
    early_data_sent: bool = False
    early_data_accepted: bool = False
    transport_parameters: dict = field(default_factory=dict)
    certificate: Optional[Certificate] = None
    tokens: tuple[TokenSeen, ...] = ()
    tickets: tuple[TicketSeen, ...] = ()
    close_code: Optional[int] = None
    close_reason: Optional[str] = None


@dataclass(frozen=True)
class VersionProbeResult:
    """Answer to an Initial with :data:`RESERVED_VERSION`.

    :ivar answer: 'version-negotiation', 'none' (silence), 'refused' (ICMP unreachable),
        'garbage' (a reply that is no valid Version Negotiation for our connection IDs).
    :ivar versions: versions the server offered (in its order).
    :ivar rtt_ms: probe to answer, ms.
    :ivar reply_len: bytes of the first reply.
    """

    answer: str
    versions: tuple[int, ...] = ()
    rtt_ms: Optional[float] = None
    reply_len: Optional[int] = None


@dataclass(frozen=True)
class DiscoveryResult:
    """Discovery of one (hostname, address).

    :ivar alt_svc: the Alt-Svc header of an HTTPS (TCP) response, None if absent/failed.
    :ivar alt_svc_h3_ma_s: ``ma`` of the first h3 alternative, s (RFC 7838 default 86400).
    :ivar https_status: HTTP status of that response; ``https_error`` why it failed.
    :ivar https_rr_alpn: ALPN ids of the HTTPS (type 65) DNS record; None if there is none
        (``https_rr_error`` says why: nxdomain, nodata, timeout, ...).
    """

    alt_svc: Optional[str]
    alt_svc_h3: bool
    alt_svc_h3_ma_s: Optional[int]
    https_error: Optional[str]
    https_status: Optional[int]
    https_rr_alpn: Optional[tuple[str, ...]]
    https_rr_no_default_alpn: bool
    https_rr_error: Optional[str]
    probe: VersionProbeResult
    probed_at: Optional[dt.datetime] = None


@dataclass(frozen=True)
class TurnoverOptions:
    """Repeated connections of ``netsurvey scan quic-turnover``.

    :ivar every_s: interval between rounds, s (the thesis: 600).
    :ivar duration_s: total observation time, s (the thesis: 172800).
    """

    every_s: float
    duration_s: float
    connect: ConnectOptions = ConnectOptions()
