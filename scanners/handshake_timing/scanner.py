"""Probing for the handshake-timing measurement (issue 25): how much time the state buys.

Per target and per method, ``samples`` timed connections, one after another (timings of
connections in flight together would measure each other). Every time is measured from the
start of the connection (the ``connect`` call / the first QUIC Initial) with
``time.perf_counter``, in milliseconds:

* ``connect_ms``: TCP handshake done (``connect`` returned); for TFO the SYN's ``sendto``
  returned; for QUIC not defined (NULL);
* ``handshake_ms``: the TLS / QUIC handshake is complete at the client (TCP: = connect_ms);
* ``ttfb_ms``: the first byte of the response to one small request arrived;
* ``client_cpu_ms``: CPU time of the probing thread during the connection;
* ``server_cpu_ms``: CPU time of the server process during the connection, from
  ``/proc/PID/schedstat`` (ns resolution), only with ``--server-pid`` (servers we own).

Methods (the state each uses is made by an unmeasured priming connection just before):

=================  =====================================================================
tcp                TCP, request after the handshake (TFO off for this socket)
tfo                TCP Fast Open with a cookie from the priming connection: the request
                   rides in the SYN; ``tfo_used`` = the SYN's data was acknowledged
                   (TCP_INFO tcpi_options & TCPI_OPT_SYN_DATA)
tls12_full         TLS 1.2 full handshake (the server's cache is not offered)
tls12_id           TLS 1.2 abbreviated handshake by session ID (client sends no ticket ext.)
tls12_ticket       TLS 1.2 abbreviated handshake by session ticket
tls13_full         TLS 1.3 full handshake
tls13_psk          TLS 1.3 resumption (PSK, ECDHE), request after the handshake
tls13_0rtt         TLS 1.3 resumption with the request as early data (0-RTT)
quic_full          QUIC (HTTP/3) full handshake
quic_resumed       QUIC resumption with a session ticket, request after the handshake
quic_0rtt          QUIC resumption with the request in 0-RTT packets
=================  =====================================================================

TLS goes through libssl by ctypes (ossl.py: the stdlib cannot send early data); QUIC
through aioquic (session tickets and 0-RTT: QuicConfiguration.session_ticket).
"""
from __future__ import annotations

import asyncio
import socket
import struct
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

from netsurvey.scanning import Scanner, ScanOutcome, ScanStatus, ScanTarget

METHODS = ("tcp", "tfo", "tls12_full", "tls12_id", "tls12_ticket", "tls13_full", "tls13_psk", "tls13_0rtt",
           "quic_full", "quic_resumed", "quic_0rtt")
TCPI_OPT_SYN_DATA = 32


@dataclass(frozen=True)
class Options:
    """:ivar methods: methods to time (METHODS).
    :ivar samples: measured connections per method and target.
    :ivar tcp_port / tls_port / quic_port: ports of the plain TCP, TLS and QUIC servers.
    :ivar sni: server name sent in TLS/QUIC ('' = the target's hostname or none).
    :ivar server_pids: 'tcp' / 'tls' / 'quic' -> pid of a server we own, for server CPU.
    :ivar timeout_s: seconds one connection may take."""

    methods: tuple = METHODS
    samples: int = 5
    tcp_port: int = 80
    tls_port: int = 443
    quic_port: int = 443
    sni: str = ""
    server_pids: dict = field(default_factory=dict)
    timeout_s: float = 5.0


@dataclass(frozen=True)
class Sample:
    """One timed connection. Times in milliseconds from the connection's start."""

    method: str
    sample: int
    ok: bool
    error: Optional[str] = None
    connect_ms: Optional[float] = None
    handshake_ms: Optional[float] = None
    ttfb_ms: Optional[float] = None
    client_cpu_ms: Optional[float] = None
    server_cpu_ms: Optional[float] = None
    protocol_version: Optional[str] = None
    resumed: Optional[bool] = None
    early_data: Optional[str] = None        # not-sent / rejected / accepted
    tfo_used: Optional[bool] = None


@dataclass(frozen=True)
class Result:
    samples: list


def _proc_cpu_ms(pid: Optional[int]) -> Optional[float]:
    if not pid:
        return None
    try:
        return int(Path(f"/proc/{pid}/schedstat").read_text().split()[0]) / 1e6
    except (OSError, ValueError, IndexError):
        return None


def _request(host: str) -> bytes:
    return f"GET / HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n".encode()


# -- TCP and TFO ------------------------------------------------------------------------
def _tcp(address: str, port: int, req: bytes, timeout_s: float, fastopen: bool) -> dict:
    fam = socket.AF_INET6 if ":" in address else socket.AF_INET
    s = socket.socket(fam, socket.SOCK_STREAM)
    # blocking with kernel timeouts: a non-blocking sendto(MSG_FASTOPEN) answers EINPROGRESS
    tv = struct.pack("ll", int(timeout_s), int((timeout_s % 1) * 1e6))
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, tv)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO, tv)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    try:
        cpu0, t0 = time.thread_time(), time.perf_counter()
        if fastopen:
            s.sendto(req, socket.MSG_FASTOPEN, (address, port))
            t_conn = time.perf_counter()
        else:
            s.connect((address, port))
            t_conn = time.perf_counter()
            s.sendall(req)
        first = s.recv(4096)
        t_fb = time.perf_counter()
        if not first:
            raise ConnectionError("closed without a response")
        while s.recv(4096):
            pass
        cpu = time.thread_time() - cpu0
        info = s.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 8)
        return {"connect_ms": (t_conn - t0) * 1e3, "handshake_ms": (t_conn - t0) * 1e3,
                "ttfb_ms": (t_fb - t0) * 1e3, "client_cpu_ms": cpu * 1e3,
                "tfo_used": bool(info[5] & TCPI_OPT_SYN_DATA) if fastopen else False}
    finally:
        s.close()


# -- QUIC -------------------------------------------------------------------------------
async def _quic(address: str, port: int, sni: str, timeout_s: float, ticket, early: bool) -> dict:
    import ssl

    from aioquic.asyncio.client import connect
    from aioquic.asyncio.protocol import QuicConnectionProtocol
    from aioquic.h3.connection import H3_ALPN, H3Connection
    from aioquic.h3.events import DataReceived, HeadersReceived
    from aioquic.quic.configuration import QuicConfiguration
    from aioquic.quic.events import HandshakeCompleted

    tickets: list = []
    first = asyncio.get_running_loop().create_future()
    done = asyncio.get_running_loop().create_future()
    hs: dict = {}

    class Proto(QuicConnectionProtocol):
        def __init__(self, *a, **kw):
            super().__init__(*a, **kw)
            self.h3 = H3Connection(self._quic)

        def quic_event_received(self, event) -> None:
            if isinstance(event, HandshakeCompleted):
                hs["t"] = time.perf_counter()
                hs["resumed"] = event.session_resumed
                hs["early"] = event.early_data_accepted
            for e in self.h3.handle_event(event):
                if isinstance(e, (HeadersReceived, DataReceived)):
                    if not first.done():
                        first.set_result(time.perf_counter())
                    if e.stream_ended and not done.done():
                        done.set_result(True)

        def get(self) -> None:
            sid = self._quic.get_next_available_stream_id()
            self.h3.send_headers(sid, [(b":method", b"GET"), (b":scheme", b"https"), (b":authority", sni.encode()),
                                       (b":path", b"/")], end_stream=True)
            self.transmit()

    cfg = QuicConfiguration(is_client=True, alpn_protocols=H3_ALPN, verify_mode=ssl.CERT_NONE,
                            server_name=sni or None)
    if ticket is not None:
        cfg.session_ticket = ticket
    cpu0, t0 = time.thread_time(), time.perf_counter()
    async with connect(address, port, configuration=cfg, create_protocol=Proto,
                       session_ticket_handler=tickets.append, wait_connected=False) as client:
        if early:
            client.get()  # type: ignore[attr-defined]  # a Proto (create_protocol); with the first flight: 0-RTT packets when the ticket allows early data
        else:
            client.transmit()  # wait_connected=False: connect() has not sent the Initial yet
        await asyncio.wait_for(client.wait_connected(), timeout_s)
        if not early:
            client.get()  # type: ignore[attr-defined]  # a Proto (create_protocol)
        t_fb = await asyncio.wait_for(first, timeout_s)
        await asyncio.wait_for(done, timeout_s)
        if not tickets:  # the server sends its ticket after the handshake
            for _ in range(50):
                await asyncio.sleep(0.002)
                if tickets:
                    break
        cpu = time.thread_time() - cpu0
    return {"connect_ms": None, "handshake_ms": (hs.get("t", t_fb) - t0) * 1e3, "ttfb_ms": (t_fb - t0) * 1e3,
            "client_cpu_ms": cpu * 1e3, "protocol_version": "QUIC v1", "resumed": bool(hs.get("resumed")),
            "early_data": ("accepted" if hs.get("early") else "rejected") if early else "not-sent",
            "ticket": tickets[-1] if tickets else None}


class HandshakeTimingScanner(Scanner):
    name = "handshake-timing"

    async def scan(self, target: ScanTarget) -> ScanOutcome:
        out = []
        for method in self.options.methods:
            for i in range(self.options.samples):
                out.append(await self._one(target, method, i))
        if not any(s.ok for s in out):
            return ScanOutcome(target, ScanStatus.CONNECTION_TIMEOUT if any("timed out" in (s.error or "") for s in out)
                               else ScanStatus.UNKNOWN_ERROR, Result(out), (out[0].error or "failed")[:200])
        return ScanOutcome(target, ScanStatus.SUCCESS, Result(out))

    async def _one(self, target: ScanTarget, method: str, i: int) -> Sample:
        o = self.options
        addr = target.address
        sni = o.sni or target.hostname or ""
        host = sni or addr
        kind = "tcp" if method in ("tcp", "tfo") else "quic" if method.startswith("quic") else "tls"
        pid = o.server_pids.get(kind)
        try:
            # the priming connection (unmeasured) makes the state the measured one uses
            state = None
            if method != "tcp" and not method.endswith("_full"):
                await self.ctx.limiter.acquire(addr)
                state = await asyncio.to_thread(self._prime, method, addr, host, sni)  # type: ignore[arg-type]  # an address
            await self.ctx.limiter.acquire(addr)
            s0 = _proc_cpu_ms(pid)
            r = await asyncio.to_thread(self._measure, method, addr, host, sni, state)  # type: ignore[arg-type]  # an address
            s1 = _proc_cpu_ms(pid)
            r.pop("ticket", None)
            return Sample(method, i, True, server_cpu_ms=(s1 - s0) if s0 is not None and s1 is not None else None, **r)
        except Exception as exc:  # one failed connection is a row, the scan goes on
            return Sample(method, i, False, error=f"{type(exc).__name__}: {exc}"[:200])

    def _tls_ctx(self, method: str):
        from .ossl import Ctx

        return Ctx("1.2" if method.startswith("tls12") else "1.3", tickets=method != "tls12_id")

    def _prime(self, method: str, addr: str, host: str, sni: str):
        o = self.options
        if method == "tfo":
            return _tcp(addr, o.tcp_port, _request(host), o.timeout_s, fastopen=True)
        if method.startswith("tls"):
            from .ossl import https_get

            ctx = self._tls_ctx(method)
            r = https_get(ctx, addr, o.tls_port, sni, _request(host), timeout_s=o.timeout_s)
            if r.session is None:
                raise RuntimeError("the priming connection yielded no session")
            if method == "tls12_ticket" and not r.session.has_ticket:
                # else the "ticket" resumption would silently be one by session ID
                raise RuntimeError("the server issued no session ticket")
            return ctx, r.session
        q = asyncio.run(_quic(addr, o.quic_port, sni, o.timeout_s, None, False))
        if q["ticket"] is None:
            raise RuntimeError("the priming QUIC connection yielded no session ticket")
        return q["ticket"]

    def _measure(self, method: str, addr: str, host: str, sni: str, state) -> dict:
        o = self.options
        if method in ("tcp", "tfo"):
            r = _tcp(addr, o.tcp_port, _request(host), o.timeout_s, fastopen=method == "tfo")
            return dict(r, protocol_version="TCP", resumed=r["tfo_used"])
        if method.startswith("tls"):
            from .ossl import https_get

            ctx, sess = state if state else (self._tls_ctx(method), None)
            h = https_get(ctx, addr, o.tls_port, sni, _request(host), session=sess,
                          early_data=method == "tls13_0rtt", timeout_s=o.timeout_s)
            return {"connect_ms": h.connect_ms, "handshake_ms": h.handshake_ms, "ttfb_ms": h.ttfb_ms,
                    "client_cpu_ms": h.client_cpu_ms, "protocol_version": h.version, "resumed": h.resumed,
                    "early_data": h.early_data}
        return asyncio.run(_quic(addr, o.quic_port, sni, o.timeout_s, state, method == "quic_0rtt"))
