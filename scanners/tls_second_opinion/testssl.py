"""testssl.sh as a further second opinion (issue 24): its server-defaults check (``-S``)
reports session resumption by ticket and "by ID" and the session ticket lifetime hint.

testssl.sh picks the TLS version of those checks itself (the version of the connection
that first got a ticket: TLSv1.3 where the server speaks it, testssl.sh 3.0.8
``run_server_defaults()`` -> ``sub_session_resumption "$sessticket_proto"``) and its JSON
does not say which. So it runs with ``--openssl`` pointing at a pass-through wrapper of
the system openssl that notes, for every resuming ``s_client -sess_in`` connection, the
client's ticket option and OpenSSL's ``New, TLSv1.3, ...`` / ``Reused, TLSv1.3, ...`` line:
the version of each verdict is read from there, not guessed.

Its "ID" check is OpenSSL's ``s_client -no_ticket``: a session-ID resumption only when it
ran with TLS 1.2. With TLS 1.3 there are no session IDs (RFC 8446 2.2) and OpenSSL still
resumes with a PSK from the server's NewSessionTicket, so that verdict is recorded as
mechanism ``id`` with version 1.3 and the zoo table never compares it with netsurvey's
TLS 1.2 session-ID fact.

With TLS 1.3 testssl.sh's checks race the server: its first ``s_client -sess_out
</dev/null`` may quit before the post-handshake NewSessionTicket arrives. Then there is
no session file: the ticket check reads "check failed because of connect problem" (no
verdict here) and the "ID" check "not supported" (OpenSSL 3 branch of
``sub_session_resumption()``: an empty session file is taken as no resumption). Seen on
the zoo's gnutls-serv and HAProxy; the version testssl.sh picks varies from run to run for
the same reason. TLS 1.2 tickets come inside the handshake: no race.

Lots of connections (testssl.sh runs ~100 handshakes with -S): the CLI allows it only
against the testbed's ranges and loopback (TESTBED_NETS)."""
from __future__ import annotations

import asyncio
import ipaddress
import json
import os
import re
import shutil
import tempfile
from pathlib import Path
from typing import Optional

#: Where testssl.sh may be pointed (testbed ranges, loopback).
TESTBED_NETS = tuple(ipaddress.ip_network(n) for n in ("198.18.0.0/15", "2001:2::/48", "127.0.0.0/8", "::1/128"))

_WRAPPER = """#!/bin/sh
# netsurvey tls-second-opinion: pass-through openssl that notes s_client runs with session files
case " $* " in
  *" -sess_in "*|*" -sess_out "*)
    out=$("{openssl}" "$@"); rc=$?
    printf '%s\\n' "$out"
    case " $* " in *" -no_ticket "*) opt=no_ticket;; *) opt=ticket;; esac
    case " $* " in *" -sess_in "*) phase=in;; *) phase=out;; esac
    printf '%s %s %s\\n' "$opt" "$phase" "$(printf '%s\\n' "$out" | grep -E '^(New|Reused), ' | head -n 1)" >> "{log}"
    exit $rc;;
  *) exec "{openssl}" "$@";;
esac
"""


#: A DNS name (letters, digits, '-', '_' in dot-separated labels) or an IP address: testssl.sh
#: puts the hostname unquoted into openssl s_client's command line (``SNI="-servername $NODE"``,
#: then ``$OPENSSL s_client ... $SNI``), so anything else (a space, a '/', ':') would become
#: further s_client options (``-connect``, ``-proxy``: a packet to any address) or another port.
_HOSTNAME = re.compile(r"(?=.{1,253}$)[a-z0-9_](?:[a-z0-9_-]{0,61}[a-z0-9_])?(?:\.[a-z0-9_](?:[a-z0-9_-]{0,61}[a-z0-9_])?)*",
                       re.IGNORECASE)


def hostname_ok(name: str) -> bool:
    """Whether ``name`` may be handed to testssl.sh (and any client) as a hostname."""
    if _HOSTNAME.fullmatch(name):
        return True
    try:
        ipaddress.ip_address(name)
        return True
    except ValueError:
        return False


def testbed_only(address: str) -> bool:
    a = ipaddress.ip_address(address)
    return any(a in n for n in TESTBED_NETS)


def _env() -> dict:
    """testssl.sh's environment. NXCONNECT: its start-up probes of openssl's options connect
    to ``invalid.:443`` by default, a DNS question to the system resolver on every run (22
    of them seen, over the default route when resolv.conf names a testbed resolver outside
    the testbed: session-31 adversary); 127.0.0.1:0 (testssl.sh's own choice on WSL) asks
    nobody."""
    return {**os.environ, "TERM": "dumb", "NXCONNECT": "127.0.0.1:0"}


def version(exe: str) -> str:
    import subprocess

    r = subprocess.run([exe, "--version"], capture_output=True, text=True, env=_env())
    m = re.search(r"testssl\S*\s+(\d+\.\d+(?:\.\d+)?)", r.stdout + r.stderr)
    return f"testssl {m.group(1)}" if m else "testssl"


def parse(findings: list[dict], noted: list[str]) -> list[tuple[str, Optional[str], Optional[bool], Optional[int], Optional[str]]]:
    """(mechanism, version, resumed, lifetime_hint_s, error) from testssl.sh's JSON
    findings and the wrapper's notes (lines ``ticket|no_ticket in|out New|Reused, TLSv1.x, ...``)."""
    by_id = {f.get("id"): str(f.get("finding", "")) for f in findings}
    vers = {}
    for line in noted:   # the resuming (-sess_in) connection's version, else the first one's
        m = re.match(r"(ticket|no_ticket) (in|out) (?:New|Reused), TLSv(1\.[23]),", line)
        if m:
            mech = "ticket" if m.group(1) == "ticket" else "id"
            if m.group(2) == "in" or mech not in vers:
                vers[mech] = m.group(3)
    out = []
    for mech, key in (("ticket", "sessionresumption_ticket"), ("id", "sessionresumption_ID")):
        f = by_id.get(key)
        if f is None:
            continue
        if f in ("supported", "not supported"):
            v = vers.get(mech)
            out.append((mech, v, f == "supported", None, None if v else "version of the check not seen"))
        else:
            out.append((mech, vers.get(mech), None, None, f"testssl: {f}"[:200]))
    f = by_id.get("TLS_session_ticket")
    if f is not None:
        m = re.search(r"valid for (\d+) seconds", f)
        v = vers.get("ticket")
        if m:
            out.append(("lifetime-hint", v, None, int(m.group(1)), None if v else "version of the check not seen"))
        elif f.startswith("no"):   # "no -- no lifetime advertised": no ticket at all
            out.append(("lifetime-hint", v, None, None, f"testssl: {f}"[:200]))
    return out


async def run(exe: str, address: str, port: int, hostname: Optional[str], timeout_s: float,
              ca_file: Optional[str] = None):
    """One testssl.sh -S run; returns (parse() tuples, error or None)."""
    if hostname is not None and not hostname_ok(hostname) or not testbed_only(address):
        return [], "client: refused (hostname not a DNS name or address not in the testbed)"
    openssl = shutil.which("openssl") or "/usr/bin/openssl"
    with tempfile.TemporaryDirectory(prefix="netsurvey-testssl-") as d:
        log, wrapper, js = Path(d) / "noted", Path(d) / "openssl", Path(d) / "out.json"
        wrapper.write_text(_WRAPPER.format(openssl=openssl, log=log))
        wrapper.chmod(0o700)
        log.touch()
        host = hostname or address
        uri = f"https://{'[' + host + ']' if ':' in host else host}:{port}"
        argv = [exe, "--quiet", "--color", "0", "--warnings", "off", "--nodns", "none", "--ip", address,
                "--openssl", str(wrapper), "--openssl-timeout", str(max(1, int(timeout_s / 10))),
                "-S", "--jsonfile", str(js), uri]
        if ca_file:
            argv[-1:-1] = ["--add-ca", ca_file]
        try:
            p = await asyncio.create_subprocess_exec(*argv, stdin=asyncio.subprocess.DEVNULL,
                                                     stdout=asyncio.subprocess.DEVNULL,
                                                     stderr=asyncio.subprocess.PIPE,
                                                     env=_env())
        except OSError as exc:
            return [], f"client: {exc.strerror or exc}"[:200]
        try:
            _, err = await asyncio.wait_for(p.communicate(), timeout_s)
        except asyncio.TimeoutError:
            p.kill()
            await p.wait()
            return [], "timeout"
        try:
            findings = json.loads(js.read_text())
        except (OSError, ValueError):
            last = (err.decode(errors="replace").strip().splitlines() or ["no JSON output"])[-1]
            return [], f"testssl: {last}"[:200]
        rows = parse(findings, log.read_text().splitlines())
        if not rows:
            problem = next((str(f.get("finding")) for f in findings if f.get("id") == "scanProblem"), None)
            return [], f"testssl: {problem or 'no session findings'}"[:200]
        return rows, None
