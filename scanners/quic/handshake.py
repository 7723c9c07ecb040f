"""One QUIC connection with aioquic's client, recording what the server hands out.

The connection sends one HTTP/3 GET (as 0-RTT when a ticket allowing early data is
presented), waits for the response and then ``state_wait_s`` more for NEW_TOKEN frames and
session tickets, and closes. A token and/or ticket from an earlier connection can be
presented; the result says whether the server forced a Retry, resumed the session and
accepted 0-RTT.
"""
from __future__ import annotations

import asyncio
import collections
import dataclasses
import datetime as dt
import functools
import gc
import ipaddress
import os
import socket
import ssl
import time
from typing import Optional

from aioquic import tls
from aioquic.asyncio.protocol import QuicConnectionProtocol
from aioquic.buffer import Buffer
from aioquic.h3.connection import H3Connection
from aioquic.h3.events import DataReceived, HeadersReceived
from aioquic.quic import connection as _aioquic_connection, events
from aioquic.quic.configuration import QuicConfiguration
from aioquic.quic.connection import QuicConnection
from aioquic.quic.packet import pull_quic_transport_parameters
from aioquic.tls import SessionTicket
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization

from .records import Certificate, ConnectOptions, HandshakeResult, TicketSeen, TokenSeen

# aioquic rebuilds its frame-handler table (33 frozensets from EPOCHS("...")) for every
# connection, ~50 us; the sets are immutable, so cache them once per process.
if not hasattr(_aioquic_connection.EPOCHS, "cache_info"):
    _aioquic_connection.EPOCHS = functools.lru_cache(maxsize=None)(_aioquic_connection.EPOCHS)

_NO_COMMON_VERSION = "Could not find a common protocol version"  # aioquic's reason phrase
#: Key shares offered, in order: X25519 and P-256, as browsers do. aioquic's default adds
#: P-384 and X448 shares, ~0.4 ms of key generation per connection; aioquic has no
#: HelloRetryRequest, so a server supporting only those two now fails the handshake.
KEY_SHARE_GROUPS = (tls.Group.X25519, tls.Group.SECP256R1)
#: Connection IDs each side keeps (RFC 9000 minimum): we announce it as our
#: active_connection_id_limit and issue the server no more, one spare ID each way instead
#: of seven; nothing recorded depends on them.
ACTIVE_CONNECTION_ID_LIMIT = 2
#: How long our UDP port stays bound (unread) after the connection is dropped, s.
PORT_LINGER_S = 0.5


def settle_gc() -> None:
    """Tune the cyclic garbage collector for many short connections; call once after
    start-up. aioquic's connections are reference cycles, so collections run often: freeze
    the start-up objects (modules, config) out of them, and run the middle generation 10x
    less often, so a connection's cycles mostly die there instead of in full collections
    that walk the whole heap (together ~0.5 ms per handshake here)."""
    gc.collect()
    gc.freeze()
    young, _, old = gc.get_threshold()
    gc.set_threshold(young, 100, old)


class HandshakeFailed(Exception):
    """No completed handshake. ``kind``: 'timeout', 'refused' (ICMP), 'closed' (the server
    sent CONNECTION_CLOSE; ``code`` set), 'version-negotiation' (no common version offered)
    or 'error' (the client gave up, e.g. a malformed server message)."""

    def __init__(self, kind: str, message: str, partial: HandshakeResult, code: Optional[int] = None):
        super().__init__(message)
        self.kind = kind
        self.partial = partial
        self.code = code


def _utcnow() -> dt.datetime:
    return dt.datetime.now(dt.timezone.utc)


class _RecordingConnection(QuicConnection):
    """Client connection that keeps the server's transport parameters as received."""

    received_transport_parameters = None
    peer_closed = False  # the server sent CONNECTION_CLOSE

    def __init__(self, **kw):
        super().__init__(**kw)
        self._local_active_connection_id_limit = ACTIVE_CONNECTION_ID_LIMIT

    def _initialize(self, peer_cid: bytes) -> None:
        super()._initialize(peer_cid)
        self.tls._supported_groups = list(KEY_SHARE_GROUPS)

    def _handle_connection_close_frame(self, context, frame_type, buf) -> None:
        self.peer_closed = True
        super()._handle_connection_close_frame(context, frame_type, buf)

    def _parse_transport_parameters(self, data: bytes, from_session_ticket: bool = False) -> None:
        if not from_session_ticket:
            try:
                self.received_transport_parameters = pull_quic_transport_parameters(Buffer(data=data))
            except Exception:  # malformed: aioquic's own parser closes the connection
                pass
        super()._parse_transport_parameters(data, from_session_ticket)
        # Issue the server one spare connection ID, not up to seven (a probe never migrates).
        self._remote_active_connection_id_limit = min(self._remote_active_connection_id_limit,
                                                      ACTIVE_CONNECTION_ID_LIMIT)


class _Probe(QuicConnectionProtocol):
    """Protocol of one probe connection: HTTP/3 request/response and event bookkeeping."""

    def __init__(self, quic: QuicConnection, *, h3: bool = True, **kw):
        super().__init__(quic, **kw)
        self.h3 = H3Connection(quic) if h3 else None  # only when a request is sent
        self.handshake_done: Optional[events.HandshakeCompleted] = None
        self.handshake_at: Optional[float] = None
        self.terminated: Optional[events.ConnectionTerminated] = None
        self.refused = False
        self.http_status: Optional[int] = None
        self.response_done = asyncio.Event()
        self.finished = asyncio.Event()  # handshake completed, failed or connection terminated

    def error_received(self, exc: Exception) -> None:
        if isinstance(exc, ConnectionRefusedError):
            self.refused = True
            self.finished.set()

    def quic_event_received(self, event: events.QuicEvent) -> None:
        if isinstance(event, events.HandshakeCompleted):
            self.handshake_done = event
            self.handshake_at = time.monotonic()
            self.finished.set()
        elif isinstance(event, events.ConnectionTerminated):
            self.terminated = event
            self.finished.set()
            self.response_done.set()
        if self.h3 is None:
            return
        for h3_event in self.h3.handle_event(event):
            if isinstance(h3_event, HeadersReceived):
                for k, v in h3_event.headers:
                    if k == b":status":
                        try:
                            self.http_status = int(v)
                        except ValueError:
                            pass
                if h3_event.stream_ended:
                    self.response_done.set()
            elif isinstance(h3_event, DataReceived) and h3_event.stream_ended:
                self.response_done.set()


_CERT_CACHE: dict[bytes, Certificate] = {}  # DER -> record; bounded below


def _certificate(cert: Optional[x509.Certificate]) -> Optional[Certificate]:
    """The leaf certificate's record (cached by its DER bytes: a scan meets the same
    certificate on many connections)."""
    if cert is None:
        return None
    der = cert.public_bytes(serialization.Encoding.DER)
    rec = _CERT_CACHE.get(der)
    if rec is None:
        if len(_CERT_CACHE) >= 4096:
            _CERT_CACHE.clear()
        rec = _CERT_CACHE[der] = _certificate_record(cert)
    return rec


def _certificate_record(cert: x509.Certificate) -> Certificate:
    try:
        sans = tuple(cert.extensions.get_extension_for_class(x509.SubjectAlternativeName)
                     .value.get_values_for_type(x509.DNSName))
    except x509.ExtensionNotFound:
        sans = ()
    return Certificate(sha256=cert.fingerprint(hashes.SHA256()).hex(), subject=cert.subject.rfc4514_string(),
                       issuer=cert.issuer.rfc4514_string(), not_after=cert.not_valid_after_utc, sans=sans)


def _transport_parameters(tp) -> dict:
    if tp is None:
        return {}
    out = {}
    for f in dataclasses.fields(tp):
        v = getattr(tp, f.name)
        if v is None:
            continue
        if isinstance(v, bytes):
            v = v.hex()
        elif dataclasses.is_dataclass(v):
            v = {k: (x.hex() if isinstance(x, bytes) else x if isinstance(x, (int, str, bool, type(None)))
                     else str(x)) for k, x in dataclasses.asdict(v).items()}  # type: ignore[arg-type]  # a field's value: an instance
        out[f.name] = v
    return out


def _connected_socket(address: str, port: int) -> tuple[socket.socket, tuple]:
    """A non-blocking UDP socket connected to the target (so ICMP errors are reported)."""
    family = socket.AF_INET6 if ipaddress.ip_address(address).version == 6 else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_DGRAM)
    try:
        sock.setblocking(False)
        sock.connect((address, port))
        return sock, sock.getpeername()
    except OSError:
        sock.close()
        raise


_LINGERING: collections.deque[tuple[float, socket.socket]] = collections.deque()


def _linger(sock: socket.socket) -> None:
    """Keep ``sock`` (bound, never read) open for PORT_LINGER_S; it is closed by a later
    call, or at exit."""
    now = time.monotonic()
    while _LINGERING and _LINGERING[0][0] <= now:
        _LINGERING.popleft()[1].close()
    _LINGERING.append((now + PORT_LINGER_S, sock))


def _extend(ticket: SessionTicket) -> tuple[SessionTicket, bool]:
    """The ticket with its client-side expiry lifted (aioquic does not offer an expired
    ticket); returns (ticket, whether it was past the advertised lifetime)."""
    beyond = not ticket.is_valid
    far = ticket.not_valid_before + dt.timedelta(days=3650)
    return dataclasses.replace(ticket, not_valid_after=far), beyond


async def quic_connect(hostname: Optional[str], address: str, port: int, opts: ConnectOptions, *,
                       token: Optional[bytes] = None,
                       ticket: Optional[SessionTicket] = None) -> tuple[HandshakeResult, list[SessionTicket]]:
    """Connect to ``address``:``port`` (SNI ``hostname``), presenting ``token``/``ticket``.

    Returns the result and the raw aioquic tickets received (for later presentation).
    Raises :class:`HandshakeFailed` when no handshake completes.
    """
    loop = asyncio.get_running_loop()
    started_at = _utcnow()
    t0 = time.monotonic()
    tokens: list[TokenSeen] = []
    tickets: list[TicketSeen] = []
    raw_tickets: list[SessionTicket] = []
    beyond = False
    if ticket is not None:
        ticket, beyond = _extend(ticket)
    cfg = QuicConfiguration(is_client=True, alpn_protocols=list(opts.alpn), server_name=hostname,
                            verify_mode=ssl.CERT_NONE, session_ticket=ticket, token=token or b"")
    proto_box: list[_Probe] = []

    def since_handshake() -> float:
        p = proto_box[0] if proto_box else None
        return 0.0 if p is None or p.handshake_at is None else (time.monotonic() - p.handshake_at) * 1000

    def on_token(tok: bytes) -> None:
        tokens.append(TokenSeen(_utcnow(), since_handshake(), bytes(tok)))

    def on_ticket(t: SessionTicket) -> None:
        raw_tickets.append(t)
        lifetime = round((t.not_valid_after - t.not_valid_before).total_seconds())
        tickets.append(TicketSeen(_utcnow(), since_handshake(), lifetime, t.max_early_data_size,
                                  bytes(t.ticket), t.age_add))

    quic = _RecordingConnection(configuration=cfg, session_ticket_handler=on_ticket, token_handler=on_token)
    sock, peer = _connected_socket(address, port)
    client_port = sock.getsockname()[1]
    transport, proto = await loop.create_datagram_endpoint(lambda: _Probe(quic, h3=opts.request), sock=sock)
    proto_box.append(proto)

    def result(**kw) -> HandshakeResult:
        hs = proto.handshake_done
        term = proto.terminated
        return HandshakeResult(
            hostname=hostname, address=address, port=port, client_port=client_port, started_at=started_at,
            version=quic._version if hs else None, alpn=hs.alpn_protocol if hs else None,
            retry=quic._retry_count > 0,
            handshake_ms=(proto.handshake_at - t0) * 1000 if proto.handshake_at else None,
            http_status=proto.http_status,
            presented_token_len=len(token) if token else None,
            presented_ticket=bytes(ticket.ticket) if ticket is not None else None,
            presented_beyond_lifetime=beyond,
            session_resumed=bool(hs and hs.session_resumed), early_data_sent=early,
            early_data_accepted=bool(hs and hs.early_data_accepted),
            transport_parameters=_transport_parameters(quic.received_transport_parameters),
            certificate=_certificate(getattr(quic.tls, "_peer_certificate", None)) if hs else None,
            tokens=tuple(tokens), tickets=tuple(tickets),
            close_code=term.error_code if term is not None and kw.get("peer_closed") else None,
            close_reason=term.reason_phrase if term is not None and kw.get("peer_closed") else None,
        )

    early = False
    try:
        early = bool(opts.request and opts.early_data and ticket is not None and ticket.max_early_data_size)
        deadline = t0 + opts.timeout_s
        proto.connect(peer, transmit=False)
        if early:  # the 0-RTT request shares the first datagram with the Initial
            _send_request(proto, hostname or address, opts.path, opts.user_agent)
        else:
            proto.transmit()
        await _wait(proto.finished, deadline - time.monotonic())
        if proto.handshake_done is None:
            if proto.refused:
                raise HandshakeFailed("refused", "ICMP port unreachable", result())
            t = proto.terminated
            if t is not None and quic.peer_closed:
                raise HandshakeFailed("closed", f"server closed: 0x{t.error_code:x} {t.reason_phrase}"[:300],
                                      result(peer_closed=True), t.error_code)
            if t is not None and t.reason_phrase == _NO_COMMON_VERSION:
                raise HandshakeFailed("version-negotiation", "version negotiation: no common version", result())
            if t is not None:
                raise HandshakeFailed("error", f"client closed: 0x{t.error_code:x} {t.reason_phrase}"[:300],
                                      result())
            raise HandshakeFailed("timeout", f"no handshake within {opts.timeout_s:g} s", result())
        if not opts.request:
            return result(peer_closed=quic.peer_closed), raw_tickets
        if not early:
            _send_request(proto, hostname or address, opts.path, opts.user_agent)
        await _wait(proto.response_done, max(0.05, deadline - time.monotonic()))
        # tickets and NEW_TOKEN frames may follow the response
        wait = min(opts.state_wait_s, max(0.0, deadline - time.monotonic()))
        if wait > 0 and proto.terminated is None:
            await asyncio.sleep(wait)
        return result(peer_closed=quic.peer_closed), raw_tickets
    finally:
        # Send CONNECTION_CLOSE once and drop the connection at once: a scanner does not sit
        # out the closing period (3 PTO, RFC 9000 section 10.2), which under load held each
        # in-flight slot ~0.3 s after a 30 ms handshake. The port stays bound, unread, for
        # PORT_LINGER_S, so packets the server sent before it saw the close are dropped
        # quietly instead of drawing ICMP port-unreachables (costly for both kernels).
        if proto.terminated is None:
            proto.close()
        if proto._timer is not None:
            proto._timer.cancel()
        linger = socket.socket(fileno=os.dup(sock.fileno()))
        transport.close()
        _linger(linger)


async def _wait(event: asyncio.Event, timeout_s: float) -> None:
    """Wait until ``event`` is set, at most ``timeout_s`` s. Unlike ``wait_for`` (3.11) no
    task is spawned, so we resume one loop pass after the event: the handshake-only probe
    then closes before the server's post-handshake packets arrive to be processed and acked."""
    try:
        async with asyncio.timeout(max(0.0, timeout_s)):
            await event.wait()
    except TimeoutError:
        pass


def _send_request(proto: _Probe, authority: str, path: str, user_agent: str) -> None:
    stream_id = proto._quic.get_next_available_stream_id()
    proto.h3.send_headers(stream_id, [  # type: ignore[union-attr]  # a request is sent: made with h3
        (b":method", b"GET"), (b":scheme", b"https"), (b":authority", authority.encode()),
        (b":path", path.encode()), (b"user-agent", user_agent.encode("utf-8", "replace"))], end_stream=True)
    proto.transmit()
