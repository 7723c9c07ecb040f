"""The TLS scanner's key log (scanners/tls/tls13.py KeyLog) stays bounded over a long scan
(issue 26): secrets nobody looks up are dropped past KEYLOG_KEEP, and the file OpenSSL
appends to is emptied once read whole past KEYLOG_TRUNCATE_BYTES. Before, a 100K-target
`scan tls` kept every unread TLS 1.3 secret in memory and ~1 kB per target on disk.
The file is appended to as OpenSSL does (unbuffered appends by another handle)."""
from __future__ import annotations

import pytest

import scanners.tls.tls13 as tls13

pytestmark = pytest.mark.unit   # no database, no CLI subprocess, no testbed, no root


def _line(cr: bytes, secret: bytes) -> bytes:
    return b"SERVER_TRAFFIC_SECRET_0 " + cr.hex().encode() + b" " + secret.hex().encode() + b"\n"


def test_unread_secrets_are_dropped_and_the_file_emptied(monkeypatch, tmp_path):
    monkeypatch.setattr(tls13, "KEYLOG_KEEP", 50)
    monkeypatch.setattr(tls13, "KEYLOG_TRUNCATE_BYTES", 4096)
    log = tls13.KeyLog()
    try:
        with open(log.path, "ab", buffering=0) as w:     # as OpenSSL appends (CPython opens it "a")
            for i in range(200):                         # 200 connections nobody looks up
                w.write(_line(i.to_bytes(32, "big"), b"s" * 32))
            wanted = (10**6).to_bytes(32, "big")
            w.write(_line(wanted, b"w" * 32))
            assert log.server_traffic_secret(wanted) == b"w" * 32
            assert len(log._secrets) <= 50                # the unread ones did not pile up
            assert log.path.stat().st_size == 0           # read whole past 4 kB: emptied
            later = (10**6 + 1).to_bytes(32, "big")       # appended after the truncation: still found
            w.write(_line(later, b"l" * 32))
            assert log.server_traffic_secret(later) == b"l" * 32
    finally:
        log.close()
