"""The TLS probing engine: one handshake over a non-blocking socket, with OpenSSL (Python's
``ssl``) driven through memory BIOs so every byte the server sends is kept. From those
bytes come what ``ssl`` hides: the ServerHello session ID, TLS 1.2 NewSessionTicket
(cleartext, before ChangeCipherSpec) and, decrypted with our own key log, TLS 1.3
NewSessionTicket messages (see tls13.py).

Failures are classified, never raised: refused / connect timeout / reset / EOF / read
timeout / handshake deadline / not TLS / TLS alert / bad certificate / other protocol errors.
The per-read ``timeout`` alone does not bound a probe (a server trickling records resets it
on every read), so every handshake also has an overall ``deadline``.
"""
from __future__ import annotations

import asyncio
import errno
import hashlib
import os
import socket
import ssl
import time
from dataclasses import dataclass, field
from typing import Optional

from netsurvey.scanning import ScanStatus

from .results import TicketInfo
from .sessions import StoredSession, put as put_session, take as take_session
from .tls13 import KeyLog, post_handshake_tickets
from .wire import (
    ALERTS,
    client_random,
    first_alert,
    key_name,
    looks_like_tls,
    parse_cleartext_flight,
    split_records,
    ticket_format,
    ticket_layout,
)

_TLS_VERSION = {"1.2": ssl.TLSVersion.TLSv1_2, "1.3": ssl.TLSVersion.TLSv1_3}


def make_context(version: str, *, tickets: bool = True, verify: bool = True,
                 keylog: Optional[KeyLog] = None) -> ssl.SSLContext:
    """A client context pinned to one TLS version. ``tickets=False`` sets OP_NO_TICKET
    (TLS 1.2: the client offers no session_ticket extension, so only the session ID can
    resume). The key log is needed to read TLS 1.3 tickets."""
    ctx = ssl.create_default_context() if verify else ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    if not verify:
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
    ctx.minimum_version = ctx.maximum_version = _TLS_VERSION[version]
    if not tickets:
        ctx.options |= ssl.OP_NO_TICKET
    if keylog is not None and version == "1.3":
        ctx.keylog_filename = str(keylog.path)
    return ctx


@dataclass
class Handshake:
    """Everything one connection showed (internal; converted to result records)."""

    status: ScanStatus
    error: Optional[str] = None
    negotiated: Optional[str] = None
    cipher: Optional[str] = None
    session_id: Optional[bytes] = None
    tickets: list[TicketInfo] = field(default_factory=list)
    cert_der: Optional[bytes] = None
    resumed: bool = False
    session: Optional[StoredSession | ssl.SSLSession] = None   # ssl.SSLSession where libssl is not reachable
    handshake_ms: Optional[float] = None
    completed_at: Optional[float] = None   # time.monotonic() at handshake completion
    session_error: Optional[str] = None    # why ``session`` is None after a successful handshake

    @property
    def ok(self) -> bool:
        return self.status is ScanStatus.SUCCESS


class _Closed(Exception):
    def __init__(self, why: str):
        self.why = why


def default_deadline(timeout: float) -> float:
    """Overall seconds for one handshake when none is given: twice the per-read timeout."""
    return 2 * timeout


def _ticket_info(t) -> TicketInfo:
    return TicketInfo(lifetime=t.lifetime, length=len(t.ticket), key_name=key_name(t.ticket),
                      format=ticket_format(t.ticket), max_early_data=t.max_early_data, ticket=t.ticket,
                      family=ticket_layout(t.ticket).family,
                      nonce_len=len(t.nonce) if t.nonce is not None else None)


#: Handshake.error prefix of a certificate that failed verification.
BAD_CERTIFICATE = "bad-certificate:"


def _classify_ssl_error(exc: ssl.SSLError, rx: bytes) -> tuple[ScanStatus, str]:
    if rx and not looks_like_tls(rx):
        return ScanStatus.PROTOCOL_ERROR, "not-tls"
    if isinstance(exc, ssl.SSLCertVerificationError):
        return ScanStatus.APPLICATION_ERROR, f"{BAD_CERTIFICATE} {exc.verify_message}"[:200]
    records, _ = split_records(rx)
    alert = first_alert(records)
    if alert is not None:
        return ScanStatus.APPLICATION_ERROR, f"tls-alert:{ALERTS.get(alert[1], alert[1])}"
    reason = (exc.reason or "").upper()
    if "ALERT_" in reason:   # an encrypted alert (TLS 1.3) that OpenSSL decoded for us
        name = reason.split("ALERT_", 1)[1].lower()
        return ScanStatus.APPLICATION_ERROR, f"tls-alert:{name}"
    if "WRONG_VERSION_NUMBER" in reason or "RECORD_LAYER" in reason or "PACKET_LENGTH" in reason:
        return ScanStatus.PROTOCOL_ERROR, "not-tls"
    return ScanStatus.PROTOCOL_ERROR, f"tls-error:{(exc.reason or str(exc))}"[:200]


def _user_agent() -> str:
    """The HEAD's User-Agent: etiquette.contact of the run's config (netsurvey.etiquette)."""
    from netsurvey.clictx import state
    from netsurvey.etiquette import user_agent

    try:
        return user_agent(state.config.etiquette)
    except Exception:   # no config loaded (library use): the default contact
        from netsurvey.config import EtiquetteConfig

        return user_agent(EtiquetteConfig())


async def handshake(address: str, port: int, sni: Optional[str], ctx: ssl.SSLContext, *, timeout: float,
                    session: Optional[ssl.SSLSession] = None, keylog: Optional[KeyLog] = None,
                    read_tickets: bool = True, deadline: Optional[float] = None,
                    request: str = "HEAD") -> Handshake:
    """One TLS handshake with ``address``:``port`` presenting SNI ``sni`` (and ``session`` to
    resume). For TLS 1.3 with ``read_tickets`` it sends ``HEAD / HTTP/1.1`` (``request``:
    HEAD or GET) and reads the
    reply, so the server's post-handshake NewSessionTickets arrive before the session is
    taken. ``timeout`` bounds the connect and each read (seconds); ``deadline`` bounds the
    whole exchange from connect to the end of the ticket read (seconds; default
    :func:`default_deadline`). A handshake not complete by then is an IO_TIMEOUT with reason
    ``handshake-deadline``; tickets still missing at the deadline are simply not read."""
    loop = asyncio.get_running_loop()
    limit = default_deadline(timeout) if deadline is None else deadline
    end = loop.time() + limit

    def budget() -> float:
        """Seconds the next wait may take: the per-read timeout, cut at the deadline."""
        left = end - loop.time()
        if left <= 0:
            raise _Closed("deadline")
        return min(timeout, left)

    family = socket.AF_INET6 if ":" in address else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setblocking(False)
    rx = bytearray()
    first_out: list[bytes] = []
    try:
        try:
            # the SYN leaves now, in the step the run's limiter released this handshake: awaiting
            # sock_connect alone sent it a loop iteration later, and on a busy loop connections
            # released 1/r apart reached a server 1-3 ms apart (bench/lifetime_rehearsal.py)
            err = sock.connect_ex((address, port))
            if err not in (0, errno.EINPROGRESS):
                raise OSError(err, os.strerror(err))
            if err:
                await asyncio.wait_for(loop.sock_connect(sock, (address, port)), min(timeout, limit))
        except asyncio.TimeoutError:
            return Handshake(ScanStatus.CONNECTION_TIMEOUT, "connect-timeout")
        except ConnectionRefusedError:
            return Handshake(ScanStatus.CONNECTION_REFUSED, "refused")
        except OSError as exc:
            return Handshake(ScanStatus.CONNECTION_REFUSED, f"connect:{exc.strerror or exc}")
        t0 = time.perf_counter()
        inc, out = ssl.MemoryBIO(), ssl.MemoryBIO()
        stored = isinstance(session, StoredSession)
        obj = ctx.wrap_bio(inc, out, server_hostname=sni, session=None if stored else session)
        if isinstance(session, StoredSession) and not put_session(obj, sni, session):
            return Handshake(ScanStatus.UNKNOWN_ERROR, "session-not-set: libssl refused the stored session")

        async def flush() -> None:
            data = out.read()
            if data:
                if not first_out:
                    first_out.append(data)
                wait = budget()
                try:
                    await asyncio.wait_for(loop.sock_sendall(sock, data), wait)
                except asyncio.TimeoutError:   # the peer does not read (zero window)
                    raise _Closed("timeout" if wait >= timeout else "deadline") from None

        async def receive() -> None:
            wait = budget()
            try:
                data = await asyncio.wait_for(loop.sock_recv(sock, 65536), wait)
            except asyncio.TimeoutError:
                raise _Closed("timeout" if wait >= timeout else "deadline") from None
            except ConnectionResetError:
                raise _Closed("reset") from None
            if not data:
                raise _Closed("eof")
            rx.extend(data)
            inc.write(data)

        try:
            while True:
                try:
                    obj.do_handshake()
                    break
                except ssl.SSLWantReadError:
                    await flush()
                    await receive()
            await flush()
        except _Closed as c:
            if rx and not looks_like_tls(bytes(rx)):
                return Handshake(ScanStatus.PROTOCOL_ERROR, "not-tls")
            if c.why == "timeout":
                return Handshake(ScanStatus.IO_TIMEOUT, "timeout")
            if c.why == "deadline":
                return Handshake(ScanStatus.IO_TIMEOUT, f"handshake-deadline: not complete after {limit:g} s "
                                                        f"({len(rx)} bytes received)")
            alert = first_alert(split_records(bytes(rx))[0])
            if alert is not None:
                return Handshake(ScanStatus.APPLICATION_ERROR, f"tls-alert:{ALERTS.get(alert[1], alert[1])}")
            return Handshake(ScanStatus.CONNECTION_CLOSED, c.why)
        except ssl.SSLError as exc:
            try:
                await flush()   # our alert to the server
            except (OSError, _Closed):
                pass
            st, why = _classify_ssl_error(exc, bytes(rx))
            return Handshake(st, why)
        except OSError as exc:
            return Handshake(ScanStatus.CONNECTION_CLOSED, f"io:{exc.strerror or exc}")
        hs = Handshake(ScanStatus.SUCCESS, negotiated=obj.version(), cipher=(obj.cipher() or (None,))[0],
                       resumed=obj.session_reused, cert_der=obj.getpeercert(binary_form=True),
                       handshake_ms=(time.perf_counter() - t0) * 1000, completed_at=time.monotonic())
        tls13 = obj.version() == "TLSv1.3"
        if tls13 and read_tickets:
            host = sni or address
            obj.write(f"{'GET' if request == 'GET' else 'HEAD'} / HTTP/1.1\r\nHost: {host}\r\nUser-Agent: {_user_agent()}\r\n"
                      "Connection: close\r\n\r\n".encode("utf-8", "replace"))
            plain = bytearray()
            try:
                await flush()
                while b"\r\n\r\n" not in plain:
                    try:
                        got = obj.read(65536)
                    except ssl.SSLWantReadError:
                        await receive()
                    except ssl.SSLZeroReturnError:
                        break
                    else:
                        # b'' = the peer closed (ragged EOF is suppressed): stop, or this
                        # loop spins without awaiting and no deadline can end it. Found by
                        # the zoo (issue 24): gnutls-serv --http answers HEAD with a bare
                        # HTML body (no header, so no CRLFCRLF) and closes.
                        if not got:
                            break
                        plain += got
            except (_Closed, ssl.SSLError, OSError):
                pass   # the handshake succeeded; tickets are whatever arrived
        try:
            # bytes through libssl (sessions.py): SSLObject.session leaks a copy on CPython 3.11
            hs.session = take_session(obj, sni) or obj.session
        except ValueError as exc:
            # OpenSSL cannot serialise the session (i2d_SSL_SESSION fails, e.g. for an ~81 KB
            # peer chain): the handshake stands, only resumption cannot be tried.
            hs.session_error = f"session-unavailable: {exc}"[:200]
        records, _ = split_records(bytes(rx))
        if tls13:
            cr = client_random(first_out[0]) if first_out else None
            secret = keylog.server_traffic_secret(cr) if (keylog and cr) else None
            if secret is not None and hs.cipher:
                hs.tickets = [_ticket_info(t) for t in post_handshake_tickets(records, hs.cipher, secret)]
        else:
            flight = parse_cleartext_flight(records)
            hs.session_id = flight.session_id
            hs.tickets = [_ticket_info(t) for t in flight.tickets]
        return hs
    finally:
        sock.close()


_CERT_CACHE: dict[bytes, tuple[bytes, Optional[str], tuple[str, ...]]] = {}


class PacedHandshakes:
    """What the multi-handshake probes (tls-lifetime, tls-shared) share: one TLS context per
    (version, mechanism), a key log, a concurrency bound, and the run's etiquette limiter
    (global and per-destination rate) that every handshake waits for."""

    #: read the TLS 1.3 tickets that follow the handshake (the lifetime probe needs them)
    read_tickets = False

    def __init__(self, options, emit, concurrency: int = 100, limiter=None):
        self.o = options
        self.limiter = limiter
        self.emit = emit
        self.keylog = KeyLog()
        self.sem = asyncio.Semaphore(concurrency)
        self.contexts = {(v, m): make_context(v, tickets=(m == "ticket"), verify=options.verify, keylog=self.keylog)
                         for v in options.versions for m in options.mechanisms}

    async def _hs(self, t, ctx, session=None) -> Handshake:
        async with self.sem:
            if self.limiter is not None:
                await self.limiter.acquire(t.address)
            return await handshake(t.address, t.port, t.hostname, ctx, timeout=self.o.timeout, session=session,
                                   keylog=self.keylog, read_tickets=self.read_tickets)


def certificate_facts(der: Optional[bytes]) -> tuple[Optional[bytes], Optional[str], tuple[str, ...]]:
    """(SHA-256 fingerprint, issuer DN, SAN DNS names) of a DER certificate (memoised)."""
    if not der:
        return None, None, ()
    fp = hashlib.sha256(der).digest()
    hit = _CERT_CACHE.get(fp)
    if hit is not None:
        return hit
    from cryptography import x509

    try:
        cert = x509.load_der_x509_certificate(der)
        issuer = cert.issuer.rfc4514_string()
        try:
            sans = tuple(cert.extensions.get_extension_for_class(x509.SubjectAlternativeName)
                         .value.get_values_for_type(x509.DNSName))
        except x509.ExtensionNotFound:
            sans = ()
    except ValueError:
        issuer, sans = None, ()
    if len(_CERT_CACHE) > 10_000:
        _CERT_CACHE.clear()
    _CERT_CACHE[fp] = (fp, issuer, sans)
    return fp, issuer, sans
