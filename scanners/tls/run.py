"""Orchestration of the TLS scans: open a scan_run, probe, store, finish. Output
formatting stays in cli.py; probing in survey/lifetime/shared."""
from __future__ import annotations

import asyncio
import csv
import datetime as dt
import ipaddress
from pathlib import Path
from typing import Optional

from netsurvey.clictx import open_scan
from netsurvey.errors import UsageError
from netsurvey.scanning import ScanTarget, run_scan
from netsurvey.writer import ResultWriter

from .lifetime import LifetimeOptions, LifetimeProbe
from .results import ResumptionAttempt, TlsOptions
from .shared import SharedOptions, SharedProbe, groups_from_db, origins_of_shard
from .survey import TlsScanner, expand_targets, handshake_rows, handshake_writer

Hosts = list[tuple[Optional[int], str, Optional[str]]]

RESUMPTION_COLUMNS = [("run_id", "int8"), ("mechanism", "text"), ("version", "text"), ("origin_host", "text"),
                      ("origin_address", "inet"), ("host", "text"), ("address", "inet"), ("age_s", "float8"),
                      ("resumed", "bool"), ("status", "text"), ("error", "text"), ("chain_index", "int4"),
                      ("key_name", "bytea"), ("attempted_at", "timestamptz")]


def _resumption_writer(db) -> ResultWriter:
    return ResultWriter(db, "tls_resumption", [c for c, _ in RESUMPTION_COLUMNS],
                        types=[t for _, t in RESUMPTION_COLUMNS], batch_rows=2000)


def _resumption_row(run_id: int, a: ResumptionAttempt) -> tuple:
    return (run_id, a.mechanism, a.version, a.origin_host, ipaddress.ip_address(a.origin_address), a.host,
            ipaddress.ip_address(a.address), a.age, a.resumed, a.status, a.error, a.chain_index, a.key_name,
            dt.datetime.now(dt.timezone.utc))


def run_survey(hosts: Hosts, opts: TlsOptions, *, concurrency: int = 100, list_name: Optional[str] = None) -> dict:
    """One survey round; returns a summary (run id, counts per status)."""
    params = {"list": list_name, "hosts": len(hosts), **{k: v for k, v in opts.__dict__.items()}}
    ctx = open_scan("tls", params, packages=("cryptography",), targets=_plan(hosts, opts.port),
                    concurrency=concurrency)
    scanner = TlsScanner()
    scanner.init(opts, ctx)
    try:
        with handshake_writer(ctx.db) as w:
            async def go():
                targets, failed = await expand_targets(hosts, opts.port, opts.ipv6)
                for o in failed:
                    w.write_many(handshake_rows(ctx.run.id, o, opts.versions))
                counts = await run_scan(scanner, targets, lambda o: w.write_many(
                    handshake_rows(ctx.run.id, o, opts.versions)), concurrency=concurrency, description="tls handshakes")
                if failed:
                    counts["resolution-failed"] = counts.get("resolution-failed", 0) + len(failed)
                return counts
            counts = asyncio.run(go())
    except BaseException:
        ctx.run.finish("failed")
        raise
    finally:
        scanner.close()
    ctx.run.finish("finished", counts)
    return {"run_id": ctx.run.id, **counts}


def _plan(hosts: Hosts, port: int) -> list[ScanTarget]:
    """What a dry run lists: the hosts (with their fixed address, if given)."""
    return [ScanTarget(h, a, port, r) for r, h, a in hosts]


def _allowed(ctx, targets: list[ScanTarget]) -> tuple[list[ScanTarget], int]:
    ok = [t for t in targets if ctx.policy.allowed(t.address)]
    return ok, len(targets) - len(ok)


def run_lifetime(hosts: Hosts, opts: LifetimeOptions, *, port: int, ipv6: bool, concurrency: int) -> dict:
    params = {"hosts": len(hosts), "port": port, "ipv6": ipv6, **opts.__dict__}
    ctx = open_scan("tls-lifetime", params, packages=("cryptography",), targets=_plan(hosts, port),
                    concurrency=concurrency)
    counts = {"attempts": 0, "resumed": 0}
    try:
        with _resumption_writer(ctx.db) as w:
            def emit(a: ResumptionAttempt) -> None:
                counts["attempts"] += 1
                counts["resumed"] += a.resumed
                w.write(_resumption_row(ctx.run.id, a))

            async def go():
                targets, failed = await expand_targets(hosts, port, ipv6)
                targets, blocked = _allowed(ctx, targets)
                counts.update(targets=len(targets), blocked=blocked, unresolved=len(failed))
                probe = LifetimeProbe(opts, emit, concurrency, limiter=ctx.limiter)
                try:
                    await asyncio.gather(*(probe.probe(t) for t in targets))
                finally:
                    probe.close()
            asyncio.run(go())
    except BaseException:
        ctx.run.finish("failed", counts)
        raise
    ctx.run.finish("finished", counts)
    return {"run_id": ctx.run.id, **counts}


def read_groups(path: Path) -> dict[str, list[str]]:
    """CSV lines 'group,hostname' ('#' comments) -> group -> hostnames."""
    if not path.exists():
        raise UsageError(f"{path}: file not found")
    out: dict[str, list[str]] = {}
    for i, row in enumerate(csv.reader(path.read_text().splitlines()), 1):
        if not row or row[0].startswith("#"):
            continue
        if len(row) != 2 or not row[0].strip() or not row[1].strip():
            raise UsageError(f"{path}:{i}: expected 'group,hostname'")
        out.setdefault(row[0].strip(), []).append(row[1].strip().lower().rstrip("."))
    if not out:
        raise UsageError(f"{path}: no groups")
    return out


def _store_groups(db, run_id: int, groups: dict[str, list[list[str]]]) -> None:
    with ResultWriter(db, "tls_shared_group", ["run_id", "kind", "group_id", "hostname"],
                      types=["int8", "text", "int4", "text"]) as w:
        for kind, comps in groups.items():
            for gid, members in enumerate(comps, 1):
                for h in members:
                    w.write((run_id, kind, gid, h))


def run_shared(hosts: Hosts, opts: SharedOptions, *, group_map: Optional[dict[str, list[str]]], merge: tuple[int, ...],
               family: int, port: int, concurrency: int) -> dict:
    params = {"hosts": len(hosts), "groups": len(group_map) if group_map else None, "merge": list(merge),
              "family": family, "port": port, **opts.__dict__}
    ctx = open_scan("tls-shared", params, packages=("cryptography",), targets=_plan(hosts, port),
                    concurrency=concurrency)
    counts = {"attempts": 0, "resumed": 0}
    try:
        with _resumption_writer(ctx.db) as w:
            def emit(a: ResumptionAttempt) -> None:
                counts["attempts"] += 1
                counts["resumed"] += a.resumed
                w.write(_resumption_row(ctx.run.id, a))

            async def go() -> SharedProbe:
                targets, failed = await expand_targets(hosts, port, family == 6)
                pick: dict[str, ScanTarget] = {}
                for t in targets:
                    if (":" in t.address) == (family == 6) and t.hostname not in pick:
                        pick[t.hostname] = t
                ok, blocked = _allowed(ctx, list(pick.values()))
                by_host = {t.hostname: t for t in ok}
                counts.update(hosts=len(by_host), blocked=blocked, unresolved=len(failed))
                probe = SharedProbe(opts, emit, concurrency, limiter=ctx.limiter)
                if merge:
                    await asyncio.gather(*(probe.san_of(t) for t in by_host.values()))
                    return probe
                if group_map is None:
                    peers = {h: [b for b in by_host if b != h] for h in by_host}
                else:
                    peers = {h: sorted({b for g in group_map.values() if h in g for b in g if b != h and b in by_host})
                             for h in by_host}
                origins = origins_of_shard(list(by_host), opts.shard)
                try:
                    await asyncio.gather(*(probe.probe_origin(by_host[a], [by_host[b] for b in peers[a]])
                                           for a in origins))
                    await asyncio.gather(*(probe.san_of(t) for t in by_host.values()))
                finally:
                    probe.close()
                return probe
            probe = asyncio.run(go())
        if merge or opts.shard[1] == 1:
            runs = merge or (ctx.run.id,)
            groups = groups_from_db(ctx.db, runs, probe.sans.keys() | set(_hosts_of(hosts)), probe.sans)
            _store_groups(ctx.db, ctx.run.id, groups)
            for kind, comps in groups.items():
                counts[f"{kind}_groups"] = sum(1 for c in comps if len(c) > 1)
                counts[f"{kind}_largest"] = len(comps[0]) if comps else 0
    except BaseException:
        ctx.run.finish("failed", counts)
        raise
    ctx.run.finish("finished", counts)
    return {"run_id": ctx.run.id, **counts}


def _hosts_of(hosts: Hosts) -> list[str]:
    return [h for _, h, _ in hosts]
