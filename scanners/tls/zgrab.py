"""Bulk mode: zgrab2 (pinned v1.0.0 in tools/go) ``tls --session-ticket --max-version=771``
over large lists, its JSON lines ingested into ``tls_handshake`` (source 'zgrab2').
zgrab2 sees only TLS 1.2 tickets; TLS 1.3 tickets and all resumption probing need the
Python engine."""
from __future__ import annotations

import asyncio
import base64
import datetime as dt
import ipaddress
import itertools
import sys
import tempfile
from pathlib import Path
from typing import Callable, Iterable, Iterator, Optional

from netsurvey.errors import UsageError
from netsurvey.gotools import require_tool

from .wire import key_name, ticket_format, ticket_layout


def zgrab_argv(senders: int, blocklist: Path) -> list[str]:
    """zgrab2 from PATH, else tools/go/bin (netsurvey.gotools); UsageError if neither."""
    return [str(require_tool("zgrab2")), "tls", "--session-ticket", "--max-version=771", "-s", str(senders),
            "-b", str(blocklist)]


#: Largest share of unusable lines an --ingest file may have before nothing is ingested
#: (the same rule as target-list imports, netsurvey/targets.py).
MAX_BAD_SHARE = 0.01


class BadZgrabLine(ValueError):
    """A line that is not a zgrab2 TLS record: ``line_no`` (1-based) and ``reason``."""

    def __init__(self, line_no: int, reason: str):
        super().__init__(f"line {line_no}: {reason}")
        self.line_no = line_no
        self.reason = reason


class _Bad(Exception):
    pass


def _get(d, *path):
    for p in path:
        if not isinstance(d, dict):
            return None
        d = d.get(p)
    return d


def _typed(d, path: tuple[str, ...], kind: type, int_below: int = 2**31):
    """The value at ``path`` (None if absent); a value of another type, or an int outside
    0..int_below-1, is a bad line."""
    v = _get(d, *path)
    if v is None:
        return None
    if not isinstance(v, kind) or (kind is int and isinstance(v, bool)):
        raise _Bad(f"field {'.'.join(path)}: expected {kind.__name__}, got {type(v).__name__}")
    if kind is str and "\x00" in v:  # type: ignore[operator]  # isinstance(v, kind) above
        raise _Bad(f"field {'.'.join(path)}: NUL character")
    if kind is int and not 0 <= v < int_below:  # type: ignore[operator]  # (as above)
        raise _Bad(f"field {'.'.join(path)}: {v} out of range")
    return v


def _b64(d, path: tuple[str, ...]) -> Optional[bytes]:
    v = _typed(d, path, str)
    if not v:
        return None
    try:
        return base64.b64decode(v, validate=True)
    except ValueError:
        raise _Bad(f"field {'.'.join(path)}: not base64") from None


def _row(line: str, run_id: int) -> tuple:
    """One tls_handshake row from one zgrab2 JSON line; raises _Bad(reason)."""
    import hashlib
    import json

    try:
        rec = json.loads(line)
    except (ValueError, RecursionError) as exc:
        raise _Bad(f"not JSON: {getattr(exc, 'msg', exc)}") from None
    if not isinstance(rec, dict):
        raise _Bad("not a JSON object")
    ip = _typed(rec, ("ip",), str)
    if ip is None:
        raise _Bad("no 'ip'")
    try:
        address = ipaddress.ip_address(ip)
    except ValueError:
        raise _Bad(f"'ip' is not an address: {ip[:40]!r}") from None
    tls = _get(rec, "data", "tls") or {}
    if not isinstance(tls, dict):
        raise _Bad("field data.tls: expected object")
    status = _typed(tls, ("status",), str) or "unknown-error"
    hl = ("result", "handshake_log")
    ticket = _b64(tls, hl + ("session_ticket", "value"))
    sid = _b64(tls, hl + ("server_hello", "session_id"))
    sid_given = _get(tls, *hl, "server_hello", "session_id") is not None
    cert = hl + ("server_certificates", "certificate")
    raw = _b64(tls, cert + ("raw",))
    fp = hashlib.sha256(raw).digest() if raw else None
    sans = _typed(tls, cert + ("parsed", "extensions", "subject_alt_name", "dns_names"), list)
    if sans is not None and not all(isinstance(n, str) and "\x00" not in n for n in sans):
        raise _Bad("field subject_alt_name.dns_names: expected strings")
    ok = status == "success"
    error = _typed(tls, ("error",), str)
    lifetime = _typed(tls, hl + ("session_ticket", "lifetime_hint"), int, int_below=2**32)  # uint32
    lay = ticket_layout(ticket) if ticket else None     # one ticket: structure only (basis 1)
    return (run_id, None, _typed(rec, ("domain",), str) or ip, address, 443, "1.2",
            "success" if ok else _status(status), None if ok else (error or status)[:200],
            _typed(tls, hl + ("server_hello", "version", "name"), str),
            _typed(tls, hl + ("server_hello", "cipher_suite", "name"), str),
            (len(sid or b"") if sid_given else 0) if ok else None,
            1 if ticket else 0, lifetime if ticket else None, None, ticket,
            len(ticket) if ticket else None, key_name(ticket) if ticket else None,
            ticket_format(ticket) if ticket else None, fp, _typed(tls, cert + ("parsed", "issuer_dn"), str),
            sans if ok else None, None, None, None, dt.datetime.now(dt.timezone.utc), "zgrab2",
            # zgrab2 completes handshakes with bad certificates and says so (its own validation)
            _typed(tls, hl + ("server_certificates", "validation", "browser_trusted"), bool),
            _typed(tls, hl + ("server_certificates", "validation", "browser_error"), str),
            lay.family if lay else None, lay.key_id_len if lay else None, lay.basis if lay else None)


def rows_from_zgrab(lines: Iterable[str], run_id: int, bad: Optional[list[BadZgrabLine]] = None,
                    first_line_no: int = 1) -> Iterator[tuple]:
    """tls_handshake rows (survey.HANDSHAKE_COLUMNS order) from zgrab2 JSON lines. A line that
    is not a zgrab2 record (invalid JSON, not an object, no valid ``ip``, a field of the
    wrong type) raises :class:`BadZgrabLine` (a ValueError) - or, if ``bad`` is given, is
    appended to it and skipped."""
    for no, line in enumerate(lines, first_line_no):
        if not line.strip():
            continue
        try:
            yield _row(line, run_id)
        except _Bad as exc:
            err = BadZgrabLine(no, str(exc))
            if bad is None:
                raise err from None
            bad.append(err)


def _status(s: str) -> str:
    return {"connection-timeout": "connection-timeout", "io-timeout": "io-timeout",
            "connection-refused": "connection-refused", "application-error": "application-error",
            "protocol-error": "protocol-error"}.get(s, "unknown-error")


def _check_ingest(path: Path, lines: list[str]) -> int:
    """Validate an --ingest file before anything is written: UsageError ``file:line: reason``
    if no line is a zgrab2 record or more than MAX_BAD_SHARE of them are bad. Returns the
    number of bad lines (skipped and counted in the run's summary otherwise)."""
    bad: list[BadZgrabLine] = []
    good = sum(1 for _ in rows_from_zgrab(lines, 0, bad))
    n = good + len(bad)
    if not good and not bad:
        raise UsageError(f"{path}: no zgrab2 records")
    if bad and (not good or len(bad) > MAX_BAD_SHARE * n):
        b = bad[0]
        raise UsageError(f"{path}:{b.line_no}: {b.reason} ({len(bad)} of {n} lines bad); nothing ingested")
    return len(bad)


async def _zgrab_paced(argv: list[str], targets, limiter, on_line: Callable[[str], None]) -> None:
    """Run zgrab2, feeding it one target line at a time as the run's limiter allows: zgrab2
    connects to each line as it reads it, so the etiquette's global and per-destination
    rates hold for its connections too (zgrab2 has no rate option of its own). Each
    output line goes to ``on_line`` as zgrab2 writes it, so a SIGTERM keeps what was
    grabbed before it."""
    proc = await asyncio.create_subprocess_exec(*argv, stdin=asyncio.subprocess.PIPE,
                                                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL)
    assert proc.stdin is not None and proc.stdout is not None   # PIPEs

    async def read() -> None:
        async for line in proc.stdout:  # type: ignore[union-attr]  # a PIPE (asserted above)
            on_line(line.decode("utf-8", "replace").rstrip("\n"))

    reader = asyncio.create_task(read())
    try:
        for t in targets:
            await limiter.acquire(t.address)
            proc.stdin.write(f"{t.address}, {t.hostname}\n".encode())
            await proc.stdin.drain()
        proc.stdin.close()
        await reader
        await proc.wait()
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()


def run_zgrab(hosts, *, ingest: Optional[Path], senders: int, ipv6: bool) -> dict:
    from netsurvey.clictx import open_scan

    from .survey import expand_targets, handshake_writer

    lines: list[str] = []
    if ingest is not None:
        try:
            raw = sys.stdin.buffer.read() if str(ingest) == "-" else ingest.read_bytes()
            lines = raw.decode("utf-8").splitlines()
        except UnicodeDecodeError as exc:
            lineno = exc.object[:exc.start].count(b"\n") + 1
            raise UsageError(f"{ingest}:{lineno}: not UTF-8 text") from None
        except OSError as exc:
            raise UsageError(f"{ingest}: cannot read: {exc.strerror}") from None
        _check_ingest(ingest, lines)
    from .run import _plan

    ctx = open_scan({"engine": "zgrab2", "senders": senders, "ingest": str(ingest) if ingest else None},
                    packages=(), targets=None if ingest is not None else _plan(hosts, 443, ipv6))
    bad: list[BadZgrabLine] = []
    blocked = n = 0
    with handshake_writer(ctx.db) as w:   # closed (flushed) on SIGTERM too

        def take(line: str, no: int) -> None:
            nonlocal n
            for row in rows_from_zgrab([line], ctx.run.id, bad, first_line_no=no):
                w.write(row)
                n += 1

        if ingest is None:
            require_tool("zgrab2")
            targets, _ = asyncio.run(expand_targets(hosts, 443, ipv6))
            allowed = [t for t in targets if ctx.policy.allowed(t.address)]
            blocked = len(targets) - len(allowed)  # never handed to zgrab2; counted with the run
            targets = allowed
            line_no = itertools.count(1)
            with tempfile.TemporaryDirectory() as d:
                bl = Path(d) / "blocklist"
                bl.write_text("")  # the policy filtered the targets above
                asyncio.run(_zgrab_paced(zgrab_argv(senders, bl), targets, ctx.limiter,
                                         lambda line: take(line, next(line_no))))
        else:
            for no, line in enumerate(lines, 1):
                take(line, no)
    counts: dict[str, int | str] = {"ingested": n, "bad_lines": len(bad), "blocked": blocked}
    if bad:
        counts["first_bad_line"] = f"{bad[0].line_no}: {bad[0].reason}"[:200]
    ctx.counts.update(counts)
    return {"run_id": ctx.run.id, **counts}
