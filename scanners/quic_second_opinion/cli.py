"""`netsurvey scan quic-second-opinion`: ngtcp2's client's verdicts on QUIC servers (issue 24)."""
from __future__ import annotations

import asyncio
import ipaddress
import os
from typing import List

import typer

from netsurvey.errors import UsageError
from netsurvey.measure import measurement
from netsurvey.options import concurrency_option, port_option, timeout_option
from netsurvey.selection import TargetSpelling, parse_target

from . import promises

COLUMNS = ["run_id", "hostname", "address", "port", "client", "fact", "value", "status", "error"]

#: HOST=ADDRESS only: HOST (a DNS name) becomes the client's URI (SNI).
TARGETS = TargetSpelling("HOST=ADDRESS (HOST a DNS name)", names=False, pair="=")


def register(app: typer.Typer, scan_app: typer.Typer) -> None:
    @measurement(scan_app, "quic-second-opinion", tables=("quic_second_opinion",), promise=promises.QUIC_SECOND_OPINION)
    def scan_quic_second_opinion(
        target: List[str] = typer.Option(..., "--target", help="HOST=ADDRESS to check (repeatable)."),
        port: int = port_option(443, help="UDP port."),
        timeout_s: float = timeout_option(10.0, help="Seconds one client run (one connection) may take."),
        concurrency: int = concurrency_option(4, help="Targets in flight."),
    ) -> dict:
        """ngtcp2's own client (Debian ngtcp2-client, GnuTLS; not aioquic) as a second opinion
        on `scan quic-discover` / `scan quic`: Version Negotiation, Retry, NEW_TOKEN count,
        tickets, resumption and 0-RTT, three connections per target."""
        from netsurvey.clictx import open_scan
        from netsurvey.config import finite
        from netsurvey.scanning import run_scan
        from netsurvey.writer import ResultWriter

        from .scanner import CLIENT, Options, QuicSecondOpinionScanner

        finite(timeout_s, "--timeout", positive=True)   # inf: int(inf) in every client run
        if not timeout_s > 0 or concurrency < 1 or not 0 < port < 65536:
            raise UsageError("--timeout must be positive, --concurrency at least 1, --port 1..65535")
        if not os.access(CLIENT, os.X_OK):
            raise UsageError(f"{CLIENT} not found (Debian ngtcp2-client; scripts/install.sh installs it)")
        targets = [parse_target(t, TARGETS, port) for t in target]
        ctx = open_scan({"targets": list(target), "port": port, "timeout_s": timeout_s},
                        targets=targets, concurrency=concurrency)
        scanner = QuicSecondOpinionScanner()
        scanner.init(Options(timeout_s=timeout_s), ctx)
        label = _client_version()
        with ResultWriter(ctx.db, "quic_second_opinion", COLUMNS, types="catalog") as w:
            def write(o):
                addr = ipaddress.ip_address(o.target.address) if o.target.address else None
                if o.result is None:
                    w.write((ctx.run.id, o.target.hostname, addr, o.target.port, label, None, None, o.status.value,
                             o.error))
                    return
                for f in o.result.facts:
                    w.write((ctx.run.id, o.target.hostname, addr, o.target.port, label, f.fact, f.value,
                             "success" if f.value is not None else "application-error", f.error))
            counts = asyncio.run(run_scan(scanner, targets, write, concurrency=concurrency, show_progress=False))
        ctx.counts.update(counts)
        return {"run_id": ctx.run.id, "counts": counts}


def _client_version() -> str:
    import subprocess

    r = subprocess.run(["dpkg-query", "-W", "-f=${Version}", "ngtcp2-client"], capture_output=True, text=True)
    v = r.stdout.strip().split("+")[0]
    return f"ngtcp2-client {v}" if r.returncode == 0 and v else "ngtcp2-client"
