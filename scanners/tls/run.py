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
from netsurvey.scanning import ResolvedOnce, ResolvingStream, ScanTarget, run_scan
from netsurvey.writer import ResultWriter

from .lifetime import LifetimeOptions, LifetimeProbe
from .results import ResumptionAttempt, TlsOptions
from .shared import SharedOptions, SharedProbe, groups_from_db, origins_of_shard
from .survey import TlsScanner, expand_targets, handshake_rows, handshake_writer

Hosts = list[tuple[Optional[int], str, Optional[str]]]

RESUMPTION_COLUMNS = ["run_id", "mechanism", "version", "origin_host", "origin_address", "host", "address",
                      "age_s", "resumed", "status", "error", "chain_index", "key_name", "attempted_at"]


def _resumption_writer(db) -> ResultWriter:
    return ResultWriter(db, "tls_resumption", RESUMPTION_COLUMNS,
                        types="catalog", batch_rows=2000)


def _resumption_row(run_id: int, a: ResumptionAttempt) -> tuple:
    return (run_id, a.mechanism, a.version, a.origin_host, ipaddress.ip_address(a.origin_address), a.host,
            ipaddress.ip_address(a.address), a.age, a.resumed, a.status, a.error, a.chain_index, a.key_name,
            dt.datetime.now(dt.timezone.utc))


def run_survey(targets: ResolvingStream, opts: TlsOptions, *, concurrency: int = 100,
               list_name: Optional[str] = None) -> dict:
    """One survey round over ``targets`` (:meth:`netsurvey.selection.TargetSelection.resolving`: the names are read,
    resolved and probed batch by batch, issue 26); returns a summary (run id, counts per status)."""
    params = {"list": list_name, "hosts": len(targets), **{k: v for k, v in opts.__dict__.items()}}
    ctx = open_scan(params, packages=("cryptography",), targets=targets, concurrency=concurrency)
    scanner = TlsScanner()
    scanner.init(opts, ctx)
    failed = {"n": 0}
    try:
        with handshake_writer(ctx.db) as w:
            def on_failed(o) -> None:   # a name without address, found while the scan reads the stream
                failed["n"] += 1
                w.write_many(handshake_rows(ctx.run.id, o, opts.versions))

            targets.on_failed = on_failed
            counts = asyncio.run(run_scan(scanner, targets, lambda o: w.write_many(
                handshake_rows(ctx.run.id, o, opts.versions)), concurrency=concurrency, description="tls handshakes"))
            if failed["n"]:
                counts["resolution-failed"] = counts.get("resolution-failed", 0) + failed["n"]
    finally:
        scanner.close()
    ctx.counts.update(counts)
    return {"run_id": ctx.run.id, **counts}


def _plan(hosts: Hosts, port: int, ipv6: bool) -> ResolvedOnce:
    """The hosts (with their fixed address, if given) and how tls-lifetime and tls-zgrab
    resolve them (:func:`expand_targets`), for the dry-run plan."""
    return ResolvedOnce([ScanTarget(h, a, port, r) for r, h, a in hosts],
                        lambda: asyncio.run(expand_targets(hosts, port, ipv6)))


def _pick_family(targets: list[ScanTarget], family: int) -> list[ScanTarget]:
    """tls-shared's targets: each hostname's first address of ``family`` (4 or 6)."""
    pick: dict[str, ScanTarget] = {}
    for t in targets:
        if (":" in t.address) == (family == 6) and t.hostname not in pick:  # type: ignore[operator]  # resolved
            pick[t.hostname] = t  # type: ignore[index]  # a name
    return list(pick.values())


def _shared_plan(hosts: Hosts, port: int, family: int) -> ResolvedOnce:
    """tls-shared's hosts and their resolution as the run makes it, for the dry-run plan."""
    def resolve():
        targets, failed = asyncio.run(expand_targets(hosts, port, family == 6))
        return _pick_family(targets, family), failed

    return ResolvedOnce([ScanTarget(h, a, port, r) for r, h, a in hosts], resolve)


def _allowed(ctx, targets: list[ScanTarget]) -> tuple[list[ScanTarget], int]:
    ok = [t for t in targets if ctx.policy.allowed(t.address)]
    return ok, len(targets) - len(ok)


EVENT_COLUMNS = ["run_id", "origin_host", "origin_address", "mechanism", "version", "round", "grid_index",
                 "event", "due_at", "at", "detail", "session"]


def _event_writer(db) -> ResultWriter:
    return ResultWriter(db, "tls_lifetime_event", EVENT_COLUMNS,
                        types="catalog", batch_rows=2000)


def lifetime_params(hosts: Hosts, opts: LifetimeOptions, *, port: int, ipv6: bool, concurrency: int,
                    slots: int, hosts_in_flight: int) -> dict:
    """scan_run.parameters of a tls-lifetime run: everything --resume needs (the targets too)."""
    return {"hosts": len(hosts), "port": port, "ipv6": ipv6, "concurrency": concurrency, "slots": slots,
            "hosts_in_flight": hosts_in_flight, "targets": [list(h) for h in hosts], **opts.__dict__}


def run_lifetime(hosts: Hosts, opts: LifetimeOptions, *, port: int, ipv6: bool, concurrency: int,
                 slots: int = 0, hosts_in_flight: int = 1000, ctx=None, resumed_from: Optional[int] = None) -> dict:
    """The lifetime probe. Default mode: the bounded-memory scheduler (schedule.py); --chain:
    one session per chain, all targets at once (as before). ``ctx`` given = continue that
    run (--resume)."""
    from .schedule import LifetimeScheduler, default_slots, prior_state

    n_ages = len(opts.ages)
    slots = slots or default_slots(n_ages)
    if ctx is None:
        params = lifetime_params(hosts, opts, port=port, ipv6=ipv6, concurrency=concurrency, slots=slots,
                                 hosts_in_flight=hosts_in_flight)
        ctx = open_scan(params, packages=("cryptography",), targets=_plan(hosts, port, ipv6),
                        concurrency=concurrency)
    counts = ctx.counts   # recorded by the run path however the run ends
    counts.update(attempts=0, resumed=0)
    prior: dict
    restored: list
    prior, lost, restored = {}, 0, []
    if resumed_from is not None:
        with ctx.db.connect() as conn:
            prior, lost, restored = prior_state(conn, resumed_from)
        counts["lost_on_restart"] = lost
        counts["restored_on_restart"] = len(restored)
    stats = counts   # the scheduler's figures, kept also when the run fails
    with _resumption_writer(ctx.db) as w, _event_writer(ctx.db) as ew:
        def emit(a: ResumptionAttempt) -> None:
            counts["attempts"] += 1
            counts["resumed"] += a.resumed
            w.write(_resumption_row(ctx.run.id, a))

        def log(t, mechanism, version, rnd, k, event, due_wall, detail, session) -> None:
            now = dt.datetime.now(dt.timezone.utc)
            due = dt.datetime.fromtimestamp(due_wall, dt.timezone.utc) if due_wall is not None else None
            ew.write((ctx.run.id, t.hostname, ipaddress.ip_address(t.address), mechanism, version, rnd, k, event,
                      due, now, detail, session))

        def tick() -> None:
            ew.flush()
            w.flush()

        async def go():
            targets, failed = await expand_targets(hosts, port, ipv6)
            targets, blocked = _allowed(ctx, targets)
            counts.update(targets=len(targets), blocked=blocked, unresolved=len(failed))
            probe = LifetimeProbe(opts, emit, concurrency, limiter=ctx.limiter)
            try:
                if opts.chain:
                    await asyncio.gather(*(probe.probe(t) for t in targets))
                    return
                sched = LifetimeScheduler(probe, slots=slots, hosts_in_flight=hosts_in_flight, log=log,
                                          tick=tick, concurrency=concurrency)
                try:
                    await sched.run(targets, prior, restored)
                finally:
                    stats.update(slots=slots, rounds_max=sched.search.rounds_max,
                                 sessions_peak=sched.search.peak_held,
                                 sessions_peak_per_target=sched.search.peak_held_target)
            finally:
                probe.close()
        asyncio.run(go())
    if resumed_from is not None:   # the run's totals, not only this process's
        with ctx.db.connect() as conn:
            counts["attempts"], counts["resumed"] = conn.execute(
                "SELECT count(*), count(*) FILTER (WHERE resumed) FROM tls_resumption WHERE run_id = %s",
                (ctx.run.id,)).fetchone()
    with ctx.db.connect() as conn:   # the stored sessions' secrets are not kept past the run
        conn.execute("UPDATE tls_lifetime_event SET session = NULL WHERE run_id = %s AND session IS NOT NULL",
                     (ctx.run.id,))
    return {"run_id": ctx.run.id, **counts}


def resume_lifetime(run_id: int) -> dict:
    """Continue an interrupted tls-lifetime run (``--resume RUN``) with its own parameters."""
    from netsurvey.clictx import migrated_db, state as st
    from netsurvey.etiquette import RateLimiter, TargetPolicy
    from netsurvey.runctx import is_dry_run
    from netsurvey.runs import reopen_run
    from netsurvey.scanning import ScanContext

    db = migrated_db()
    with db.connect() as conn:
        row = conn.execute("SELECT kind, parameters, status FROM scan_run WHERE id=%s", (run_id,)).fetchone()
    if row is None or row[0] != "tls-lifetime" or "targets" not in (row[1] or {}):
        raise UsageError(f"--resume: no resumable tls-lifetime run with id {run_id}")
    if row[2] == "finished":
        raise UsageError(f"--resume: run {run_id} is already finished")
    p = row[1]
    if p.get("chain"):
        raise UsageError("--resume: --chain runs cannot be resumed")
    hosts = [tuple(h) for h in p["targets"]]
    keys = ("max_age", "step", "mechanisms", "versions", "chain", "stop_on_refusal", "timeout", "verify")
    opts = LifetimeOptions(**{k: (tuple(p[k]) if isinstance(p[k], list) else p[k]) for k in keys})  # type: ignore[arg-type]  # as recorded
    if is_dry_run():   # records a cancelled run with the plan, contacts nothing, ends here
        open_scan({"resume": run_id}, targets=_plan(hosts, p["port"], p["ipv6"]))
    cfg = st.config
    ctx = ScanContext(db=db, run=reopen_run(db, run_id), config=cfg, policy=TargetPolicy.from_config(cfg.etiquette),
                      limiter=RateLimiter(cfg.etiquette.rate_pps, cfg.etiquette.per_destination_pps))
    return run_lifetime(hosts, opts, port=p["port"], ipv6=p["ipv6"], concurrency=p["concurrency"],
                        slots=p["slots"], hosts_in_flight=p["hosts_in_flight"], ctx=ctx, resumed_from=run_id)


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
    with ResultWriter(db, "tls_shared_group", ["run_id", "kind", "group_id", "hostname"], types="catalog") as w:
        for kind, comps in groups.items():
            for gid, members in enumerate(comps, 1):
                for h in members:
                    w.write((run_id, kind, gid, h))


def run_shared(hosts: Hosts, opts: SharedOptions, *, group_map: Optional[dict[str, list[str]]], merge: tuple[int, ...],
               family: int, port: int, concurrency: int) -> dict:
    """The shared-state probe. In a shard of the run path (``--shards`` / ``--procs``) this
    process probes its share of the origins (:func:`origins_of_shard`), each against every
    host, and computes no groups: they need every shard's attempts and nothing runs after
    the last shard; ``--merge RUN`` computes them (from that run's attempts) afterwards."""
    from netsurvey import shard

    spec = shard.current()
    part = (spec.index, spec.count) if spec is not None else (0, 1)
    if merge and spec is not None:
        raise UsageError("--merge computes groups from finished runs: run it without --shards/--procs")
    if spec is not None:
        shard.mark_filtered()   # this shard's share is its origins (the hosts are every shard's)
    params = {"hosts": len(hosts), "groups": len(group_map) if group_map else None, "merge": list(merge),
              "family": family, "port": port, **opts.__dict__}
    ctx = open_scan(params, packages=("cryptography",), targets=_shared_plan(hosts, port, family),
                    concurrency=concurrency)
    counts = ctx.counts   # recorded by the run path however the run ends
    counts.update(attempts=0, resumed=0)
    with _resumption_writer(ctx.db) as w:
        def emit(a: ResumptionAttempt) -> None:
            counts["attempts"] += 1
            counts["resumed"] += a.resumed
            w.write(_resumption_row(ctx.run.id, a))

        async def go() -> SharedProbe:
            targets, failed = await expand_targets(hosts, port, family == 6)
            ok, blocked = _allowed(ctx, _pick_family(targets, family))
            by_host: dict[str, ScanTarget] = {t.hostname: t for t in ok}  # type: ignore[misc]  # names
            if part[0] == 0:   # every shard sees every host: counted once (the run's counts are the shards' sums)
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
            origins = origins_of_shard(list(by_host), part)
            counts["origins"] = len(origins)
            try:
                await asyncio.gather(*(probe.probe_origin(by_host[a], [by_host[b] for b in peers[a]])
                                       for a in origins))
                if spec is None:   # the certificates' SANs, for the groups computed below
                    await asyncio.gather(*(probe.san_of(t) for t in by_host.values()))
            finally:
                probe.close()
            return probe
        probe = asyncio.run(go())
    if spec is None:
        runs = merge or (ctx.run.id,)
        groups = groups_from_db(ctx.db, runs, probe.sans.keys() | set(_hosts_of(hosts)), probe.sans)
        _store_groups(ctx.db, ctx.run.id, groups)
        for kind, comps in groups.items():
            counts[f"{kind}_groups"] = sum(1 for c in comps if len(c) > 1)
            counts[f"{kind}_largest"] = len(comps[0]) if comps else 0
    return {"run_id": ctx.run.id, **counts}


def _hosts_of(hosts: Hosts) -> list[str]:
    return [h for _, h, _ in hosts]
