"""`netsurvey scan tfo | tfo-lb | tfo-reuse` (registered by netsurvey/cli.py)."""
from __future__ import annotations

import ipaddress
from typing import Any, Optional

import typer
from rich.console import Console

from netsurvey.clictx import list_db, open_scan
from netsurvey.config import finite
from netsurvey.errors import UsageError
from netsurvey.measure import measurement
from netsurvey.options import duration_option, list_option, port_option, rate_option, top_option
from netsurvey.runctx import json_output
from netsurvey.selection import TargetSelection, network_targets, responders

from . import promises

err = Console(stderr=True)




def _check_common(port: int, rate: float, cooldown: float) -> None:
    if not 1 <= port <= 65535:
        raise UsageError(f"--port: {port} is not a TCP port (1-65535)")
    finite(rate, "--rate", minimum=0)
    finite(cooldown, "--cooldown", minimum=0)


def _nameservers(ns: Optional[str]) -> Optional[list[str]]:
    if ns is None:
        return None
    try:
        ipaddress.ip_address(ns)
    except ValueError:
        raise UsageError(f"--nameserver: {ns!r} is not an IP address") from None
    from netsurvey.etiquette import check_on_machine

    check_on_machine("--nameserver", ns)
    return [ns]


def register(app: typer.Typer, scan_app: typer.Typer) -> None:
    @measurement(scan_app, "tfo", tables=('tfo_probe', 'tfo_kernel_check'), promise=promises.TFO)
    def scan_tfo(
        list_name: Optional[str] = list_option(help="Target list (hostnames) to probe."),
        top: Optional[int] = top_option(help="Only the top N hostnames of the list."),
        cidr: Optional[str] = typer.Option(None, "--cidr", help="Probe every address of a network instead of a list."),
        port: int = port_option(443, help="TCP port probed."),
        rate: float = rate_option(10000.0, help="Probes per second (at most etiquette.rate_pps)."),
        all_addresses: bool = typer.Option(False, "--all-addresses", help="Probe every A and AAAA address (default: the first A, as the thesis)."),
        experimental: bool = typer.Option(False, "--experimental", help="Request cookies with option 254/0xF989 instead of 34."),
        cooldown: float = typer.Option(1.0, "--cooldown", help="Seconds to wait for replies after the last probe."),
        seed: Optional[int] = typer.Option(None, "--seed", help="64-bit key of the reply-matching hash (default: random per run)."),
        kernel_sample: int = typer.Option(0, "--kernel-check", help="Cross-check N TFO targets with the kernel's TFO client."),
        nameserver: Optional[str] = typer.Option(None, "--nameserver", help="Resolve through this server instead of the system resolver."),
        zmap: bool = typer.Option(False, "--zmap", help="With --cidr: find addresses with the port open with Debian's zmap first, then TFO-probe only those."),
        senders: int = typer.Option(1, "--senders", min=1, help="Sending processes, one per CPU, at most as many as CPUs (--rate is split between them)."),
    ) -> dict:
        """Which targets support TCP Fast Open (SYN with a cookie request; thesis Table 3.1)."""
        from .scanner import TfoOptions
        from .survey import new_seed, support_scan

        _check_common(port, rate, cooldown)
        if (list_name is None) == (cidr is None):
            raise UsageError("give exactly one of --list NAME or --cidr NETWORK")
        if kernel_sample < 0:
            raise UsageError("--kernel-check must be >= 0")
        if not 1 <= senders <= 64:
            raise UsageError("--senders must be between 1 and 64")
        ns = _nameservers(nameserver)
        if cidr is not None:   # with --zmap the plan's view of the range: the probed targets come from zmap
            targets: Any = network_targets(cidr, port, zmap=zmap, most=1 << 24, most_with_zmap=True,
                                           too_many="--cidr: at most a /8 (IPv4) per run")
        elif zmap:
            raise UsageError("--zmap needs --cidr (hostnames are resolved and probed directly)")
        else:   # streamed: read and resolved batch by batch while probing (issue 26)
            targets = TargetSelection(list_name, top, port=port, ipv6=all_addresses).resolving(
                None, first=not all_addresses, nameservers=ns)
        failed: list = []
        seed = new_seed() if seed is None else seed & (2**64 - 1)
        params = dict(list=list_name, top=top, cidr=cidr, port=port, rate=rate, all_addresses=all_addresses,
                      experimental=experimental, cooldown=cooldown, seed=seed, kernel_check=kernel_sample,
                      senders=senders)
        params["zmap"] = zmap
        # --rate may only lower etiquette.rate_pps (0 = as fast as the etiquette allows);
        # the engine paces by the run's effective rate (divided among shards)
        ctx = open_scan(params, targets=targets, rate_pps=rate or None)
        rate = ctx.limiter.rate
        found = None
        if zmap:
            from netsurvey.zmap import zmap_discover

            found = zmap_discover(cidr, port, ctx.policy, rate=rate, cooldown=cooldown)  # type: ignore[arg-type]  # --zmap needs --cidr
            targets = responders(found.open, port)
        counts = support_scan(ctx, TfoOptions(rate, cooldown, seed, experimental, senders), targets, failed,
                              kernel_sample=kernel_sample, show_progress=not json_output())
        if found is not None:   # what zmap did, kept with the run's counts
            counts.update({"zmap-sent": found.sent, "zmap-open": len(found.open), "blocked": found.blocked})
        ctx.counts.update(counts)
        return {"run_id": ctx.run.id, "counts": counts}

    @measurement(scan_app, "tfo-lb", tables=('tfo_probe',), promise=promises.TFO_LB)
    def scan_tfo_lb(
        list_name: Optional[str] = list_option(help="Target list (hostnames)."),
        top: Optional[int] = top_option(help="Only the top N hostnames."),
        support_run: Optional[int] = typer.Option(None, "--support-run", help="Only hostnames with TFO in this 'scan tfo' run."),
        rounds: int = typer.Option(10, "--rounds", min=1, max=1000, help="Connections per hostname."),
        interval: float = duration_option(2700.0, "--interval", allow_zero=True,
                                          help="Time between rounds (0: back to back)."),
        port: int = port_option(443, help="TCP port probed."),
        rate: float = rate_option(10000.0, help="Probes per second (at most etiquette.rate_pps)."),
        cooldown: float = typer.Option(1.0, "--cooldown", help="Seconds to wait for replies after each round."),
        nameserver: Optional[str] = typer.Option(None, "--nameserver", help="Resolve through this server (e.g. the authoritative one) instead of the system resolver."),
        resume: Optional[int] = typer.Option(None, "--resume", help="Continue the survey of this run id after a restart."),
        seed: Optional[int] = typer.Option(None, "--seed", help="64-bit matching key (default: random)."),
        stop_after: Optional[int] = typer.Option(None, "--stop-after", min=1, hidden=True, help="Stop after this round (tests of --resume)."),
    ) -> dict:
        """Load-balancing survey: re-resolve and probe each hostname once per round (Fig 3.2, 3.3)."""
        from netsurvey.scanning import ScanContext
        from netsurvey.targets import Target

        from .scanner import TfoOptions
        from .survey import LbPlan, lb_survey, lb_targets, new_seed

        db = list_db()   # the run to resume or the list: neither is in a database not made yet
        if resume is not None:
            with db.connect() as conn:
                row = conn.execute("SELECT kind, parameters, status FROM scan_run WHERE id=%s", (resume,)).fetchone()
            if row is None or row[0] != "tfo-lb":
                raise UsageError(f"--resume: no tfo-lb run with id {resume}")
            p = row[1]
            hostnames = tuple(Target(r, h) for r, h in p["hostnames"])
            plan = LbPlan(hostnames, p["port"], p["rounds"], p["interval"], tuple(p["nameservers"]) if p["nameservers"] else None)
            from netsurvey.etiquette import check_on_machine

            for server in plan.nameservers or ():   # recorded where it was reachable; maybe not from here
                check_on_machine(f"--resume {resume}: the run's --nameserver", server)
            from netsurvey.clictx import state as st
            from netsurvey.etiquette import TargetPolicy, limiter_from_config
            from netsurvey.runctx import is_dry_run

            if is_dry_run():  # records a cancelled run with the plan, contacts nothing, ends here
                open_scan({"resume": resume}, targets=lb_targets(plan))
            from netsurvey.runs import reopen_run

            cfg = st.config
            limiter = limiter_from_config(cfg.etiquette, p["rate"] or None)
            rate = limiter.rate
            ctx = ScanContext(db=db, run=reopen_run(db, resume), config=cfg,
                              policy=TargetPolicy.from_config(cfg.etiquette), limiter=limiter)
            opts = TfoOptions(rate, p["cooldown"], p["seed"])
        else:
            if list_name is None:
                raise UsageError("--list NAME is required (or --resume RUN)")
            secs = interval
            _check_common(port, rate, cooldown)
            ns = _nameservers(nameserver)
            chosen = [Target(t.rank, t.hostname)  # type: ignore[arg-type]  # a list's names
                      for t in TargetSelection(list_name, top, port=port).items(None)]
            if support_run is not None:
                with db.connect() as conn:
                    ok = {h for (h,) in conn.execute(
                        "SELECT DISTINCT hostname FROM tfo_probe WHERE run_id=%s AND cookie_len > 0", (support_run,))}
                if not ok:
                    raise UsageError(f"--support-run: run {support_run} has no hostname with TFO")
                chosen = [t for t in chosen if t.hostname in ok]
            seed = new_seed() if seed is None else seed & (2**64 - 1)
            plan = LbPlan(tuple(chosen), port, rounds, secs, tuple(ns) if ns else None)
            params = dict(list=list_name, top=top, support_run=support_run, rounds=rounds, interval=secs, port=port,
                          rate=rate, cooldown=cooldown, seed=seed, nameservers=ns,
                          hostnames=[(t.rank, t.hostname) for t in chosen])
            ctx = open_scan(params, targets=lb_targets(plan), rate_pps=rate or None)
            opts = TfoOptions(ctx.limiter.rate, cooldown, seed)
        ctx.run.final_counts = lambda: {"rounds_done": _done(ctx)}
        if stop_after is not None:
            ctx.run.outcome = "cancelled"   # stopped on purpose (tests of --resume)
        counts = lb_survey(ctx, opts, plan, show_progress=not json_output(), log=err.print, stop_after=stop_after)
        status = "finished" if counts["rounds_done"] >= plan.rounds else "cancelled"
        ctx.counts.update(counts)
        ctx.run.outcome = status
        return {"run_id": ctx.run.id, "status": status, "counts": counts}

    @measurement(scan_app, "tfo-reuse", tables=('tfo_reuse',), promise=promises.TFO_REUSE)
    def scan_tfo_reuse(
        list_name: Optional[str] = list_option(help="Target list (hostnames)."),
        top: Optional[int] = top_option(help="Only the top N hostnames."),
        lb_run: Optional[int] = typer.Option(None, "--lb-run", help="Also use the addresses a 'scan tfo-lb' run saw."),
        cookies_from: Optional[int] = typer.Option(None, "--cookies-from", help="Instead of --list: present the "
                                                   "cookies a 'scan tfo' run received, each to the address that "
                                                   "issued it (still accepted? e.g. after a key rotation)."),
        port: int = port_option(443, help="TCP port probed."),
        rate: float = rate_option(10000.0, help="Probes per second (at most etiquette.rate_pps)."),
        cooldown: float = typer.Option(1.0, "--cooldown", help="Seconds to wait for replies."),
        ipv6: bool = typer.Option(False, "--ipv6", help="Include AAAA addresses."),
        nameserver: Optional[str] = typer.Option(None, "--nameserver", help="Resolve through this server."),
        seed: Optional[int] = typer.Option(None, "--seed", help="64-bit matching key (default: random)."),
    ) -> dict:
        """Do a hostname's addresses accept each other's cookies? SYN+data with A's cookie to B (and A)."""
        import asyncio

        from netsurvey.selection import resolve_names

        from .scanner import TfoOptions
        from .survey import new_seed, reuse_scan, reuse_targets

        _check_common(port, rate, cooldown)
        if (list_name is None) == (cookies_from is None):
            raise UsageError("give --list or --cookies-from (one of them)")
        db = list_db()   # the cookies run or the list: neither is in a database not made yet
        if cookies_from is not None:
            from .represent import represent_cli

            return represent_cli(db, cookies_from, port, rate, cooldown, seed)
        chosen = list(TargetSelection(list_name, top, port=port, ipv6=ipv6).items(None))
        resolved, _ = asyncio.run(resolve_names(chosen, ipv6=ipv6, nameservers=_nameservers(nameserver)))
        addresses: dict[str, list[str]] = {t.hostname: [] for t in chosen}  # type: ignore[misc]  # a list's names
        for t in resolved:
            addresses[t.hostname].append(t.address)  # type: ignore[index, arg-type]  # (as above), resolved
        if lb_run is not None:
            with db.connect() as conn:
                for h, a in conn.execute("SELECT DISTINCT hostname, host(address) FROM tfo_probe WHERE run_id=%s "
                                         "AND round > 0 AND address IS NOT NULL ORDER BY 1, 2", (lb_run,)):
                    if h in addresses and a not in addresses[h]:
                        addresses[h].append(a)
        seed = new_seed() if seed is None else seed & (2**64 - 1)
        ctx = open_scan(dict(list=list_name, top=top, lb_run=lb_run, port=port, rate=rate,
                                          cooldown=cooldown, ipv6=ipv6, seed=seed),
                        targets=reuse_targets(addresses, port), rate_pps=rate or None)
        counts = reuse_scan(ctx, TfoOptions(ctx.limiter.rate, cooldown, seed), addresses, port)
        ctx.counts.update(counts)
        return {"run_id": ctx.run.id, "counts": counts}


def _done(ctx) -> int:
    from .survey import rounds_done

    try:
        return rounds_done(ctx)
    except Exception:
        return 0
