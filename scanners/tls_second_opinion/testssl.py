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

Etiquette: testssl.sh 3.0.8 ``-S`` opened 24 TCP connections to a local gnutls-serv (SYNs
counted with a sniffer on lo), most of them from bash itself (``/dev/tcp``: its socket
probes) or from ``openssl s_client``, so neither an openssl wrapper nor one token per run
can pace them: ungated they came up to 4-6 within one second, 0.04-0.13 s apart. testssl.sh
therefore runs with connectgate.c preloaded (LD_PRELOAD, built with gcc on first use into
~/.cache/netsurvey, like browser_probes' clockshift.c); every process it starts inherits it.
Before each connect()/sendto()/sendmsg() to an IP address the shim asks this process over a
unix socket (:class:`Gate`); the scanner grants only the target's own address and port, if
the policy allows it, after one token of the run's rate limiter, and the granted connections
are the row's ``connections``. Everything else is refused (ECONNREFUSED/EACCES, no packet):
UDP and so any resolver query (testssl.sh runs with ``--nodns none --ip ADDRESS``: none was
asked for; names other than address literals do not even resolve under the shim), and
testssl.sh's own loopback connections: at start-up it checks which options its openssl
knows (find_openssl_binary(), testssl.sh 3.0.8 lines 17189-17222): four runs of s_client
without ``-connect`` (``s_client -tls1_3 </dev/null`` and the like), each of which tries
OpenSSL's default ``localhost:4433`` (::1 and 127.0.0.1: 8 connections), and ~30 with
``-connect $NXCONNECT`` (127.0.0.1:0, :func:`_env`). Only their "unknown option" text is
read, so refusing them changes nothing for testssl.sh and keeps them off whatever listens
on port 4433. With ``per_destination_pps = 2``: 24
connections granted = 24 SYNs, at most 2 in any second, 0.5 s apart
(tests/scanners/tls_second_opinion/test_scan_tls_second_opinion.py). Not covered: statically linked programs and raw
syscalls (testssl.sh uses neither; the sniffer test would see them). The CLI still allows
testssl.sh only against the testbed's ranges and loopback (TESTBED_NETS)."""
from __future__ import annotations

import asyncio
import ipaddress
import json
import os
import re
import shutil
import signal
import tempfile
from pathlib import Path
from typing import Awaitable, Callable, Optional

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
    out: list[tuple[str, Optional[str], Optional[bool], Optional[int], Optional[str]]] = []
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


GATE_SOURCE = Path(__file__).resolve().parent / "connectgate.c"


def _ours(path: Path) -> bool:
    """Whether ``path`` exists, is this user's and nobody else may write it."""
    try:
        st = path.lstat()
    except OSError:
        return False
    import stat

    return st.st_uid == os.geteuid() and not st.st_mode & 0o022 and not stat.S_ISLNK(st.st_mode)


def gate_library() -> Path:
    """connectgate.c built once per source version (gcc, scripts/install.sh) into the cache."""
    import hashlib
    import subprocess

    src = GATE_SOURCE.read_bytes()
    tag = hashlib.sha256(src).hexdigest()[:12]
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "netsurvey"
    lib = cache / f"connectgate-{tag}.so"
    # the library is preloaded into every process testssl.sh starts: only one of this user's,
    # in a folder only this user may write, is used (a cache in a shared folder such as /tmp:
    # another user could plant it); otherwise it is built into a private temporary folder
    made_by = next((a for a in (cache, *cache.parents) if a.exists() or a.is_symlink()), cache)   # what exists
    if not _ours(made_by):
        import tempfile

        cache = Path(tempfile.mkdtemp(prefix="netsurvey-gate-"))
        lib = cache / f"connectgate-{tag}.so"
    if lib.exists() and _ours(lib):
        return lib
    cc = shutil.which("gcc") or shutil.which("cc")
    if not cc:
        raise RuntimeError("gcc not found (scripts/install.sh): it builds connectgate.c, which paces testssl.sh")
    cache.mkdir(mode=0o755, parents=True, exist_ok=True)
    tmp = lib.with_suffix(f".{os.getpid()}.tmp")
    r = subprocess.run([cc, "-shared", "-fPIC", "-O2", "-o", str(tmp), str(GATE_SOURCE), "-ldl"],
                       capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError("building connectgate.c failed: " + (r.stderr.strip().splitlines() or ["?"])[-1])
    os.replace(tmp, lib)
    return lib


class Gate:
    """The parent side of connectgate.c: a unix socket in ``folder`` answering each request
    ``connect tcp|udp ADDRESS PORT`` with ``ok`` after ``grant(address, port)`` said yes (TCP
    only: UDP, a resolver's queries included, is always refused); :attr:`env` holds what a
    process needs to be gated (LD_PRELOAD, NETSURVEY_GATE_SOCKET). :attr:`granted` counts the
    connections granted, :attr:`refused` lists the destinations refused ("tcp ADDRESS PORT")."""

    def __init__(self, folder: str, grant: Callable[[str, int], Awaitable[bool]]):
        self.path = str(Path(folder) / "gate")
        self.grant = grant
        self.granted = 0
        self.refused: list[str] = []
        self.server: Optional[asyncio.AbstractServer] = None

    async def __aenter__(self) -> "Gate":
        lib = gate_library()
        self.server = await asyncio.start_unix_server(self._answer, path=self.path)
        self.env = {"LD_PRELOAD": str(lib), "NETSURVEY_GATE_SOCKET": self.path}
        return self

    async def __aexit__(self, *exc) -> None:
        assert self.server is not None   # started by __aenter__
        self.server.close()

    async def _answer(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            parts = (await reader.readline()).decode(errors="replace").split()
            ok = False
            if len(parts) == 4 and parts[0] == "connect" and parts[1] == "tcp" and parts[3].isdigit():
                ok = await self.grant(parts[2], int(parts[3]))
            self.granted += ok
            if not ok:
                self.refused.append(" ".join(parts[1:4])[:80])
            writer.write(b"ok\n" if ok else b"no\n")
            await writer.drain()
        except (OSError, ValueError):
            pass
        finally:
            writer.close()


async def run(exe: str, address: str, port: int, hostname: Optional[str], timeout_s: float,
              ca_file: Optional[str] = None,
              grant: Optional[Callable[[str, int], Awaitable[bool]]] = None):
    """One testssl.sh -S run with every TCP connection of it and its children granted by
    ``grant(address, port)`` (connectgate.c, :class:`Gate`); returns (parse() tuples, error or
    None, connections granted). ``grant`` None: ungated (only to show what the gate changes;
    the scanner always passes one)."""
    if hostname is not None and not hostname_ok(hostname) or not testbed_only(address):
        return [], "client: refused (hostname not a DNS name or address not in the testbed)", 0
    openssl = shutil.which("openssl") or "/usr/bin/openssl"
    env = _env()
    env.pop("LD_PRELOAD", None)
    if grant is not None:
        try:
            gate_library()   # built before anything runs
        except RuntimeError as exc:   # gcc missing or the build failed
            return [], f"client: {exc}"[:200], 0
    with tempfile.TemporaryDirectory(prefix="netsurvey-testssl-") as d:
        gate = Gate(d, grant or _never)
        if grant is None:
            return await _run(exe, address, port, hostname, timeout_s, ca_file, openssl, env, d, gate)
        async with gate:
            return await _run(exe, address, port, hostname, timeout_s, ca_file, openssl, {**env, **gate.env}, d, gate)


async def _never(address: str, port: int) -> bool:
    return False


async def _run(exe: str, address: str, port: int, hostname: Optional[str], timeout_s: float, ca_file: Optional[str],
               openssl: str, env: dict, d: str, gate: Gate):
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
                                                 stderr=asyncio.subprocess.PIPE, env=env, start_new_session=True)
    except OSError as exc:
        return [], f"client: {exc.strerror or exc}"[:200], 0
    try:
        _, err = await asyncio.wait_for(p.communicate(), timeout_s)
    except asyncio.TimeoutError:
        try:
            os.killpg(p.pid, signal.SIGKILL)   # testssl.sh and the children it started
        except ProcessLookupError:
            pass
        await p.wait()
        return [], "timeout", gate.granted
    try:
        findings = json.loads(js.read_text())
    except (OSError, ValueError):
        last = (err.decode(errors="replace").strip().splitlines() or ["no JSON output"])[-1]
        return [], f"testssl: {last}"[:200], gate.granted
    rows = parse(findings, log.read_text().splitlines())
    if not rows:
        problem = next((str(f.get("finding")) for f in findings if f.get("id") == "scanProblem"), None)
        why = f"; refused: {', '.join(sorted(set(gate.refused)))}" if gate.refused else ""
        return [], f"testssl: {problem or 'no session findings'}{why}"[:200], gate.granted
    return rows, None, gate.granted
