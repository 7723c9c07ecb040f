"""A second opinion on TLS resumption from an independent TLS stack (issue 24): GnuTLS's
``gnutls-cli --resume`` connects, then reconnects offering the session, and says whether
the server resumed it. Three checks per target: ticket resumption with TLS 1.2 and TLS 1.3
and session-ID resumption with TLS 1.2 (priority ``%NO_TICKETS``: no session_ticket
extension; gnutls-cli 3.7.9's ``--noticket`` is never read by src/cli.c).

A further opinion (``--client testssl``): testssl.sh's server-defaults check, which
reports ticket and "ID" resumption and the ticket lifetime hint at the TLS version it
picks itself (testssl.py), every one of its connections (and those of the bash and
openssl processes it starts) paced by the run's limiter through connectgate.c. And ``--client sslyze``: sslyze's TLS 1.2 resumption (ID, ticket)
and TLS 1.3 early-data verdicts (sslyze.py), every one of its connections paced by the
run's limiter through a gate (sslyze_gate.py)."""
from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Optional

from netsurvey.scanning import Scanner, ScanOutcome, ScanStatus, ScanTarget

#: (mechanism, version) -> gnutls-cli priority string.
CHECKS = {("ticket", "1.2"): "NORMAL:-VERS-TLS1.3",
          ("ticket", "1.3"): "NORMAL:-VERS-ALL:+VERS-TLS1.3",
          ("id", "1.2"): "NORMAL:-VERS-TLS1.3:%NO_TICKETS"}


@dataclass(frozen=True)
class Options:
    """:ivar timeout_s: seconds one gnutls-cli run (two handshakes) may take.
    :ivar ca_file: PEM trust anchors for gnutls-cli (None: its system default).
    :ivar client: the gnutls-cli executable (None: gnutls-cli not run, only ``others``)."""

    timeout_s: float = 10.0
    ca_file: Optional[str] = None
    client: Optional[str] = "gnutls-cli"
    #: further clients: (kind, executable, version label); kind "testssl" (testssl.py) or
    #: "sslyze" (sslyze.py; the executable is the interpreter of sslyze's own venv)
    others: tuple[tuple[str, str, str], ...] = ()
    #: seconds one testssl.sh run may take (~24 connections, each paced by the run's limiter)
    testssl_timeout_s: float = 240.0
    #: seconds one sslyze run may take (~25 connections, each paced by the run's limiter)
    sslyze_timeout_s: float = 120.0


@dataclass(frozen=True)
class Verdict:
    """One check. :ivar resumed: gnutls-cli reported '*** This is a resumed session' (None
    if the first handshake did not complete: ``error`` says why)."""

    mechanism: str
    version: Optional[str]
    resumed: Optional[bool]
    error: Optional[str] = None
    #: None: the gnutls-cli of Options.client; else the version label of Options.others
    client: Optional[str] = None
    #: mechanism "lifetime-hint": the ticket lifetime (hint) the client reported, seconds
    lifetime_hint_s: Optional[int] = None
    #: mechanism "early-data" (sslyze): the server accepted TLS 1.3 early data
    early_data_accepted: Optional[bool] = None
    #: sslyze: resumptions attempted and those that succeeded
    attempts: Optional[int] = None
    resumptions: Optional[int] = None
    #: TCP connections the client opened for this target (sslyze: each granted through the
    #: run's limiter); None where not counted
    connections: Optional[int] = None

    @property
    def has_verdict(self) -> bool:
        return self.resumed is not None or self.lifetime_hint_s is not None or self.early_data_accepted is not None


@dataclass(frozen=True)
class Result:
    verdicts: tuple[Verdict, ...]


class TlsSecondOpinionScanner(Scanner):
    name = "tls-second-opinion"

    async def scan(self, target: ScanTarget) -> ScanOutcome:
        verdicts = []
        first = True
        for (mech, version), prio in (CHECKS.items() if self.options.client else ()):
            # one gnutls-cli run = two connections; the run path paced this target's first
            # connection, every other one waits for the run's limiter (etiquette rates
            # count connections, not targets)
            for _ in range(1 if first else 2):
                await self.ctx.limiter.acquire(target.address)
            first = False
            verdicts.append(await self._check(target, mech, version, prio))
        for kind, exe, label in self.options.others:
            if kind == "testssl":
                verdicts += await self._testssl(target, exe, label)
                first = False
            elif kind == "sslyze":
                verdicts += await self._sslyze(target, exe, label)
                first = False
        ok = [v for v in verdicts if v.has_verdict]
        if not ok:
            return ScanOutcome(target, ScanStatus.APPLICATION_ERROR, Result(tuple(verdicts)), verdicts[0].error)
        return ScanOutcome(target, ScanStatus.SUCCESS, Result(tuple(verdicts)))

    async def _check(self, t: ScanTarget, mech: str, version: str, prio: str) -> Verdict:
        o = self.options
        argv = [o.client, "--resume", "--priority", prio, "-p", str(t.port)]
        if o.ca_file:
            argv += ["--x509cafile", o.ca_file]
        if t.hostname:
            argv += ["--sni-hostname", t.hostname, "--verify-hostname", t.hostname]
        argv.append(t.address)
        try:
            p = await asyncio.create_subprocess_exec(*argv, stdin=asyncio.subprocess.DEVNULL,
                                                     stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
        except OSError as exc:
            return Verdict(mech, version, None, f"client: {exc.strerror or exc}"[:200])
        try:
            out, err = await asyncio.wait_for(p.communicate(), o.timeout_s)
        except asyncio.TimeoutError:
            p.kill()
            await p.wait()
            return Verdict(mech, version, None, "timeout")
        text = out.decode(errors="replace")
        if "Handshake was completed" not in text:
            last = (err.decode(errors="replace").strip().splitlines() or text.strip().splitlines() or ["?"])[-1]
            return Verdict(mech, version, None, f"handshake: {last}"[:200])
        return Verdict(mech, version, "This is a resumed session" in text)

    def _grant(self, t: ScanTarget):
        """``grant(address, port)`` for a gated client (sslyze_gate.py, connectgate.c): only the
        target's own address and port, only if the policy allows it, each after one token of
        the run's limiter. Also the first connection waits for one: the token the run path
        took when this target started is not handed on, as the client's start-up would let it
        age and the first two connections would follow each other closer than the
        per-destination limit."""
        import ipaddress

        want = (ipaddress.ip_address(t.address), t.port)  # type: ignore[arg-type]  # a resolved target

        async def grant(address: str, port: int) -> bool:
            try:
                if (ipaddress.ip_address(address), port) != want:
                    return False
            except ValueError:
                return False
            if self.ctx.policy.reason_blocked(t.address):  # type: ignore[arg-type]  # (as above)
                return False
            await self.ctx.limiter.acquire(t.address)
            return True

        return grant

    async def _testssl(self, t: ScanTarget, exe: str, label: str) -> list[Verdict]:
        """testssl.sh's verdicts; every TCP connection it or a process it starts opens waits
        for the run's limiter (connectgate.c, preloaded), counted in ``connections``."""
        from . import testssl

        rows, error, n = await testssl.run(exe, t.address, t.port, t.hostname, self.options.testssl_timeout_s,  # type: ignore[arg-type]  # resolved
                                           self.options.ca_file, self._grant(t))
        if error is not None:
            return [Verdict("ticket", None, None, error, client=label, connections=n)]
        return [Verdict(mech, version, resumed, err, client=label, lifetime_hint_s=life, connections=n)
                for mech, version, resumed, life, err in rows]

    async def _sslyze(self, t: ScanTarget, python: str, label: str) -> list[Verdict]:
        """sslyze's verdicts; each of its connections waits for the run's limiter when it is
        about to be opened (sslyze_gate.py, :meth:`_grant`)."""
        from . import sslyze

        rows, error, n = await sslyze.run(python, t.address, t.port, t.hostname, self.options.sslyze_timeout_s,  # type: ignore[arg-type]  # resolved
                                          self._grant(t))
        if error is not None:
            return [Verdict("ticket", None, None, error, client=label, connections=n)]
        return [Verdict(mech, version, resumed, err, client=label, early_data_accepted=early, attempts=attempts,
                        resumptions=ok, connections=n)
                for mech, version, resumed, early, attempts, ok, err in rows]
