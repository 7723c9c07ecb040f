"""A minimal TLS client on the system's libssl (OpenSSL 3) through ctypes: TLS 1.3 early data.

Why this client: Python's ``ssl`` module cannot send TLS 1.3 early data (it has no binding of
``SSL_write_early_data``). ``openssl s_client -sess_in -early_data`` and ``gnutls-cli
--earlydata`` can, but as separate processes their timings would include a process start
(several ms, noisy on a loaded machine) and they print no handshake timestamps. Calling the
same libssl that s_client uses, in-process, gives microsecond timestamps of each phase
around the very calls: ``connect`` (TCP), ``SSL_write_early_data`` (ClientHello + 0-RTT
request in the first flight), ``SSL_connect`` (handshake done), the first ``SSL_read``
byte (time to first byte). One blocking socket, one thread: the caller's thread CPU time
(``time.thread_time``) around a handshake is the client's CPU per handshake.

OpenSSL API used (man pages of OpenSSL 3.0): SSL_CTX_set_min/max_proto_version
(SSL_CTX_ctrl 123/124), SSL_set_tlsext_host_name (SSL_ctrl 55), SSL_set_session,
SSL_SESSION_get_max_early_data, SSL_write_early_data, SSL_get_early_data_status
(0 not sent, 1 rejected, 2 accepted), SSL_session_reused, SSL_get1_session (TLS 1.3: the
session of the latest NewSessionTicket, so read the response before taking it).
"""
from __future__ import annotations

import ctypes
import ctypes.util
import socket
import struct
import time
from dataclasses import dataclass
from typing import Optional

_lib = None

SSL_CTRL_SET_MIN_PROTO_VERSION = 123
SSL_CTRL_SET_MAX_PROTO_VERSION = 124
SSL_CTRL_SET_TLSEXT_HOSTNAME = 55
SSL_CTRL_SET_SESS_CACHE_MODE = 44
SSL_SESS_CACHE_CLIENT = 1
SSL_OP_NO_TICKET = 1 << 14
TLS1_2_VERSION = 0x0303
TLS1_3_VERSION = 0x0304
EARLY_DATA_STATUS = {0: "not-sent", 1: "rejected", 2: "accepted"}


class TlsError(RuntimeError):
    pass


def lib():
    global _lib
    if _lib is not None:
        return _lib
    name = ctypes.util.find_library("ssl") or "libssl.so.3"
    L = ctypes.CDLL(name, use_errno=True)
    vp, c_int, sz = ctypes.c_void_p, ctypes.c_int, ctypes.c_size_t
    sigs = {
        "TLS_client_method": ([], vp), "SSL_CTX_new": ([vp], vp), "SSL_CTX_free": ([vp], None),
        "SSL_CTX_ctrl": ([vp, c_int, ctypes.c_long, vp], ctypes.c_long),
        "SSL_CTX_set_options": ([vp, ctypes.c_uint64], ctypes.c_uint64),
        "SSL_CTX_set_verify": ([vp, c_int, vp], None),
        "SSL_new": ([vp], vp), "SSL_free": ([vp], None), "SSL_set_fd": ([vp, c_int], c_int),
        "SSL_ctrl": ([vp, c_int, ctypes.c_long, vp], ctypes.c_long),
        "SSL_set_session": ([vp, vp], c_int), "SSL_get1_session": ([vp], vp),
        "SSL_SESSION_free": ([vp], None), "SSL_SESSION_get_max_early_data": ([vp], ctypes.c_uint32),
        "SSL_SESSION_is_resumable": ([vp], c_int), "SSL_SESSION_has_ticket": ([vp], c_int),
        "SSL_write_early_data": ([vp, ctypes.c_char_p, sz, ctypes.POINTER(sz)], c_int),
        "SSL_connect": ([vp], c_int), "SSL_get_error": ([vp, c_int], c_int),
        "SSL_write": ([vp, ctypes.c_char_p, c_int], c_int), "SSL_read": ([vp, ctypes.c_char_p, c_int], c_int),
        "SSL_session_reused": ([vp], c_int), "SSL_get_early_data_status": ([vp], c_int),
        "SSL_get_version": ([vp], ctypes.c_char_p), "SSL_shutdown": ([vp], c_int),
    }
    for fn, (args, res) in sigs.items():
        f = getattr(L, fn)
        f.argtypes, f.restype = args, res
    _lib = L
    return L


class Session:
    """An owned SSL_SESSION*."""

    def __init__(self, ptr: int):
        self.ptr = ptr

    @property
    def max_early_data_bytes(self) -> int:
        return int(lib().SSL_SESSION_get_max_early_data(self.ptr))

    @property
    def has_ticket(self) -> bool:
        """The server issued a session ticket (else a TLS 1.2 resumption can only use the ID)."""
        return bool(lib().SSL_SESSION_has_ticket(self.ptr))

    def __del__(self):
        if self.ptr and _lib is not None:
            _lib.SSL_SESSION_free(self.ptr)
            self.ptr = None


@dataclass
class TlsTiming:
    """Times from the start of the TCP connect, milliseconds; client CPU of the thread."""

    connect_ms: float
    handshake_ms: float
    ttfb_ms: float
    total_ms: float
    client_cpu_ms: float
    version: str
    resumed: bool
    early_data: str          # not-sent / rejected / accepted
    response_bytes: int
    session: Optional[Session]


class Ctx:
    def __init__(self, version: str, tickets: bool = True):
        L = lib()
        self.ptr = L.SSL_CTX_new(L.TLS_client_method())
        if not self.ptr:
            raise TlsError("SSL_CTX_new failed")
        v = TLS1_2_VERSION if version == "1.2" else TLS1_3_VERSION
        L.SSL_CTX_ctrl(self.ptr, SSL_CTRL_SET_MIN_PROTO_VERSION, v, None)
        L.SSL_CTX_ctrl(self.ptr, SSL_CTRL_SET_MAX_PROTO_VERSION, v, None)
        L.SSL_CTX_ctrl(self.ptr, SSL_CTRL_SET_SESS_CACHE_MODE, SSL_SESS_CACHE_CLIENT, None)
        if not tickets:
            L.SSL_CTX_set_options(self.ptr, SSL_OP_NO_TICKET)
        L.SSL_CTX_set_verify(self.ptr, 0, None)  # timing only: the peer is not authenticated

    def __del__(self):
        if getattr(self, "ptr", None) and _lib is not None:
            _lib.SSL_CTX_free(self.ptr)


def _check(ssl, rc: int, what: str) -> None:
    if rc <= 0:
        raise TlsError(f"{what} failed (SSL_get_error {lib().SSL_get_error(ssl, rc)})")


def https_get(ctx: Ctx, address: str, port: int, sni: str, request: bytes, session: Optional[Session] = None,
              early_data: bool = False, timeout_s: float = 5.0) -> TlsTiming:
    """One TCP + TLS connection sending ``request`` (as 0-RTT data if ``early_data`` and the
    session allows it) and reading the whole response (the server closes)."""
    L = lib()
    fam = socket.AF_INET6 if ":" in address else socket.AF_INET
    sock = socket.socket(fam, socket.SOCK_STREAM)
    sock.settimeout(timeout_s)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    ssl = L.SSL_new(ctx.ptr)
    buf = ctypes.create_string_buffer(16384)
    try:
        cpu0, t0 = time.thread_time(), time.perf_counter()
        sock.connect((address, port))
        t_conn = time.perf_counter()
        sock.setblocking(True)  # OpenSSL needs a blocking fd; timeouts by SO_RCVTIMEO/SO_SNDTIMEO
        tv = struct.pack("ll", int(timeout_s), int((timeout_s % 1) * 1e6))
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, tv)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO, tv)
        L.SSL_set_fd(ssl, sock.fileno())
        if sni:
            L.SSL_ctrl(ssl, SSL_CTRL_SET_TLSEXT_HOSTNAME, 0, ctypes.c_char_p(sni.encode()))
        if session is not None:
            L.SSL_set_session(ssl, session.ptr)
        sent_early = False
        if early_data and session is not None and session.max_early_data_bytes >= len(request):
            written = ctypes.c_size_t(0)
            _check(ssl, L.SSL_write_early_data(ssl, request, len(request), ctypes.byref(written)),
                   "SSL_write_early_data")
            sent_early = written.value == len(request)
        _check(ssl, L.SSL_connect(ssl), "SSL_connect")
        t_hs = time.perf_counter()
        status = EARLY_DATA_STATUS.get(L.SSL_get_early_data_status(ssl), "?")
        if not (sent_early and status == "accepted"):
            _check(ssl, L.SSL_write(ssl, request, len(request)), "SSL_write")
        n = L.SSL_read(ssl, buf, len(buf))
        _check(ssl, n, "SSL_read")
        t_fb = time.perf_counter()
        total = n
        while True:
            n = L.SSL_read(ssl, buf, len(buf))
            if n <= 0:
                break
            total += n
        t_end = time.perf_counter()
        cpu = time.thread_time() - cpu0
        L.SSL_shutdown(ssl)  # a session of a connection not shut down is not resumable
        sess = L.SSL_get1_session(ssl)
        return TlsTiming(connect_ms=(t_conn - t0) * 1e3, handshake_ms=(t_hs - t0) * 1e3, ttfb_ms=(t_fb - t0) * 1e3,
                         total_ms=(t_end - t0) * 1e3, client_cpu_ms=cpu * 1e3,
                         version=(L.SSL_get_version(ssl) or b"").decode(), resumed=bool(L.SSL_session_reused(ssl)),
                         early_data=status if session is not None and early_data else "not-sent",
                         response_bytes=total, session=Session(sess) if sess else None)
    finally:
        L.SSL_free(ssl)
        sock.close()
