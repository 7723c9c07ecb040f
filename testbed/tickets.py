"""TLS session-ticket keys (STEKs) of the testbed: deterministic, rotating on a schedule.

A key group with rotation period R (seconds, 0 = never) uses key epoch
``e = floor(unix_time / R)`` (0 when R = 0). The 80-byte nginx key of epoch e is
HMAC-SHA256-expanded from the testbed secret, the group name and e; its first 16 bytes are
the key_name that appears at the start of every RFC 5077 ticket the server issues. So the
ground truth "which key_name is current at time t" is computable by anyone holding the
secret, and the rotator only has to install the right files at each epoch boundary.
"""
from __future__ import annotations

import hashlib
import hmac
import time
from pathlib import Path

KEY_BYTES = 80        # nginx ssl_session_ticket_key file size (AES-256 variant)
KEY_NAME_BYTES = 16


def key_epoch(rotation: int, now: float | None = None) -> int:
    """Epoch number of the key in use at unix time ``now`` (seconds)."""
    if rotation <= 0:
        return 0
    return int((time.time() if now is None else now) // rotation)


def ticket_key(secret: bytes, group: str, epoch: int) -> bytes:
    """The 80-byte ticket key of ``group`` in ``epoch``."""
    out = b""
    counter = 0
    while len(out) < KEY_BYTES:
        out += hmac.new(secret, f"stek|{group}|{epoch}|{counter}".encode(), hashlib.sha256).digest()
        counter += 1
    return out[:KEY_BYTES]


def key_name(secret: bytes, group: str, epoch: int) -> str:
    """Hex key_name (first 16 bytes of the key) of ``group`` in ``epoch``."""
    return ticket_key(secret, group, epoch)[:KEY_NAME_BYTES].hex()


def install_keys(key_dir: Path, secret: bytes, group: str, rotation: int, now: float | None = None) -> int:
    """Write ``<group>.current.key`` and ``<group>.previous.key``; returns the epoch installed.
    Files are replaced atomically (rename)."""
    e = key_epoch(rotation, now)
    key_dir.mkdir(parents=True, exist_ok=True)
    for suffix, ep in (("current", e), ("previous", e - 1 if rotation > 0 else e)):
        tmp = key_dir / f".{group}.{suffix}.tmp"
        tmp.write_bytes(ticket_key(secret, group, ep))
        tmp.chmod(0o600)
        tmp.rename(key_dir / f"{group}.{suffix}.key")
    return e
