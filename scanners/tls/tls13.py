"""Reading TLS 1.3 NewSessionTicket messages, which OpenSSL (and so Python's ``ssl``)
never exposes: the client's own traffic secrets come from the key log
(``SSLContext.keylog_filename``, NSS format), and the server's post-handshake records are
decrypted here with them (RFC 8446 §7.1-7.3, cryptography's AEADs).

Only our own connections are decrypted, with keys this process negotiated.
"""
from __future__ import annotations

import os
import tempfile
import threading
from pathlib import Path
from typing import Optional

from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM, ChaCha20Poly1305
from cryptography.hazmat.primitives.kdf.hkdf import HKDFExpand

from .wire import (
    CT_APPLICATION_DATA,
    CT_HANDSHAKE,
    HT_NEW_SESSION_TICKET,
    NewSessionTicket,
    Record,
    handshake_messages,
    parse_new_session_ticket,
)

#: TLS 1.3 cipher suite -> (hash, key length in bytes, AEAD class)
SUITES = {
    "TLS_AES_128_GCM_SHA256": (hashes.SHA256, 16, AESGCM),
    "TLS_AES_256_GCM_SHA384": (hashes.SHA384, 32, AESGCM),
    "TLS_CHACHA20_POLY1305_SHA256": (hashes.SHA256, 32, ChaCha20Poly1305),
}


def hkdf_expand_label(secret: bytes, label: bytes, context: bytes, length: int, hash_cls) -> bytes:
    full = b"tls13 " + label
    info = length.to_bytes(2, "big") + bytes([len(full)]) + full + bytes([len(context)]) + context
    return HKDFExpand(hash_cls(), length, info).derive(secret)


#: Key log files are named KEYLOG_PREFIX + pid + "-" + random in the temporary directory
#: (mode 0600): each holds TLS secrets of its process's connections.
KEYLOG_PREFIX = "netsurvey-tls-keylog-"


def _sweep_stale_keylogs(tmpdir: Optional[str] = None, older_than_s: float = 86400.0) -> int:
    """Remove key log files a killed scanner left behind (its close() never ran): those
    whose process is gone, and unnamed older ones (before the pid was in the name) after a
    day. Returns how many were removed."""
    import stat
    import time

    removed = 0
    for p in Path(tmpdir or tempfile.gettempdir()).glob(KEYLOG_PREFIX + "*"):
        pid = p.name[len(KEYLOG_PREFIX):].split("-", 1)[0]
        try:
            # lstat: only our own plain files (never a symlink or hard link someone else put
            # there under our name: stat() would follow it to a file of ours)
            st = p.lstat()
            if not stat.S_ISREG(st.st_mode) or st.st_nlink != 1 or st.st_uid != os.geteuid():
                continue
            stale = (not Path(f"/proc/{pid}").exists()) if pid.isdigit() and "-" in p.name[len(KEYLOG_PREFIX):] \
                else time.time() - st.st_mtime > older_than_s
            if stale:
                p.unlink()
                removed += 1
        except OSError:
            pass
    return removed


#: Secrets KeyLog keeps at most (the newest; oldest dropped first).
KEYLOG_KEEP = 20_000
#: The key log file is emptied when read whole past this size.
KEYLOG_TRUNCATE_BYTES = 16 * 2**20


class KeyLog:
    """An NSS key log file that OpenSSL appends to; secrets are looked up by client random.
    One per scanner process; lines are read incrementally and forgotten once used."""

    def __init__(self, path: Optional[Path] = None):
        if path is None:
            _sweep_stale_keylogs()
            fd, name = tempfile.mkstemp(prefix=f"{KEYLOG_PREFIX}{os.getpid()}-")
            os.close(fd)
            path = Path(name)
            self._owned = True
        else:
            self._owned = False
        self.path = path
        self._fh = open(path, "rb")
        self._secrets: dict[bytes, dict[str, bytes]] = {}
        self._rest = b""
        self._lock = threading.Lock()

    def _read_new(self) -> None:
        data = self._rest + self._fh.read()
        lines = data.split(b"\n")
        self._rest = lines.pop()
        for line in lines:
            parts = line.split()
            if len(parts) != 3 or parts[0] != b"SERVER_TRAFFIC_SECRET_0":
                continue
            self._secrets.setdefault(bytes.fromhex(parts[1].decode()), {})[parts[0].decode()] = \
                bytes.fromhex(parts[2].decode())
        # secrets of connections nobody looks up (a resumption check reads no tickets) were
        # kept for the whole scan: ~25 MB over 100,000 targets (bench/scale.py, issue 26). A
        # lookup follows its handshake while the connection is open, so the newest
        # KEYLOG_KEEP (far above any --concurrency) suffice.
        while len(self._secrets) > KEYLOG_KEEP:
            del self._secrets[next(iter(self._secrets))]
        # the file (every line of every connection, ~1 kB per target) is emptied once read
        # whole: OpenSSL appends to it (CPython opens it "a") from this same thread, inside the
        # handshakes, so nothing is written between the read above and the truncation
        if self._owned and not self._rest and self._fh.tell() > KEYLOG_TRUNCATE_BYTES:
            os.truncate(self.path, 0)
            self._fh.seek(0)

    def server_traffic_secret(self, client_random: bytes) -> Optional[bytes]:
        """SERVER_TRAFFIC_SECRET_0 of the connection with this ClientHello random (popped)."""
        with self._lock:
            if client_random not in self._secrets:
                self._read_new()
            entry = self._secrets.pop(client_random, None)
        return entry.get("SERVER_TRAFFIC_SECRET_0") if entry else None

    def close(self) -> None:
        self._fh.close()
        if self._owned:
            try:
                self.path.unlink()
            except OSError:
                pass


def _decrypt(aead, iv: bytes, seq: int, rec: Record) -> Optional[tuple[int, bytes]]:
    nonce = bytes(a ^ b for a, b in zip(iv, seq.to_bytes(12, "big")))
    try:
        inner = aead.decrypt(nonce, rec.payload, rec.header)
    except Exception:
        return None
    inner = inner.rstrip(b"\x00")
    if not inner:
        return None
    return inner[-1], inner[:-1]


def post_handshake_tickets(records: list[Record], cipher: str, secret: bytes) -> list[NewSessionTicket]:
    """NewSessionTicket messages among the server's encrypted records. Records before the
    first one that authenticates under the application traffic key (the server's
    encrypted handshake flight) are skipped."""
    suite = SUITES.get(cipher)
    if suite is None:
        return []
    hash_cls, keylen, aead_cls = suite
    aead = aead_cls(hkdf_expand_label(secret, b"key", b"", keylen, hash_cls))
    iv = hkdf_expand_label(secret, b"iv", b"", 12, hash_cls)
    seq = None
    hs = bytearray()
    tickets = []
    for rec in records:
        if rec.content_type != CT_APPLICATION_DATA:
            continue
        if seq is None:
            got = _decrypt(aead, iv, 0, rec)
            if got is None:
                continue      # still the handshake-key flight
            seq = 1
        else:
            got = _decrypt(aead, iv, seq, rec)
            seq += 1
            if got is None:
                break
        ctype, content = got
        if ctype == CT_HANDSHAKE:
            hs += content
        elif ctype == CT_APPLICATION_DATA:
            break             # tickets precede the application data nginx sends
    for t, body in handshake_messages(bytes(hs)):
        if t == HT_NEW_SESSION_TICKET:
            try:
                tickets.append(parse_new_session_ticket(body, tls13=True))
            except ValueError:
                pass
    return tickets
