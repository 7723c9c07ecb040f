"""`netsurvey scan tls-second-opinion`: resumption verdicts of gnutls-cli (issue 24)."""
from __future__ import annotations

import asyncio
import ipaddress
import os
import shutil
from typing import List, Optional

import typer

from netsurvey.errors import UsageError
from netsurvey.measure import measurement
from netsurvey.options import concurrency_option, port_option, timeout_option
from netsurvey.selection import TargetSpelling, parse_target

from . import promises

COLUMNS = ["run_id", "hostname", "address", "port", "version", "mechanism", "client", "status", "error",
           "resumed", "lifetime_hint_s", "early_data_accepted", "attempts", "resumptions", "connections"]

#: HOST=ADDRESS only: HOST (a DNS name or an address) is what the clients name (SNI).
TARGETS = TargetSpelling("HOST=ADDRESS (HOST a DNS name)", names=False, pair="=")


def register(app: typer.Typer, scan_app: typer.Typer) -> None:
    @measurement(scan_app, "tls-second-opinion", tables=("tls_second_opinion",), promise=promises.TLS_SECOND_OPINION)
    def scan_tls_second_opinion(
        target: List[str] = typer.Option(..., "--target", help="HOST=ADDRESS to check (repeatable)."),
        port: int = port_option(443, help="TCP port."),
        timeout_s: float = timeout_option(10.0, help="Seconds one gnutls-cli run may take."),
        ca_file: Optional[str] = typer.Option(None, "--ca-file",
                                              help="PEM trust anchors (default: $SSL_CERT_FILE if set)."),
        concurrency: int = concurrency_option(4, help="Targets in flight."),
        clients: List[str] = typer.Option(["gnutls-cli"], "--client",
                                          help="gnutls-cli, testssl (testssl.sh -S) and/or sslyze (--resum --early_data; "
                                               "its own venv, tools/sslyze/.venv); testssl and sslyze: testbed "
                                               "addresses only (repeatable)."),
        testssl_timeout_s: float = typer.Option(240.0, "--testssl-timeout",
                                                help="Seconds one testssl.sh run may take (its ~24 connections are "
                                                     "paced by the etiquette's rate limits)."),
        sslyze_timeout_s: float = typer.Option(120.0, "--sslyze-timeout",
                                               help="Seconds one sslyze run may take (its ~25 connections are paced "
                                                    "by the etiquette's rate limits)."),
    ) -> dict:
        """gnutls-cli --resume (another TLS stack): ticket resumption (TLS 1.2, 1.3) and
        session-ID resumption (TLS 1.2) per target, as a second opinion on `scan tls`;
        --client testssl adds testssl.sh's resumption verdicts and ticket lifetime hint, each
        connection of it and its children paced by the run's rate limiter;
        --client sslyze adds sslyze's TLS 1.2 resumption (ID, ticket) and TLS 1.3 early-data
        verdicts, each of its connections paced by the run's rate limiter."""
        from netsurvey.clictx import open_scan
        from netsurvey.config import finite
        from netsurvey.scanning import run_scan
        from netsurvey.writer import ResultWriter

        from .scanner import Options, TlsSecondOpinionScanner
        from .testssl import testbed_only, version as testssl_version

        for value, option in ((timeout_s, "--timeout"), (testssl_timeout_s, "--testssl-timeout"),
                              (sslyze_timeout_s, "--sslyze-timeout")):
            finite(value, option, positive=True)   # inf: int(inf) for testssl.sh, not JSON in the run's parameters
        if not timeout_s > 0 or not testssl_timeout_s > 0 or not sslyze_timeout_s > 0 or concurrency < 1 \
                or not 0 < port < 65536:
            raise UsageError("--timeout/--testssl-timeout/--sslyze-timeout must be positive, --concurrency at least 1, "
                             "--port 1..65535")
        if not clients or set(clients) - {"gnutls-cli", "testssl", "sslyze"}:
            raise UsageError(f"--client {' '.join(clients)!r}: expected gnutls-cli, testssl and/or sslyze")
        client = None
        if "gnutls-cli" in clients:
            client = shutil.which("gnutls-cli")
            if client is None:
                raise UsageError("gnutls-cli not found (Debian gnutls-bin; scripts/install.sh installs it)")
        others: tuple[tuple[str, str, str], ...] = ()
        if "testssl" in clients:
            exe = shutil.which("testssl") or shutil.which("testssl.sh")
            if exe is None:
                raise UsageError("testssl not found (Debian testssl.sh; scripts/install.sh installs it)")
            others = (("testssl", exe, testssl_version(exe)),)
        if "sslyze" in clients:
            from . import sslyze

            if not sslyze.available():
                raise UsageError(f"sslyze not found ({sslyze.PYTHON}: its own venv, built by scripts/install.sh)")
            others += (("sslyze", str(sslyze.PYTHON), sslyze.version()),)
        ca = ca_file or os.environ.get("SSL_CERT_FILE")
        if ca and not os.path.isfile(ca):
            raise UsageError(f"--ca-file {ca}: no such file")
        targets = [_target(t, port) for t in target]
        if others and not all(testbed_only(t.address) for t in targets):
            raise UsageError(f"--client {others[0][0]} runs only against testbed addresses (198.18.0.0/15, 2001:2::/48) "
                             "and loopback: testssl makes ~24 connections per target, sslyze ~25")
        ctx = open_scan({"targets": list(target), "port": port, "timeout_s": timeout_s,
                                               "clients": list(clients)},
                        targets=targets, concurrency=concurrency)
        scanner = TlsSecondOpinionScanner()
        scanner.init(Options(timeout_s=timeout_s, ca_file=ca, client=client, others=others,
                             testssl_timeout_s=testssl_timeout_s, sslyze_timeout_s=sslyze_timeout_s), ctx)
        version = _client_version(client) if client else others[0][2]
        with ResultWriter(ctx.db, "tls_second_opinion", COLUMNS, types="catalog") as w:
            def write(o):
                addr = ipaddress.ip_address(o.target.address) if o.target.address else None
                if o.result is None:
                    w.write((ctx.run.id, o.target.hostname, addr, o.target.port, None, None, version,
                             o.status.value, o.error, None, None, None, None, None, None))
                    return
                for v in o.result.verdicts:
                    w.write((ctx.run.id, o.target.hostname, addr, o.target.port, v.version, v.mechanism,
                             v.client or version, "success" if v.has_verdict else "application-error", v.error,
                             v.resumed, v.lifetime_hint_s, v.early_data_accepted, v.attempts, v.resumptions,
                             v.connections))
            counts = asyncio.run(run_scan(scanner, targets, write, concurrency=concurrency, show_progress=False))
        ctx.counts.update(counts)
        return {"run_id": ctx.run.id, "counts": counts}

    def _target(text: str, port: int):
        from .testssl import hostname_ok

        t = parse_target(text, TARGETS, port)
        if t.hostname is None or not hostname_ok(t.hostname):   # it reaches testssl.sh, which word-splits it into s_client's argv
            raise UsageError(f"--target {text!r}: expected {TARGETS.usage}")
        return t


def _client_version(client: str) -> str:
    import re
    import subprocess

    r = subprocess.run([client, "--version"], capture_output=True, text=True)
    m = re.search(r"(\d+\.\d+\.\d+)", r.stdout)
    return f"gnutls-cli {m.group(1)}" if m else "gnutls-cli"
