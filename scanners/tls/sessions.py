"""TLS sessions as bytes (DER), without CPython 3.11's ``SSLObject.session`` leak.

CPython 3.11 leaks one copy of the SSL_SESSION on every read of ``SSLSocket.session`` /
``SSLObject.session`` (python/cpython#116810: ``PySSL_get_session`` duplicates the session
for an OpenSSL 1.1.0 workaround and then overwrites the copy's pointer; fixed in 3.12.6 /
3.13 by gh-123249, not in 3.11). Measured here (3.11.7, OpenSSL 3.0): +277 MB after
50,000 reads, ~5.5 KB per handshake; a million-handshake scan leaks gigabytes.

This module takes the session the way the fixed CPython does, through libssl itself (the
library ``_ssl`` is linked to): ``SSL_get1_session`` + ``i2d_SSL_SESSION`` give the
session's DER bytes, which can be kept small in memory, stored in the database and put
on a new connection with ``d2i_SSL_SESSION`` + ``SSL_set_session`` before its handshake.
The ``SSL *`` of an ``ssl.SSLObject`` is read from CPython's ``PySSLSocket`` struct (the
pointer after PyObject_HEAD and the socket weakref) and checked: the SNI libssl reports
for it must be the one the connection was made with, and it must be a client. If the
layout or the library does not fit (another Python, a static OpenSSL), :func:`available`
is False and callers fall back to ``SSLObject.session``.
"""
from __future__ import annotations

import ctypes
import ssl
import sys
from dataclasses import dataclass
from typing import Any, Optional


@dataclass(frozen=True)
class StoredSession:
    """A client session as OpenSSL serialises it (i2d_SSL_SESSION).

    :ivar der: the DER bytes (includes the peer certificate; ~1-5 KB).
    :ivar has_ticket: the session carries a ticket (SSL_SESSION_has_ticket).
    """

    der: bytes
    has_ticket: bool


_lib: Any = None   # the ctypes library once loaded (False: unavailable)
_OFFSET = 2 * ctypes.sizeof(ctypes.c_void_p) + ctypes.sizeof(ctypes.c_ssize_t)  # ob_refcnt, ob_type, Socket


def _load():
    global _lib
    if _lib is not None:
        return _lib or None
    try:
        import _ssl

        lib = ctypes.CDLL(_ssl.__file__)
        lib.SSL_get1_session.restype = ctypes.c_void_p
        lib.SSL_get1_session.argtypes = [ctypes.c_void_p]
        lib.i2d_SSL_SESSION.restype = ctypes.c_int
        lib.i2d_SSL_SESSION.argtypes = [ctypes.c_void_p, ctypes.POINTER(ctypes.c_char_p)]
        lib.d2i_SSL_SESSION.restype = ctypes.c_void_p
        lib.d2i_SSL_SESSION.argtypes = [ctypes.c_void_p, ctypes.POINTER(ctypes.c_char_p), ctypes.c_long]
        lib.SSL_SESSION_free.restype = None
        lib.SSL_SESSION_free.argtypes = [ctypes.c_void_p]
        lib.SSL_SESSION_has_ticket.restype = ctypes.c_int
        lib.SSL_SESSION_has_ticket.argtypes = [ctypes.c_void_p]
        lib.SSL_set_session.restype = ctypes.c_int
        lib.SSL_set_session.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
        lib.SSL_get_servername.restype = ctypes.c_char_p
        lib.SSL_get_servername.argtypes = [ctypes.c_void_p, ctypes.c_int]
        lib.SSL_is_server.restype = ctypes.c_int
        lib.SSL_is_server.argtypes = [ctypes.c_void_p]
        _lib = lib if sys.implementation.name == "cpython" else False
    except (OSError, AttributeError):
        _lib = False
    return _lib or None


def _ssl_ptr(obj: ssl.SSLObject, sni: Optional[str]) -> Optional[int]:
    """The ``SSL *`` of ``obj`` if it can be read and verified, else None."""
    lib = _load()
    inner = getattr(obj, "_sslobj", None)
    if lib is None or inner is None or not sni:
        return None
    ptr = ctypes.c_void_p.from_address(id(inner) + _OFFSET).value
    if not ptr:
        return None
    name = lib.SSL_get_servername(ptr, 0)      # TLSEXT_NAMETYPE_host_name
    if name is None or name.decode("ascii", "replace") != sni or lib.SSL_is_server(ptr) != 0:
        return None
    return ptr


def available(obj: ssl.SSLObject, sni: Optional[str]) -> bool:
    return _ssl_ptr(obj, sni) is not None


def take(obj: ssl.SSLObject, sni: Optional[str]) -> Optional[StoredSession]:
    """The connection's current session as bytes, or None (no session, no verified
    pointer, or OpenSSL cannot serialise it: callers then fall back)."""
    ptr = _ssl_ptr(obj, sni)
    if ptr is None:
        return None
    lib = _lib
    sess = lib.SSL_get1_session(ptr)
    if not sess:
        return None
    try:
        n = lib.i2d_SSL_SESSION(sess, None)
        if n <= 0:
            return None
        buf = ctypes.create_string_buffer(n)
        p = ctypes.c_char_p(ctypes.addressof(buf))
        if lib.i2d_SSL_SESSION(sess, ctypes.byref(p)) != n:
            return None
        return StoredSession(buf.raw, bool(lib.SSL_SESSION_has_ticket(sess)))
    finally:
        lib.SSL_SESSION_free(sess)


def put(obj: ssl.SSLObject, sni: Optional[str], session: StoredSession) -> bool:
    """Offer ``session`` on ``obj`` (before its handshake). False if it could not be set."""
    ptr = _ssl_ptr(obj, sni)
    if ptr is None:
        return False
    lib = _lib
    buf = ctypes.create_string_buffer(session.der, len(session.der))
    p = ctypes.c_char_p(ctypes.addressof(buf))
    sess = lib.d2i_SSL_SESSION(None, ctypes.byref(p), len(session.der))
    if not sess:
        return False
    try:
        return lib.SSL_set_session(ptr, sess) == 1    # takes its own reference
    finally:
        lib.SSL_SESSION_free(sess)
