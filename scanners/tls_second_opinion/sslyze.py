"""sslyze as a further second opinion (issue 24): its session resumption check (``--resum``:
TLS 1.2 session IDs and tickets, 5 attempts each) and its TLS 1.3 early-data check
(``--early_data``: 0-RTT accepted on a resumed connection), read from its JSON output
(``--json_out``).

sslyze 6.3.1 needs ``cryptography>=43,<47`` and the project's lock pins a newer one, so it
is an external tool like testssl.sh: its own virtual environment, ``tools/sslyze/.venv``,
built by scripts/install.sh from the hash-pinned ``tools/sslyze/requirements.lock``, run
as a subprocess.

Etiquette: sslyze opens ~25 TCP connections per target (its connectivity test probes the
TLS versions, then 2 per resumption attempt, 2 for early data; retries on errors). Each one
goes through the run's rate limiter, like every probe of the run path: sslyze runs under
``sslyze_gate.py``, which makes every ``connect`` ask this process first (a line on a pipe)
and wait for the grant; :func:`run` answers only after ``grant(address, port)`` (the
scanner: the target's own address and port, the policy, one ``limiter.acquire``) and counts
the connections it granted. sslyze is given the address (``host:port{address}``), so it
never resolves a name; the gate refuses any other destination and any name resolution.

What sslyze's verdicts mean (sslyze 6.3.1 plugins/session_resumption, early_data_plugin.py):

- Resumption is checked with TLS 1.2 only (with the server's highest version when that is
  below 1.2: then no verdict here). "ID": ``disable_stateless_session_resumption()`` (no
  session_ticket extension), resumed when the second connection's session ID equals the
  first's. "Ticket": resumed when the session after the second connection holds the same
  ticket as the first - a server that resumes and sends a fresh ticket (RFC 5077 3.3 allows
  it) reads as NOT resumed. FULLY/PARTIALLY_SUPPORTED -> resumed, NOT_SUPPORTED -> not;
  ``attempts`` and ``resumptions`` keep sslyze's counts.
- Early data: a TLS 1.3 connection sends a GET and reads the reply (so post-handshake
  tickets arrive), a second one resumes that session and writes one byte of early data;
  ``early_data_accepted`` is OpenSSL's SSL_get_early_data_status() == ACCEPTED. A server
  whose tickets carry no early_data extension gives False.

Like testssl.sh it runs only against the testbed's ranges and loopback (TESTBED_NETS), and
the hostname is checked as for testssl.sh (testssl.hostname_ok): sslyze's server string
``host:port{ip}`` would read ':', '{' or '[' in a name as a port or an address.
"""
from __future__ import annotations

import asyncio
import ipaddress
import json
import os
import tempfile
from pathlib import Path
from typing import Awaitable, Callable, Optional

from .testssl import hostname_ok, testbed_only

REPO = Path(__file__).resolve().parents[2]
#: the interpreter of sslyze's own venv (scripts/install.sh)
PYTHON = REPO / "tools" / "sslyze" / ".venv" / "bin" / "python"
GATE = Path(__file__).resolve().parent / "sslyze_gate.py"

#: (mechanism, version, resumed, early_data_accepted, attempts, resumptions, error)
Row = tuple[str, Optional[str], Optional[bool], Optional[bool], Optional[int], Optional[int], Optional[str]]


def available() -> bool:
    return PYTHON.is_file() and os.access(PYTHON, os.X_OK) and any(
        (PYTHON.parent.parent / "lib").glob("python3*/site-packages/sslyze/__init__.py"))


def version(python: str = str(PYTHON)) -> str:
    import subprocess

    r = subprocess.run([python, "-c", "from sslyze.__version__ import __version__ as v; print(v)"],
                       capture_output=True, text=True)
    v = r.stdout.strip()
    return f"sslyze {v}" if r.returncode == 0 and v else "sslyze"


def server_string(address: str, port: int, hostname: Optional[str]) -> str:
    """sslyze's ``host:port{ip}`` (IPv6: ``host:port{[ip]}``), or the address alone."""
    a = ipaddress.ip_address(address)
    ip = f"[{a}]" if a.version == 6 else str(a)
    if hostname is None:
        return f"{ip}:{port}"
    try:
        ipaddress.ip_address(hostname)
        return f"{ip}:{port}"   # an address as name: no SNI, as sslyze does for an address
    except ValueError:
        return f"{hostname}:{port}{{{ip}}}"


def _err(cmd: dict) -> str:
    trace = (cmd.get("error_trace") or "").strip().splitlines()
    return f"sslyze: {cmd.get('error_reason') or cmd.get('status')}: {trace[-1] if trace else ''}".strip(": ")[:200]


def parse(doc: dict) -> tuple[list[Row], Optional[str]]:
    """Verdicts from sslyze's JSON document (one server), or an error for the target."""
    results = doc.get("server_scan_results") or []
    if not results:
        bad = doc.get("invalid_server_strings") or []
        return [], f"sslyze: no result ({bad[0].get('error_message') if bad else 'empty output'})"[:200]
    s = results[0]
    if s.get("connectivity_status") != "COMPLETED":
        trace = (s.get("connectivity_error_trace") or {})
        msg = trace.get("exc_type") if isinstance(trace, dict) else None
        return [], f"sslyze: connectivity {s.get('connectivity_status')}: {msg or str(trace)[-150:]}"[:200]
    highest = (s.get("connectivity_result") or {}).get("highest_tls_version_supported")
    scans = s.get("scan_result") or {}
    rows: list[Row] = []
    res = scans.get("session_resumption") or {}
    at12 = highest in ("TLS_1_2", "TLS_1_3")
    for mech, key in (("id", "session_id"), ("ticket", "tls_ticket")):
        if res.get("status") != "COMPLETED":
            rows.append((mech, "1.2", None, None, None, None, _err(res)))
            continue
        r = res["result"]
        verdict = r[f"{key}_resumption_result"]
        attempts, ok = r[f"{key}_attempted_resumptions_count"], r[f"{key}_successful_resumptions_count"]
        if verdict == "SERVER_IS_TLS_1_3_ONLY":
            rows.append((mech, "1.2", None, None, 0, 0, "sslyze: server is TLS 1.3 only (no TLS 1.2 resumption)"))
        elif not at12:
            rows.append((mech, None, None, None, attempts, ok, f"sslyze: resumption checked with {highest}"))
        else:
            rows.append((mech, "1.2", verdict in ("FULLY_SUPPORTED", "PARTIALLY_SUPPORTED"), None, attempts, ok, None))
    ed = scans.get("tls_1_3_early_data") or {}
    if ed.get("status") != "COMPLETED":
        rows.append(("early-data", "1.3", None, None, None, None, _err(ed)))
    elif highest != "TLS_1_3":
        rows.append(("early-data", "1.3", None, None, None, None, f"sslyze: no TLS 1.3 (highest {highest})"))
    else:
        rows.append(("early-data", "1.3", None, bool(ed["result"]["supports_early_data"]), 1, None, None))
    return rows, None


async def run(python: str, address: str, port: int, hostname: Optional[str], timeout_s: float,
              grant: Callable[[str, int], Awaitable[bool]]) -> tuple[list[Row], Optional[str], int]:
    """One sslyze run (--resum --early_data) with every connection granted by ``grant``;
    returns (parse() rows, error or None, connections granted)."""
    if hostname is not None and not hostname_ok(hostname) or not testbed_only(address):
        return [], "client: refused (hostname not a DNS name or address not in the testbed)", 0
    granted = 0
    with tempfile.TemporaryDirectory(prefix="netsurvey-sslyze-") as d:
        js = Path(d) / "out.json"
        req_r, req_w = os.pipe()
        grant_r, grant_w = os.pipe()
        argv = [python, str(GATE), str(req_w), str(grant_r), address, str(port), "--",
                "--quiet", "--mozilla_config", "disable", "--resum", "--early_data", "--json_out", str(js),
                server_string(address, port, hostname)]
        try:
            p = await asyncio.create_subprocess_exec(*argv, stdin=asyncio.subprocess.DEVNULL,
                                                     stdout=asyncio.subprocess.DEVNULL,
                                                     stderr=asyncio.subprocess.PIPE, pass_fds=(req_w, grant_r),
                                                     cwd=d)
        except OSError as exc:
            for fd in (req_r, req_w, grant_r, grant_w):
                os.close(fd)
            return [], f"client: {exc.strerror or exc}"[:200], 0
        os.close(req_w)
        os.close(grant_r)
        loop = asyncio.get_running_loop()
        reader = asyncio.StreamReader()
        transport, _ = await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader),
                                                    os.fdopen(req_r, "rb"))

        async def serve() -> None:
            nonlocal granted
            while line := await reader.readline():
                parts = line.decode(errors="replace").split()
                ok = False
                if len(parts) == 3 and parts[0] == "connect" and parts[2].isdigit():
                    ok = await grant(parts[1], int(parts[2]))
                granted += ok
                try:
                    os.write(grant_w, b"ok\n" if ok else b"no\n")
                except OSError:   # sslyze is gone
                    return

        try:
            _, err, _ = await asyncio.wait_for(asyncio.gather(serve(), p.stderr.read(), p.wait()), timeout_s)  # type: ignore[union-attr]  # a PIPE
        except asyncio.TimeoutError:
            p.kill()
            await p.wait()
            return [], "timeout", granted
        finally:
            transport.close()
            os.close(grant_w)
        try:
            doc = json.loads(js.read_text())
        except (OSError, ValueError):
            last = (err.decode(errors="replace").strip().splitlines() or ["no JSON output"])[-1]
            return [], f"sslyze: {last}"[:200], granted
        rows, error = parse(doc)
        return rows, error, granted
