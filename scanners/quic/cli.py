"""``netsurvey scan quic-discover | quic | quic-turnover`` (registered by netsurvey/cli.py)."""
from __future__ import annotations

import asyncio
import logging
from typing import Iterable, Optional

import typer

from netsurvey.clictx import open_scan
from netsurvey.errors import UsageError
from netsurvey.etiquette import user_agent
from netsurvey.measure import measurement
from netsurvey.options import (
    concurrency_option,
    duration_option,
    list_option,
    port_option,
    rate_option,
    target_option,
    timeout_option,
    top_option,
)
from netsurvey.runctx import json_output
from netsurvey.scanning import ScanOutcome, ScanStatus, ScanTarget, run_scan
from netsurvey.selection import (
    TargetSelection,
    TargetSpelling,
    network_targets,
    resolved_list,
    responders,
)

from . import promises

#: How the QUIC commands' --target values are spelled: [HOST@]ADDRESS[:PORT] (IPv6 in
#: brackets when a port is given) or a hostname (resolved: every A and AAAA address).
TARGETS = TargetSpelling("[HOST@]ADDRESS[:PORT] or HOST", names=True, pair="@", addresses=True, ports=True)


def _zmap_responders(ctx, cidr: str, port: int, rate: float) -> tuple[list[ScanTarget], dict]:
    """zmap's udp module with the Version Negotiation probe as payload over ``cidr``: the
    addresses that sent any UDP reply, and counts for the run (zmap-sent, zmap-answered)."""
    from netsurvey.zmap import zmap_discover

    from .vn import CID_LEN, build_probe

    found = zmap_discover(cidr, port, ctx.policy, rate=rate, udp_payload=build_probe(b"\x5a" * CID_LEN, b"\xa5" * CID_LEN))
    return responders(found.open, port), {"zmap-sent": found.sent,
                                                                   "zmap-answered": len(found.open),
                                                                   "blocked": found.blocked}


def _finish(ctx, counts: dict) -> dict:
    """The run's counts and its summary (the run path prints it)."""
    ctx.counts.update(counts)
    return {"run_id": ctx.run.id, "counts": counts}


def _run(scanner, targets: Iterable[ScanTarget], store, store_fn, concurrency: int) -> dict:
    """Run the scan, store every outcome, close the writers (the run path ends the run:
    failed, or cancelled on Ctrl-C, if anything raises)."""
    logging.getLogger("quic").setLevel(logging.CRITICAL)  # aioquic logs failed handshakes itself
    from .handshake import settle_gc

    settle_gc()  # many short aioquic connections: see its docstring
    counts = _run_inner(scanner, targets, store_fn, concurrency)
    store.close()
    return counts


def _run_inner(scanner, targets: Iterable[ScanTarget], store_fn, concurrency: int) -> dict:
    counts: dict[str, int] = {}

    def store(o: ScanOutcome) -> None:
        counts[o.status.value] = counts.get(o.status.value, 0) + 1
        store_fn(o)

    if hasattr(targets, "on_failed"):   # a stream: names without address come out as it is read
        targets.on_failed = store
        resolved = targets
    else:
        for t in targets:
            if t.address is None:
                store(ScanOutcome(t, ScanStatus.RESOLUTION_FAILED, None, "no address"))
        resolved = [t for t in targets if t.address is not None]
    asyncio.run(run_scan(scanner, resolved, store, concurrency=concurrency, show_progress=not json_output()))
    return counts


_LIST = list_option(help="Target list name (see 'netsurvey targets list').")
_TOP = top_option(help="Only the first N hostnames of the list.")
_TARGETS = target_option(help="Extra target: [HOST@]ADDRESS[:PORT] or HOST (repeatable).")
_PORT = port_option(443, help="UDP port (TCP port for the Alt-Svc request).")


def register(app: typer.Typer, scan_app: typer.Typer) -> None:
    @measurement(scan_app, "quic-discover", tables=('quic_discovery',), promise=promises.QUIC_DISCOVER)
    def quic_discover(list_name: Optional[str] = _LIST, top: Optional[int] = _TOP, target: list[str] = _TARGETS,
                      port: int = _PORT,
                      timeout: float = timeout_option(2.0, help="Per probe (VN attempt, HTTPS request)."),
                      concurrency: int = concurrency_option(100, help="Targets in flight."),
                      cidr: Optional[str] = typer.Option(None, "--cidr", help="Probe the addresses of a network (VN probe only: no hostname)."),
                      zmap: bool = typer.Option(False, "--zmap", help="With --cidr: Debian zmap's udp module sends the VN probe to the whole network first; only addresses that answered are probed."),
                      rate: float = rate_option(10000.0, help="zmap packets per second (--zmap; at most etiquette.rate_pps).")
                      ) -> dict:
        """Which hosts speak QUIC: Version Negotiation probe, Alt-Svc h3, HTTPS DNS record (Table 6.2)."""
        from .scanner import DiscoverOptions, QuicDiscoverScanner
        from .store import QuicStore

        timeout_s = timeout
        if cidr is not None:
            if list_name or target:
                raise UsageError("give --cidr or --list/--target, not both")
            targets = network_targets(cidr, port, zmap=zmap, most=1 << 16,
                                      too_many="--cidr: at most a /16 without --zmap")
        elif zmap:
            raise UsageError("--zmap needs --cidr")
        else:
            targets = TargetSelection(list_name, top, tuple(target), port).resolving(TARGETS)
        ctx = open_scan({"list": list_name, "top": top, "target": target, "port": port,
                                          "timeout_s": timeout_s, "cidr": cidr, "zmap": zmap},
                        packages=("aioquic", "dnspython"), targets=targets, concurrency=concurrency,
                        rate_pps=rate if zmap else None)
        extra: dict = {}
        if zmap:
            targets, extra = _zmap_responders(ctx, cidr, port, ctx.limiter.rate)  # type: ignore[arg-type]  # --zmap needs --cidr
        store = QuicStore(ctx.db, ctx.run.id)
        sc = QuicDiscoverScanner()
        sc.init(DiscoverOptions(timeout_s=timeout_s, port=port), ctx)
        counts = _run(sc, targets, store, store.write_discovery, concurrency)
        return _finish(ctx, {**counts, **extra})

    @measurement(scan_app, "quic", tables=("quic_connection", 'quic_token', 'quic_ticket'), promise=promises.QUIC)
    def quic(list_name: Optional[str] = _LIST, top: Optional[int] = _TOP, target: list[str] = _TARGETS,
             port: int = _PORT,
             timeout: float = timeout_option(5.0, help="Per connection."),
             resume: bool = typer.Option(True, "--resume/--no-resume",
                                         help="Reconnect presenting the token and ticket (0-RTT)."),
             concurrency: int = concurrency_option(50, help="Connections in flight.")) -> dict:
        """QUIC handshakes: version, ALPN, transport parameters, Retry, NEW_TOKEN tokens, tickets, certificate."""
        from .records import ConnectOptions
        from .scanner import QuicHandshakeScanner, store_handshake
        from .store import QuicStore

        timeout_s = timeout
        targets = TargetSelection(list_name, top, tuple(target), port).resolving(TARGETS)
        ctx = open_scan({"list": list_name, "top": top, "target": target, "port": port,
                                 "timeout_s": timeout_s, "resume": resume}, packages=("aioquic",),
                        targets=targets, concurrency=concurrency)
        store = QuicStore(ctx.db, ctx.run.id)
        sc = QuicHandshakeScanner()
        sc.init((ConnectOptions(timeout_s=timeout_s, user_agent=user_agent(ctx.config.etiquette)), resume), ctx)
        counts = _run(sc, targets, store, lambda o: store_handshake(store, o), concurrency)
        return _finish(ctx, counts)

    @measurement(scan_app, "quic-turnover", tables=('quic_turnover_host', 'quic_connection', 'quic_token', 'quic_ticket',
                                                   'quic_turnover_event'), promise=promises.QUIC_TURNOVER)
    def quic_turnover(list_name: Optional[str] = _LIST, top: Optional[int] = _TOP, target: list[str] = _TARGETS,
                      port: int = _PORT,
                      every: float = duration_option(600.0, "--every", help="Interval between samples and age "
                                                     "step of the lifetime search (thesis: 10m)."),
                      duration: float = duration_option(172800.0, "--for", help="Sample span and largest age "
                                                        "tried (thesis: 48h)."),
                      timeout: float = timeout_option(5.0, help="Per connection."),
                      sessions: int = typer.Option(0, "--sessions", min=0, help="Tickets (tokens) held per address and "
                                                   "kind (0 = ceil(sqrt(ages)): two search rounds)."),
                      hosts_in_flight: int = typer.Option(1000, "--hosts-in-flight", min=1, help="Addresses probed at once."),
                      concurrency: int = concurrency_option(100, help="Connections in flight."),
                      resume: Optional[int] = typer.Option(None, "--resume", help="Continue this interrupted run "
                                                           "(its own targets and options).")) -> dict:
        """Repeated connections: token/ticket acceptance lifetimes (each age with state never presented before) and key turnover per host."""
        from .records import ConnectOptions, TurnoverOptions
        from .turnover_run import params, resume_turnover, run_turnover

        if resume is not None:
            if list_name or target:
                raise UsageError("--resume takes the run's own targets: give no --list/--target")
            p, targets, reopen = resume_turnover(resume)
            from netsurvey.runctx import is_dry_run

            if is_dry_run():   # records a cancelled run with the plan, contacts nothing, ends here
                open_scan({"resume": resume}, packages=("aioquic",), targets=targets)
            ctx = reopen()
            opts = TurnoverOptions(p["every_s"], p["for_s"], ConnectOptions(
                timeout_s=p["timeout_s"], user_agent=user_agent(ctx.config.etiquette)))
            return run_turnover(ctx, targets, opts, slots=p["slots"], hosts_in_flight=p["hosts_in_flight"],
                                concurrency=p["concurrency"], resumed_from=resume)
        every_s, duration_s = every, duration
        timeout_s = timeout
        if duration_s < every_s:
            raise UsageError("--for must be at least --every")
        query = {"list": list_name, "top": top, "target": target, "port": port}
        from netsurvey.runctx import is_dry_run

        if is_dry_run():   # the plan resolves the names as the run will: records a cancelled run, ends here
            open_scan({"query": query}, packages=("aioquic",),
                      targets=TargetSelection(list_name, top, tuple(target), port).resolving(TARGETS),
                      concurrency=concurrency)
        targets = resolved_list(TargetSelection(list_name, top, tuple(target), port).resolving(TARGETS))  # kept for --resume
        from netsurvey.agesearch import default_slots

        slots = sessions or default_slots(int(duration_s / every_s + 1e-9))
        opts = TurnoverOptions(every_s, duration_s, ConnectOptions(timeout_s=timeout_s))
        ctx = open_scan(params(targets, opts, slots=slots, hosts_in_flight=hosts_in_flight,
                                                concurrency=concurrency, query=query),
                        packages=("aioquic",), targets=targets, concurrency=concurrency)
        opts = TurnoverOptions(every_s, duration_s, ConnectOptions(timeout_s=timeout_s,
                                                                   user_agent=user_agent(ctx.config.etiquette)))
        return run_turnover(ctx, targets, opts, slots=slots, hosts_in_flight=hosts_in_flight, concurrency=concurrency)
