"""`netsurvey scan dns-ttl` and `netsurvey scan dns-ecs` (output formatting only; the
measuring lives in ttl.py / ecs.py)."""
from __future__ import annotations

import io
from typing import Any, Mapping, Optional

import typer
from rich.console import Console
from rich.table import Table

from netsurvey.config import finite
from netsurvey.errors import UsageError
from netsurvey.measure import measurement
from netsurvey.options import concurrency_option, list_option, rate_option, timeout_option, top_option
from netsurvey.runctx import json_output
from netsurvey.selection import TargetSelection

from . import promises
from .options import NAMES, check_allowed as _check_allowed, default_resolver, parse_server, parse_subnets


def _engine_options(rate_ns: Optional[float], retries: int, timeout: float):
    from .engine import EngineOptions

    if rate_ns is not None and rate_ns <= 0:
        raise UsageError("--ns-qps must be positive")
    if retries < 0 or timeout <= 0:
        raise UsageError("--retries must be >= 0 and --timeout positive")
    opts = EngineOptions(initial_rto=timeout, ns_qps=rate_ns, retries=retries)
    from netsurvey import shard

    spec = shard.current()
    if spec is not None:
        opts = opts.shared_by(spec.count)
    return opts


def _execute(kind: str, scanner, options, targets, params: dict, rows, table: str, rate: Optional[float],
             concurrency: int) -> dict:
    from netsurvey import aio
    from netsurvey.clictx import open_scan
    from netsurvey.scanning import run_scan

    from .store import writer

    if concurrency <= 0:
        raise UsageError("--concurrency must be positive")
    finite(rate, "--rate", positive=True)
    params = dict(params, event_loop=aio.loop_name())  # recorded: the loop changes CPU per query
    ctx = open_scan(params, packages=("dnspython", "uvloop"), rate_pps=rate, targets=targets,
                    concurrency=concurrency, plan_note=getattr(options, "plan_note", None))
    scanner.init(options, ctx)
    as_json = json_output()
    if as_json:
        ctx.console.quiet = True
    w = writer(ctx.db, table)
    try:
        counts = aio.run(run_scan(scanner, targets, lambda o: w.write_many(rows(ctx.run.id, o)),
                                      concurrency=concurrency, show_progress=not as_json,
                                      description=f"{kind} scan"))
    finally:
        w.close()
    counts["targets"] = len(targets)
    ctx.counts.update(counts)
    return {"run_id": ctx.run.id, "counts": counts, "engine": scanner.engine.stats}


def register(app: typer.Typer, scan_app: typer.Typer) -> None:
    from .kdig import register as register_kdig

    register_kdig(scan_app)  # scan dns-second-opinion (issue 24)

    @measurement(scan_app, "dns-ttl", tables=('dns_ttl_probe',), promise=promises.DNS_TTL, render_text=render_text)
    def dns_ttl(
        list_name: Optional[str] = list_option(help="Target list to scan."),
        top: Optional[int] = top_option(help="Only the first N targets."),
        names: list[str] = typer.Option([], "--name", help="Extra hostname (repeatable)."),
        resolver: Optional[str] = typer.Option(None, "--resolver",
                                               help="Resolver the delegation walk starts from (default: resolv.conf)."),
        nameserver: Optional[str] = typer.Option(None, "--nameserver",
                                                 help="Ask this server directly instead of walking (ADDR[:PORT])."),
        family: str = typer.Option("any", "--family", help="Transport to nameservers: 4, 6 or any."),
        qtypes: str = typer.Option("A,AAAA", "--types", help="Record types, comma-separated (A, AAAA)."),
        edns_payload: int = typer.Option(1232, "--edns-payload", help="EDNS UDP payload in bytes; 0 = no EDNS."),
        concurrency: int = concurrency_option(1000, help="Hostnames in flight (queries are windowed per server)."),
        rate: Optional[float] = rate_option(),
        ns_qps: Optional[float] = typer.Option(None, "--ns-qps", help="Queries/s per nameserver, below etiquette.per_destination_pps (default: that limit alone)."),
        retries: int = typer.Option(2, "--retries", help="UDP retransmissions per query."),
        timeout: float = timeout_option(0.5, help="First retransmit timeout in seconds (then adaptive, doubled per retry)."),
    ) -> dict:
        """Authoritative TTLs of A/AAAA records (thesis 2.4.2, Fig 2.5)."""
        from .store import ttl_rows
        from .ttl import QTYPES, TtlOptions, TtlScanner

        if family not in ("4", "6", "any"):
            raise UsageError("--family must be 4, 6 or any")
        types = tuple(t.strip().upper() for t in qtypes.split(",") if t.strip())
        if not types or any(t not in QTYPES for t in types):
            raise UsageError(f"--types {qtypes!r}: only A and AAAA")
        if edns_payload and not 512 <= edns_payload <= 65535:
            raise UsageError("--edns-payload must be 0 or 512..65535")
        res = parse_server(resolver) if resolver else (None if nameserver else default_resolver())
        ns = parse_server(nameserver) if nameserver else None
        _check_allowed("--nameserver" if ns else "--resolver", (ns or res)[0])  # type: ignore[index]  # one is set
        eng = _engine_options(ns_qps, retries, timeout)
        targets = TargetSelection(list_name, top, tuple(names), 53).items(NAMES)
        opts = TtlOptions(resolver=res, nameserver=ns, family=family, qtypes=types,
                          edns_payload=edns_payload or None, engine=eng)
        params = {"list": list_name, "top": top, "names": names, "resolver": resolver and list(res),  # type: ignore[arg-type]  # --resolver: parsed
                  "nameserver": ns and list(ns), "family": family, "types": list(types), "edns_payload": edns_payload,
                  "concurrency": concurrency, "rate": rate, "ns_qps": ns_qps, "retries": retries, "timeout": timeout}
        sc = TtlScanner()
        return _execute("dns-ttl", sc, opts, targets, params, lambda rid, o: ttl_rows(rid, o, types),
                        "dns_ttl_probe", rate, concurrency)

    @measurement(scan_app, "dns-ecs", tables=('dns_ecs_probe',), promise=promises.DNS_ECS, render_text=render_text)
    def dns_ecs(
        list_name: Optional[str] = list_option(help="Target list to scan."),
        top: Optional[int] = top_option(help="Only the first N targets."),
        names: list[str] = typer.Option([], "--name", help="Extra hostname (repeatable)."),
        resolver: Optional[str] = typer.Option(None, "--resolver", help="Resolver asked (ADDR[:PORT]; default: resolv.conf)."),
        subnets: list[str] = typer.Option([], "--subnet",
                                          help="Client subnet PREFIX sent in ECS (repeatable; default: the vantage's /24)."),
        qtype: str = typer.Option("A", "--type", help="Record type asked (A or AAAA)."),
        concurrency: int = concurrency_option(1000, help="Hostnames in flight."),
        rate: Optional[float] = rate_option(),
        ns_qps: Optional[float] = typer.Option(None, "--ns-qps", help="Queries/s to the resolver, below etiquette.per_destination_pps unless it is in etiquette.own_servers."),
        retries: int = typer.Option(2, "--retries", help="UDP retransmissions per query."),
        timeout: float = timeout_option(1.0, help="First retransmit timeout in seconds."),
        backend: str = typer.Option("native", "--backend",
                                    help="native (asyncio engine) or zdns (pinned zdns; exactly one --subnet)."),
    ) -> dict:
        """EDNS Client Subnet scopes announced via a resolver (thesis 2.4.3)."""
        from .ecs import EcsOptions, EcsScanner, vantage_subnet
        from .store import ecs_rows

        qt = qtype.upper()
        if qt not in ("A", "AAAA"):
            raise UsageError("--type must be A or AAAA")
        res = parse_server(resolver) if resolver else default_resolver()
        nets = parse_subnets(subnets)
        if not nets:
            try:
                nets = [vantage_subnet(res[0])]
            except OSError as exc:
                raise UsageError(f"cannot find the vantage's subnet towards {res[0]}: {exc}; pass --subnet") from None
        nets = list(dict.fromkeys(nets))
        if backend not in ("native", "zdns"):
            raise UsageError("--backend must be native or zdns")
        if backend == "zdns":
            from .zdns_backend import zdns_binary

            zdns_binary()
            if len(nets) != 1:
                raise UsageError("--backend zdns takes exactly one --subnet (zdns has one global client subnet)")
        _check_allowed("--resolver", res[0])
        eng = _engine_options(ns_qps, retries, timeout)
        targets = TargetSelection(list_name, top, tuple(names), 53).items(NAMES)
        opts = EcsOptions(resolver=res, subnets=tuple(nets), qtype=qt, engine=eng)
        params = {"list": list_name, "top": top, "names": names, "resolver": list(res),
                  "subnets": [str(n) for n in nets], "type": qt, "concurrency": concurrency, "rate": rate,
                  "ns_qps": ns_qps, "retries": retries, "timeout": timeout, "backend": backend}
        if backend == "zdns":
            from .zdns_backend import ZdnsEcsScanner, zdns_version

            params["zdns"] = zdns_version()
            sc: EcsScanner = ZdnsEcsScanner()
        else:
            sc = EcsScanner()
        return _execute("dns-ecs", sc, opts, targets, params,
                        lambda rid, o: ecs_rows(rid, o, qt, res[0], nets), "dns_ecs_probe", rate, concurrency)


def render_text(res: Mapping[str, Any]) -> str:
    """The text summary of dns-ttl and dns-ecs (the run path prints it): the counts as a
    table, then what the query engine did."""
    t = Table("status", "targets", title=f"scan_run {res['run_id']}")
    for k, v in sorted(res["counts"].items()):
        t.add_row(k, str(v))
    console = Console(file=io.StringIO(), width=100, color_system=None)
    console.print(t)
    e = res["engine"]
    return (console.file.getvalue().rstrip("\n") + "\n"   # type: ignore[attr-defined]  # the StringIO above
            + f"queries sent {e['sent']}, replies {e['replies']}, retransmits {e['retransmits']}, "
              f"timeouts {e['timeouts']}, TCP fallbacks {e['tcp']}, window cuts {e['window_cuts']}")
