"""Bulk mode: zgrab2 (pinned v1.0.0 in tools/go) ``tls --session-ticket --max-version=771``
over large lists, its JSON lines ingested into ``tls_handshake`` (source 'zgrab2').
zgrab2 sees only TLS 1.2 tickets; TLS 1.3 tickets and all resumption probing need the
Python engine."""
from __future__ import annotations

import asyncio
import base64
import datetime as dt
import ipaddress
import os
import subprocess
import tempfile
from pathlib import Path
from typing import Iterable, Iterator, Optional

from netsurvey.errors import UsageError

from .wire import key_name, ticket_format

ZGRAB2 = Path(__file__).resolve().parents[2] / "tools" / "go" / "bin" / "zgrab2"


def zgrab_argv(senders: int, blocklist: Path) -> list[str]:
    return [str(ZGRAB2), "tls", "--session-ticket", "--max-version=771", "-s", str(senders),
            "-b", str(blocklist)]


def _get(d, *path):
    for p in path:
        if not isinstance(d, dict):
            return None
        d = d.get(p)
    return d


def rows_from_zgrab(lines: Iterable[str], run_id: int) -> Iterator[tuple]:
    """tls_handshake rows (survey.HANDSHAKE_COLUMNS order) from zgrab2 JSON lines."""
    import json

    for line in lines:
        if not line.strip():
            continue
        rec = json.loads(line)
        tls = _get(rec, "data", "tls") or {}
        status = tls.get("status", "unknown-error")
        hl = _get(tls, "result", "handshake_log") or {}
        ticket_b64 = _get(hl, "session_ticket", "value")
        ticket = base64.b64decode(ticket_b64) if ticket_b64 else None
        sid = _get(hl, "server_hello", "session_id")
        cert = _get(hl, "server_certificates", "certificate") or {}
        raw = cert.get("raw")
        fp = None
        if raw:
            import hashlib
            fp = hashlib.sha256(base64.b64decode(raw)).digest()
        parsed = cert.get("parsed") or {}
        ok = status == "success"
        yield (run_id, None, rec.get("domain") or rec.get("ip"), ipaddress.ip_address(rec["ip"]), 443, "1.2",
               "success" if ok else _status(status), None if ok else (tls.get("error") or status)[:200],
               _get(hl, "server_hello", "version", "name"), _get(hl, "server_hello", "cipher_suite", "name"),
               len(base64.b64decode(sid)) if (ok and sid is not None) else (0 if ok else None),
               1 if ticket else 0, _get(hl, "session_ticket", "lifetime_hint") if ticket else None, None, ticket,
               len(ticket) if ticket else None, key_name(ticket) if ticket else None,
               ticket_format(ticket) if ticket else None, fp, parsed.get("issuer_dn"),
               _get(parsed, "extensions", "subject_alt_name", "dns_names") if ok else None, None, None, None,
               dt.datetime.now(dt.timezone.utc), "zgrab2")


def _status(s: str) -> str:
    return {"connection-timeout": "connection-timeout", "io-timeout": "io-timeout",
            "connection-refused": "connection-refused", "application-error": "application-error",
            "protocol-error": "protocol-error"}.get(s, "unknown-error")


def run_zgrab(hosts, *, ingest: Optional[Path], senders: int, ipv6: bool) -> dict:
    from netsurvey.clictx import open_scan

    from .survey import expand_targets, handshake_writer

    ctx = open_scan("tls", {"engine": "zgrab2", "senders": senders, "ingest": str(ingest) if ingest else None},
                    packages=())
    try:
        if ingest is not None:
            lines = ingest.read_text().splitlines()
        else:
            if not ZGRAB2.exists():
                raise UsageError(f"{ZGRAB2} missing: run scripts/build_go_tools.sh zgrab2")
            targets, _ = asyncio.run(expand_targets(hosts, 443, ipv6))
            targets = [t for t in targets if ctx.policy.allowed(t.address)]
            with tempfile.TemporaryDirectory() as d:
                bl = Path(d) / "blocklist"
                bl.write_text("")
                inp = "".join(f"{t.address}, {t.hostname}\n" for t in targets)
                p = subprocess.run(zgrab_argv(senders, bl), input=inp, capture_output=True, text=True)
                lines = p.stdout.splitlines()
        n = 0
        with handshake_writer(ctx.db) as w:
            for row in rows_from_zgrab(lines, ctx.run.id):
                w.write(row)
                n += 1
    except BaseException:
        ctx.run.finish("failed")
        raise
    ctx.run.finish("finished", {"ingested": n})
    return {"run_id": ctx.run.id, "ingested": n}
