"""ngtcp2's own QUIC client (Debian ``ngtcp2-client``: /usr/bin/gtlsclient, ngtcp2 0.12.1 on
GnuTLS 3.7.9, a QUIC and TLS stack other than aioquic, which netsurvey's QUIC scanners use)
as a second opinion on the QUIC zoo (issue 24). Three client runs per target, one QUIC
connection each, each paced by the run's limiter:

1. ``-v 0x1a2a3a4a`` (a reserved version): the server's Version Negotiation, read from the
   client's log (``pkt rx 0 VN v=0x...``): ``vn_versions`` (the non-reserved ones, in the
   server's order) and ``vn_greased_count`` (reserved versions, v & 0x0f0f0f0f == 0x0a0a0a0a);
2. a fresh connection with ``--session-file`` / ``--tp-file``: ``retry`` (a Retry packet
   received), ``new_token_count`` (NEW_TOKEN frames received), ``tickets`` (GnuTLS wrote a
   resumable session: the server sent a ticket), and from the NewSessionTicket messages in
   the server's 1-RTT CRYPTO data as the client dumped it: ``ticket_count``,
   ``ticket_lifetime_s``, ``ticket_max_early_data`` (the early_data extension; 'none');
3. a connection resuming that session: ``resumption`` (the server's Handshake-level CRYPTO
   data carries no Certificate message: a PSK handshake) and ``zero_rtt`` (early data was
   sent and the client did not print ``Early data was rejected by server``, examples/
   client.cc:300-302 at v0.12.1).

No verdict on token acceptance: Debian's gtlsclient 0.12.1 writes its ``--token-file`` but
cannot read it back (examples/util_gnutls.cc:71-88 read_token(), tests/testbed/test_zoo_quic.py), so
no token is ever presented. A run
that does not reach the stage a fact needs gives that fact no verdict."""
from __future__ import annotations

import asyncio
import os
import re
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from netsurvey.scanning import Scanner, ScanOutcome, ScanStatus, ScanTarget

CLIENT = "/usr/bin/gtlsclient"
#: the version the VN probe offers: reserved (RFC 9000 15), so every server answers with VN
PROBE_VERSION = 0x1A2A3A4A


@dataclass(frozen=True)
class Options:
    """:ivar timeout_s: seconds one client run may take. :ivar client: the executable."""

    timeout_s: float = 10.0
    client: str = CLIENT


@dataclass(frozen=True)
class Fact:
    """One verdict: ``value`` as text (booleans 'true'/'false', counts, versions joined by
    '|' in hex), or None with ``error`` saying why there is none."""

    fact: str
    value: Optional[str]
    error: Optional[str] = None


@dataclass(frozen=True)
class Result:
    facts: tuple[Fact, ...]


def reserved(v: int) -> bool:
    return v & 0x0F0F0F0F == 0x0A0A0A0A


def parse_vn(log: str) -> Optional[list[int]]:
    vs = [int(m, 16) for m in re.findall(r" pkt rx \d+ VN v=(0x[0-9a-f]+)", log)]
    return vs or None


def _crypto_bytes(log: str, level: str) -> bytes:
    """The server's CRYPTO data of one encryption level, in order, from the client's dumps
    (each ``Ordered CRYPTO data in <level> crypto level`` line, printed when ngtcp2 hands
    received data to TLS, is followed by a hex dump of it: examples/client.cc
    recv_crypto_data() with debug output on)."""
    out = bytearray()
    lines = log.splitlines()
    i = 0
    while i < len(lines):
        if lines[i].strip() == f"Ordered CRYPTO data in {level} crypto level":
            i += 1
            while i < len(lines) and re.match(r"^[0-9a-f]{8}  [0-9a-f]{2} ", lines[i]):
                out += bytes.fromhex(lines[i][10:59].replace(" ", ""))
                i += 1
            continue
        i += 1
    return bytes(out)


def _messages(data: bytes) -> list[tuple[int, bytes]]:
    """TLS handshake messages (type, body) in CRYPTO data."""
    out, i = [], 0
    while i + 4 <= len(data):
        n = int.from_bytes(data[i + 1:i + 4], "big")
        out.append((data[i], data[i + 4:i + 4 + n]))
        i += 4 + n
    return out


def handshake_types(log: str) -> list[int]:
    """TLS handshake message types in the server's Handshake-level CRYPTO data."""
    return [t for t, _ in _messages(_crypto_bytes(log, "Handshake"))]


def new_session_tickets(log: str) -> list[tuple[int, Optional[int]]]:
    """(ticket_lifetime s, max_early_data_size or None) of each NewSessionTicket (RFC 8446
    4.6.1) in the server's 1-RTT CRYPTO data, as the client received it."""
    out = []
    for t, b in _messages(_crypto_bytes(log, "Application")):
        if t != 4 or len(b) < 9:
            continue
        life = int.from_bytes(b[0:4], "big")
        i = 8 + 1 + b[8]                                   # lifetime, age_add, nonce
        i += 2 + int.from_bytes(b[i:i + 2], "big")         # ticket
        end = i + 2 + int.from_bytes(b[i:i + 2], "big")
        i += 2
        early = None
        while i + 4 <= min(end, len(b)):
            typ, n = int.from_bytes(b[i:i + 2], "big"), int.from_bytes(b[i + 2:i + 4], "big")
            if typ == 42 and n == 4:                       # early_data: max_early_data_size
                early = int.from_bytes(b[i + 4:i + 8], "big")
            i += 4 + n
        out.append((life, early))
    return out


FRESH_FACTS = ("retry", "new_token_count", "tickets", "ticket_count", "ticket_lifetime_s", "ticket_max_early_data")


def parse_fresh(log: str, session_file: Path) -> list[Fact]:
    if "Negotiated ALPN" not in log and " HANDSHAKE_DONE(" not in log:
        last = (log.strip().splitlines() or ["no output"])[-1]
        return [Fact(f, None, f"handshake: {last}"[:200]) for f in FRESH_FACTS]
    retry = bool(re.search(r" pkt rx .*type=Retry", log))
    tokens = len(re.findall(r" frm rx \d+ 1RTT NEW_TOKEN\(0x07\)", log))
    tickets = session_file.is_file() and session_file.stat().st_size > 0
    nst = new_session_tickets(log)
    out = [Fact("retry", _b(retry)), Fact("new_token_count", str(tokens)), Fact("tickets", _b(tickets)),
           Fact("ticket_count", str(len(nst)))]
    if nst:
        out += [Fact("ticket_lifetime_s", "|".join(sorted({str(x) for x, _ in nst}))),
                Fact("ticket_max_early_data", "|".join(sorted({"none" if e is None else str(e) for _, e in nst})))]
    else:
        out += [Fact(f, None, "no NewSessionTicket") for f in ("ticket_lifetime_s", "ticket_max_early_data")]
    return out


def parse_resume(log: str) -> list[Fact]:
    types = handshake_types(log)
    if "Negotiated ALPN" not in log or 20 not in types:   # 20: Finished
        last = (log.strip().splitlines() or ["no output"])[-1]
        return [Fact(f, None, f"handshake: {last}"[:200]) for f in ("resumption", "zero_rtt")]
    resumed = 11 not in types   # 11: Certificate - absent in a PSK handshake
    sent = bool(re.search(r" frm tx \d+ 0RTT ", log))
    if not sent:
        return [Fact("resumption", _b(resumed)), Fact("zero_rtt", None, "no early data sent (no 0-RTT ticket)")]
    return [Fact("resumption", _b(resumed)),
            Fact("zero_rtt", _b("Early data was rejected by server" not in log))]


def _b(v: bool) -> str:
    return "true" if v else "false"


class QuicSecondOpinionScanner(Scanner):
    name = "quic-second-opinion"

    async def scan(self, target: ScanTarget) -> ScanOutcome:
        facts: list[Fact] = []
        with tempfile.TemporaryDirectory(prefix="netsurvey-gtlsclient-") as d:
            sess, tp, tok = Path(d) / "session", Path(d) / "tp", Path(d) / "token"
            # the run path paced the first connection; every further one waits for the limiter
            log, err = await self._run(target, ["-v", f"{PROBE_VERSION:#010x}"])
            vs = parse_vn(log) if err is None else None
            if vs is None:
                facts += [Fact(f, None, err or "no Version Negotiation") for f in ("vn_versions", "vn_greased_count")]
            else:
                facts += [Fact("vn_versions", "|".join(f"{v:#010x}" for v in vs if not reserved(v))),
                          Fact("vn_greased_count", str(sum(map(reserved, vs))))]
            await self.ctx.limiter.acquire(target.address)
            log, err = await self._run(target, [f"--session-file={sess}", f"--tp-file={tp}", f"--token-file={tok}"])
            fresh = parse_fresh(log, sess) if err is None else [Fact(f, None, err) for f in FRESH_FACTS]
            facts += fresh
            if any(f.fact == "tickets" and f.value == "true" for f in fresh):
                await self.ctx.limiter.acquire(target.address)
                log, err = await self._run(target, [f"--session-file={sess}", f"--tp-file={tp}"])
                facts += parse_resume(log) if err is None else [Fact(f, None, err) for f in ("resumption", "zero_rtt")]
            else:
                facts += [Fact(f, None, "no session to resume") for f in ("resumption", "zero_rtt")]
        if not any(f.value is not None for f in facts):
            return ScanOutcome(target, ScanStatus.APPLICATION_ERROR, Result(tuple(facts)), facts[0].error)
        return ScanOutcome(target, ScanStatus.SUCCESS, Result(tuple(facts)))

    async def _run(self, t: ScanTarget, extra: list[str]) -> tuple[str, Optional[str]]:
        """One client run; (its log, None) or ('', why it failed to run)."""
        host = t.hostname or t.address
        uri = f"https://{host}:{t.port}/" if ":" not in host else f"https://[{host}]:{t.port}/"  # type: ignore[operator]  # a name or an address
        # --no-preferred-addr: by default the client moves to the address a server's
        # preferred_address transport parameter names (RFC 9000 9.6), any address, a blocked
        # one too, unpaced (session-31 adversary: 4 datagrams to a non-target address)
        argv = [self.options.client, "--exit-on-all-streams-close", "--no-preferred-addr",
                f"--timeout={max(1, int(self.options.timeout_s))}s", *extra, t.address, str(t.port), uri]
        try:
            p = await asyncio.create_subprocess_exec(*argv, stdin=asyncio.subprocess.DEVNULL,
                                                     stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
                                                     env={**os.environ, "SSLKEYLOGFILE": ""})
        except OSError as exc:
            return "", f"client: {exc.strerror or exc}"[:200]
        try:
            out, _ = await asyncio.wait_for(p.communicate(), self.options.timeout_s)
        except asyncio.TimeoutError:
            p.kill()
            await p.wait()
            return "", "timeout"
        return out.decode(errors="replace"), None
