"""``netsurvey scan quic-discover | quic | quic-turnover`` (registered by netsurvey/cli.py)."""
from __future__ import annotations

import asyncio
import ipaddress
import json
import logging
import re
from typing import Optional

import typer
from rich.console import Console

from netsurvey.clictx import list_db, open_scan
from netsurvey.errors import UsageError
from netsurvey.etiquette import user_agent
from netsurvey.measure import measurement
from netsurvey.options import (
    check_targets,
    concurrency_option,
    duration_option,
    json_option,
    list_option,
    port_option,
    rate_option,
    target_option,
    timeout_option,
    top_option,
)
from netsurvey.scanning import ScanOutcome, ScanStatus, ScanTarget, run_scan

from . import promises

_TARGET = re.compile(r"^(?:(?P<host>[A-Za-z0-9_.-]+)@)?(?:\[(?P<v6>[0-9a-fA-F:.]+)\]|(?P<addr>[^:@\[\]]+|[0-9a-fA-F:]+))"
                     r"(?::(?P<port>\d+))?$")



def parse_target(text: str, default_port: int) -> tuple[Optional[str], Optional[str], int]:
    """'[HOST@]ADDRESS[:PORT]' (IPv6 in brackets when a port is given) or a hostname ->
    (hostname, address or None, port)."""
    raw = text.strip()
    try:
        ipaddress.ip_address(raw)
        return None, raw, default_port
    except ValueError:
        pass
    m = _TARGET.match(raw)
    if not m:
        raise UsageError(f"--target: cannot parse {text!r} (use [HOST@]ADDRESS[:PORT] or HOST)")
    host, addr, port = m.group("host"), m.group("v6") or m.group("addr"), m.group("port")
    port_n = int(port) if port else default_port
    if not 0 < port_n < 65536:
        raise UsageError(f"--target: bad port in {text!r}")
    try:
        ipaddress.ip_address(addr)
    except ValueError:
        if host is None and port is None:  # a bare hostname
            from netsurvey.targets import normalize_hostname

            try:
                return normalize_hostname(addr), None, default_port
            except ValueError as exc:
                raise UsageError(f"--target: {text!r}: {exc}") from None
        raise UsageError(f"--target: {addr!r} is not an IP address") from None
    return host, addr, port_n


def _target_stream(list_name: Optional[str], top: Optional[int], target: list[str], port: int):
    """The list (A and AAAA) and --target entries as a stream of ScanTargets, one per
    address (issue 26): the list's names are read from the database and resolved batch by
    batch while the scan goes; a name without addresses goes to the stream's ``on_failed``
    (stored as resolution-failed). A dry run's plan resolves them the same way (the
    resolver is asked, no target contacted) to judge their addresses."""
    from netsurvey.scanning import NameStream, ResolvingStream
    from netsurvey.targets import stream_targets

    check_targets(list_name, top, target, what="--target [HOST@]ADDRESS[:PORT] or HOST")
    extra = [ScanTarget(host, addr, p, None) for host, addr, p in (parse_target(spec, port) for spec in target)]
    listed = stream_targets(list_db(), list_name, top) if list_name else None
    if listed is not None or any(t.address is None for t in extra):
        from netsurvey.resolve import system_resolver

        system_resolver()   # a resolver off the machine is bad input now, not at the first batch (run opened)
    return ResolvingStream(NameStream(listed, port, extra), _resolve_batch)


def _resolve_batch(batch: list[ScanTarget]) -> tuple[list[ScanTarget], list[ScanOutcome]]:
    """Every A and AAAA address of each name (each target keeps its own port); a name
    without one fails with the resolver's reason (nxdomain, servfail, timeout, ...)."""
    from netsurvey.resolve import resolve_many

    res = asyncio.run(resolve_many([t.hostname for t in batch]))  # type: ignore[misc]  # a list's names
    out, failed = [], []
    for t in batch:
        addrs = res[t.hostname].addresses  # type: ignore[index]  # (as above)
        if not addrs:
            failed.append(ScanOutcome(t, ScanStatus.RESOLUTION_FAILED, None, res[t.hostname].error or "no address"))  # type: ignore[index]  # (as above)
        out += [ScanTarget(t.hostname, a, t.port, t.rank) for a in addrs]
    return out, failed


def _targets(list_name: Optional[str], top: Optional[int], target: list[str], port: int) -> list[ScanTarget]:
    """:func:`_target_stream` as a list (quic-turnover keeps its targets in the run's
    parameters for --resume); a name without addresses is a target with address None."""
    stream = _target_stream(list_name, top, target, port)
    out: list[ScanTarget] = []
    stream.on_failed = lambda o: out.append(o.target)
    for t in stream:
        out.append(t)
    return out


def _network_targets(cidr: str, port: int, zmap: bool):
    """Every address of ``cidr`` (at most a /16), without hostnames; with ``zmap`` only the
    policy is checked here (the addresses come from zmap later: the network, for the plan)."""
    import ipaddress

    try:
        net = ipaddress.ip_network(cidr, strict=False)
    except ValueError as exc:
        raise UsageError(f"--cidr: {exc}") from None
    if zmap:
        from netsurvey.clictx import state
        from netsurvey.etiquette import TargetPolicy
        from netsurvey.zmap import check_discoverable

        check_discoverable(cidr, TargetPolicy.from_config(state.config.etiquette))
        from netsurvey.zmap import ZmapRange

        return ZmapRange(cidr, port)
    if net.num_addresses > 1 << 16:
        raise UsageError("--cidr: at most a /16 without --zmap")
    return [ScanTarget(None, str(a), port, None) for a in net]


def _zmap_responders(ctx, cidr: str, port: int, rate: float) -> tuple[list[ScanTarget], dict]:
    """zmap's udp module with the Version Negotiation probe as payload over ``cidr``: the
    addresses that sent any UDP reply, and counts for the run (zmap-sent, zmap-answered)."""
    from netsurvey.zmap import zmap_discover

    from .vn import CID_LEN, build_probe

    found = zmap_discover(cidr, port, ctx.policy, rate=rate, udp_payload=build_probe(b"\x5a" * CID_LEN, b"\xa5" * CID_LEN))
    return [ScanTarget(None, a, port, None) for a in found.open], {"zmap-sent": found.sent,
                                                                   "zmap-answered": len(found.open),
                                                                   "blocked": found.blocked}


def _finish(ctx, counts: dict, as_json: bool, extra: dict | None = None) -> None:
    ctx.counts.update(counts)
    if as_json:
        print(json.dumps({"run_id": ctx.run.id, "counts": counts, **(extra or {})}))
    else:
        Console().print(f"run {ctx.run.id}: " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())))


def _run(scanner, targets: list[ScanTarget], store, store_fn, concurrency: int, as_json: bool) -> dict:
    """Run the scan, store every outcome, close the writers (the run path ends the run:
    failed, or cancelled on Ctrl-C, if anything raises)."""
    logging.getLogger("quic").setLevel(logging.CRITICAL)  # aioquic logs failed handshakes itself
    from .handshake import settle_gc

    settle_gc()  # many short aioquic connections: see its docstring
    counts = _run_inner(scanner, targets, store_fn, concurrency, as_json)
    store.close()
    return counts


def _run_inner(scanner, targets: list[ScanTarget], store_fn, concurrency: int, as_json: bool) -> dict:
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
    asyncio.run(run_scan(scanner, resolved, store, concurrency=concurrency, show_progress=not as_json))
    return counts


_LIST = list_option(help="Target list name (see 'netsurvey targets list').")
_TOP = top_option(help="Only the first N hostnames of the list.")
_TARGETS = target_option(help="Extra target: [HOST@]ADDRESS[:PORT] or HOST (repeatable).")
_PORT = port_option(443, help="UDP port (TCP port for the Alt-Svc request).")
_JSON = json_option(help="Print run id and counts as JSON.")


def register(app: typer.Typer, scan_app: typer.Typer) -> None:
    @measurement(scan_app, "quic-discover", tables=('quic_discovery',), promise=promises.QUIC_DISCOVER)
    def quic_discover(list_name: Optional[str] = _LIST, top: Optional[int] = _TOP, target: list[str] = _TARGETS,
                      port: int = _PORT,
                      timeout: float = timeout_option(2.0, help="Per probe (VN attempt, HTTPS request)."),
                      concurrency: int = concurrency_option(100, help="Targets in flight."),
                      cidr: Optional[str] = typer.Option(None, "--cidr", help="Probe the addresses of a network (VN probe only: no hostname)."),
                      zmap: bool = typer.Option(False, "--zmap", help="With --cidr: Debian zmap's udp module sends the VN probe to the whole network first; only addresses that answered are probed."),
                      rate: float = rate_option(10000.0, help="zmap packets per second (--zmap; at most etiquette.rate_pps)."),
                      as_json: bool = _JSON) -> None:
        """Which hosts speak QUIC: Version Negotiation probe, Alt-Svc h3, HTTPS DNS record (Table 6.2)."""
        from .scanner import DiscoverOptions, QuicDiscoverScanner
        from .store import QuicStore

        timeout_s = timeout
        if cidr is not None:
            if list_name or target:
                raise UsageError("give --cidr or --list/--target, not both")
            targets = _network_targets(cidr, port, zmap)
        elif zmap:
            raise UsageError("--zmap needs --cidr")
        else:
            targets = _target_stream(list_name, top, target, port)
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
        counts = _run(sc, targets, store, store.write_discovery, concurrency, as_json)
        _finish(ctx, {**counts, **extra}, as_json)

    @measurement(scan_app, "quic", tables=("quic_connection", 'quic_token', 'quic_ticket'), promise=promises.QUIC)
    def quic(list_name: Optional[str] = _LIST, top: Optional[int] = _TOP, target: list[str] = _TARGETS,
             port: int = _PORT,
             timeout: float = timeout_option(5.0, help="Per connection."),
             resume: bool = typer.Option(True, "--resume/--no-resume",
                                         help="Reconnect presenting the token and ticket (0-RTT)."),
             concurrency: int = concurrency_option(50, help="Connections in flight."),
             as_json: bool = _JSON) -> None:
        """QUIC handshakes: version, ALPN, transport parameters, Retry, NEW_TOKEN tokens, tickets, certificate."""
        from .records import ConnectOptions
        from .scanner import QuicHandshakeScanner, store_handshake
        from .store import QuicStore

        timeout_s = timeout
        targets = _target_stream(list_name, top, target, port)
        ctx = open_scan({"list": list_name, "top": top, "target": target, "port": port,
                                 "timeout_s": timeout_s, "resume": resume}, packages=("aioquic",),
                        targets=targets, concurrency=concurrency)
        store = QuicStore(ctx.db, ctx.run.id)
        sc = QuicHandshakeScanner()
        sc.init((ConnectOptions(timeout_s=timeout_s, user_agent=user_agent(ctx.config.etiquette)), resume), ctx)
        counts = _run(sc, targets, store, lambda o: store_handshake(store, o), concurrency, as_json)
        _finish(ctx, counts, as_json)

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
                                                           "(its own targets and options)."),
                      as_json: bool = _JSON) -> None:
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
            res = run_turnover(ctx, targets, opts, slots=p["slots"], hosts_in_flight=p["hosts_in_flight"],
                               concurrency=p["concurrency"], resumed_from=resume)
            _print_result(res, as_json)
            return
        every_s, duration_s = every, duration
        timeout_s = timeout
        if duration_s < every_s:
            raise UsageError("--for must be at least --every")
        query = {"list": list_name, "top": top, "target": target, "port": port}
        from netsurvey.runctx import is_dry_run

        if is_dry_run():   # the plan resolves the names as the run will: records a cancelled run, ends here
            open_scan({"query": query}, packages=("aioquic",),
                      targets=_target_stream(list_name, top, target, port), concurrency=concurrency)
        targets = _targets(list_name, top, target, port)
        from netsurvey.agesearch import default_slots

        slots = sessions or default_slots(int(duration_s / every_s + 1e-9))
        opts = TurnoverOptions(every_s, duration_s, ConnectOptions(timeout_s=timeout_s))
        ctx = open_scan(params(targets, opts, slots=slots, hosts_in_flight=hosts_in_flight,
                                                concurrency=concurrency, query=query),
                        packages=("aioquic",), targets=targets, concurrency=concurrency)
        opts = TurnoverOptions(every_s, duration_s, ConnectOptions(timeout_s=timeout_s,
                                                                   user_agent=user_agent(ctx.config.etiquette)))
        res = run_turnover(ctx, targets, opts, slots=slots, hosts_in_flight=hosts_in_flight, concurrency=concurrency)
        _print_result(res, as_json)


def _print_result(res: dict, as_json: bool) -> None:
    if as_json:
        print(json.dumps(res))
    else:
        Console().print(f"run {res['run_id']}: " + ", ".join(f"{k} {v}" for k, v in sorted(res["counts"].items())))
