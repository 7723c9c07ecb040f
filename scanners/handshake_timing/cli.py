"""`netsurvey scan handshake-timing`: the declaration (its options are its CLI) and the output."""
from __future__ import annotations

import ipaddress
from typing import List, Optional

import typer

from netsurvey.config import finite
from netsurvey.errors import UsageError
from netsurvey.measure import measurement
from netsurvey.options import list_option, target_option, timeout_option, top_option
from netsurvey.selection import TargetSelection, TargetSpelling, resolved_list

from . import promises

COLUMNS = ["run_id", "rank", "hostname", "address", "method", "sample", "status", "error", "connect_ms",
           "handshake_ms", "ttfb_ms", "client_cpu_ms", "server_cpu_ms", "protocol_version", "resumed",
           "early_data", "tfo_used", "link_rtt_ms"]


def _methods(text: str) -> tuple:
    from .scanner import METHODS

    ms = tuple(dict.fromkeys(m.strip() for m in text.split(",") if m.strip()))
    bad = [m for m in ms if m not in METHODS]
    if not ms or bad:
        raise UsageError(f"--methods: unknown {', '.join(bad) or '(none)'}; known: {','.join(METHODS)}")
    return ms


def _server_pids(items: List[str]) -> dict:
    out = {}
    for it in items:
        kind, _, pid = it.partition("=")
        if kind not in ("tcp", "tls", "quic") or not pid.isdigit():
            raise UsageError(f"--server-pid {it!r}: expected tcp=PID, tls=PID or quic=PID")
        out[kind] = int(pid)
    return out


#: How --target is spelled here: ADDRESS, HOST=ADDRESS or HOST (a name: its first A,
#: else AAAA, address; resolved before open_scan, through the resolver: no packet to a target).
TARGETS = TargetSpelling("ADDRESS or HOST=ADDRESS", names=True, pair="=", addresses=True)


def register(app: typer.Typer, scan_app: typer.Typer) -> None:
    @measurement(scan_app, "handshake-timing", tables=("handshake_timing_sample",), promise=promises.HANDSHAKE_TIMING)
    def scan_handshake_timing(
        target: List[str] = target_option(help="ADDRESS, HOST=ADDRESS or HOST (repeatable)."),
        list_name: Optional[str] = list_option(help="Target list (newest import)."),
        top: Optional[int] = top_option(help="Only the first N ranks of --list."),
        methods: str = typer.Option(",".join(__import__("scanners.handshake_timing.scanner",
                                                        fromlist=["METHODS"]).METHODS), "--methods",
                                    help="Comma-separated methods (tcp, tfo, tls12_full, ..., quic_0rtt)."),
        samples: int = typer.Option(5, "--samples", help="Timed connections per method and target."),
        tcp_port: int = typer.Option(80, "--tcp-port", help="Port of the plain TCP (TFO) server."),
        tls_port: int = typer.Option(443, "--tls-port", help="Port of the TLS server."),
        quic_port: int = typer.Option(443, "--quic-port", help="UDP port of the QUIC server."),
        sni: str = typer.Option("", "--sni", help="Server name for TLS/QUIC (default: the target's hostname)."),
        server_pid: List[str] = typer.Option([], "--server-pid",
                                             help="tcp=PID, tls=PID, quic=PID of a server we own (server CPU)."),
        link_rtt_ms: Optional[float] = typer.Option(None, "--link-rtt-ms",
                                                    help="The path's configured RTT (testbed profile), stored per row."),
        timeout_s: float = timeout_option(5.0, help="Seconds one connection may take."),
    ) -> dict:
        """Connection set-up time and time to first byte: TCP vs TFO, TLS full vs resumed vs 0-RTT, QUIC."""
        from netsurvey.aio import run as aio_run
        from netsurvey.clictx import open_scan
        from netsurvey.scanning import run_scan
        from netsurvey.writer import ResultWriter

        from .scanner import HandshakeTimingScanner, Options

        ms = _methods(methods)
        finite(timeout_s, "--timeout", positive=True)       # nan / inf: one line, exit 2
        finite(link_rtt_ms, "--link-rtt-ms")
        if samples < 1 or not timeout_s > 0 or (link_rtt_ms is not None and link_rtt_ms < 0):
            raise UsageError("--samples must be >= 1, --timeout positive, --link-rtt-ms >= 0")
        for n, p in (("--tcp-port", tcp_port), ("--tls-port", tls_port), ("--quic-port", quic_port)):
            if not 0 < p < 65536:
                raise UsageError(f"{n} must be 1..65535")
        pids = _server_pids(server_pid)
        targets = resolved_list(TargetSelection(list_name, top, tuple(target), tls_port)
                                .resolving(TARGETS, first=True, targets_first=True))
        params = {"targets": list(target), "list": list_name, "top": top, "methods": list(ms), "samples": samples,
                  "tcp_port": tcp_port, "tls_port": tls_port, "quic_port": quic_port, "sni": sni,
                  "server_pids": pids, "link_rtt_ms": link_rtt_ms, "timeout_s": timeout_s}
        unresolved = [t for t in targets if t.address is None]
        targets = [t for t in targets if t.address is not None]
        ctx = open_scan(params, targets=targets, concurrency=1)
        scanner = HandshakeTimingScanner()
        scanner.init(Options(methods=ms, samples=samples, tcp_port=tcp_port, tls_port=tls_port, quic_port=quic_port,
                             sni=sni, server_pids=pids, timeout_s=timeout_s), ctx)

        with ResultWriter(ctx.db, "handshake_timing_sample", COLUMNS,
                          types="catalog") as w:
            for t in unresolved:
                w.write((ctx.run.id, t.rank, t.hostname, None, None, None, "resolution-failed", "no address",
                         *([None] * 9), link_rtt_ms))

            def store(o) -> None:
                base = (ctx.run.id, o.target.rank, o.target.hostname, ipaddress.ip_address(o.target.address))
                if o.result is None:
                    w.write((*base, None, None, o.status.value, o.error, *([None] * 9), link_rtt_ms))
                    return
                for s in o.result.samples:
                    w.write((*base, s.method, s.sample, "success" if s.ok else "error", s.error, s.connect_ms,
                             s.handshake_ms, s.ttfb_ms, s.client_cpu_ms, s.server_cpu_ms, s.protocol_version,
                             s.resumed, s.early_data, s.tfo_used, link_rtt_ms))

            # one target at a time: timings of concurrent connections would measure each other
            counts = aio_run(run_scan(scanner, targets, store, concurrency=1, show_progress=False))
        ctx.counts.update(counts)
        return {"run_id": ctx.run.id, "counts": counts}
