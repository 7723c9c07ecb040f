"""Orchestration of ``scan quic-turnover``: open (or continue) the run, drive the scheduler
(schedule.py), write the per-address summaries (turnover.py), finish the run."""
from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import logging
import time
from typing import Optional

from netsurvey.errors import UsageError
from netsurvey.scanning import ScanStatus, ScanTarget

from .handshake import HandshakeFailed, quic_connect, settle_gc
from .records import TurnoverOptions
from .schedule import TurnoverScheduler, prior_state
from .store import Presented, QuicStore
from .turnover import host_summaries, summarize


@contextlib.contextmanager
def _conn(db):
    """A connection that sees this process's rows: in a shard, the shard's own (its rows are
    not committed before the run finishes), else a new one."""
    from netsurvey import shard

    if shard.current() is not None:
        yield shard.connection(db.dsn)
    else:
        with db.connect() as conn:
            yield conn


def params(targets: list[ScanTarget], opts: TurnoverOptions, *, slots: int, hosts_in_flight: int,
           concurrency: int, query: dict) -> dict:
    """scan_run.parameters: everything --resume needs (the resolved targets too)."""
    return {**query, "every_s": opts.every_s, "for_s": opts.duration_s, "timeout_s": opts.connect.timeout_s,
            "slots": slots, "hosts_in_flight": hosts_in_flight, "concurrency": concurrency,
            "targets": [[t.rank, t.hostname, t.address, t.port] for t in targets]}


def run_turnover(ctx, targets: list[ScanTarget], opts: TurnoverOptions, *, slots: int, hosts_in_flight: int,
                 concurrency: int, resumed_from: Optional[int] = None) -> dict:
    """Probe ``targets`` (resolved; None address = resolution failed) in run ``ctx.run``."""
    from .scanner import failure_status

    logging.getLogger("quic").setLevel(logging.CRITICAL)  # aioquic logs failed handshakes itself
    settle_gc()
    store = QuicStore(ctx.db, ctx.run.id)
    counts: dict = ctx.counts   # recorded by the run path however the run ends
    prior: dict
    prior, lost = {}, 0
    if resumed_from is not None:
        with _conn(ctx.db) as conn:
            prior, lost = prior_state(conn, resumed_from, time.time())
            last = conn.execute("SELECT max(conn_id) FROM quic_connection WHERE run_id = %s",
                                (resumed_from,)).fetchone()[0]
        store.continue_after(last or 0)
        counts["lost_on_restart"] = lost
        counts["restored_on_restart"] = sum(len(p.restored) for p in prior.values())
    ok: list[ScanTarget] = []
    for t in targets:
        if t.address is None:
            counts["resolution-failed"] = counts.get("resolution-failed", 0) + 1
        elif not ctx.policy.allowed(t.address):
            counts["blocked"] = counts.get("blocked", 0) + 1
        else:
            ok.append(t)
    limiter = ctx.limiter

    async def connect(t: ScanTarget, token=None, ticket=None):
        await limiter.acquire(t.address)
        try:
            h, raw = await quic_connect(t.hostname, t.address, t.port, opts.connect, token=token, ticket=ticket)  # type: ignore[arg-type]  # resolved
            return h, raw, None
        except HandshakeFailed as exc:
            return exc.partial, [], exc

    def record(t: ScanTarget, cid, purpose, rnd, err, h, presented) -> None:
        status = ScanStatus.SUCCESS if err is None else failure_status(err)
        counts[status.value] = counts.get(status.value, 0) + 1
        store.write_connection(cid, rank=t.rank, purpose=purpose, round_no=rnd, status=status.value,
                               error=str(err) if err else None, h=h,
                               presented=Presented(*presented) if presented else Presented())

    def log(t, kind, rnd, k, event, due_w, detail, conn_id, state) -> None:
        store.write_event(t.hostname, t.address, t.port, kind, rnd, k, event, due_w, detail, conn_id, state)

    pdp = getattr(limiter, "per_destination", None)
    sched = TurnoverScheduler(opts, connect=connect, record=record, next_conn_id=store.next_conn_id, log=log,
                              on_host_done=lambda t: None, slots=slots, hosts_in_flight=hosts_in_flight,
                              concurrency=concurrency, per_destination=pdp, tick=store.flush)
    stats = counts   # the scheduler's figures, kept also when the run fails
    closed = False
    try:
        try:
            asyncio.run(sched.run(ok, prior))
        finally:
            stats.update(slots=sched.slots, search_rounds_max=sched.search.rounds_max,
                         states_peak=sched.search.peak_held, states_peak_per_target=sched.search.peak_held_target)
        store.flush()
        with _conn(ctx.db) as conn:
            for (rank, hostname, address, _port), h in host_summaries(conn, ctx.run.id, opts.every_s, ok):
                store.write_turnover_host((rank, hostname, ipaddress.ip_address(address),
                                           *summarize(h, opts.every_s)))
            store.flush()
            _set_key_prefixes(conn, ctx.run.id)
            # the stored states' secrets are not kept past the run
            conn.execute("UPDATE quic_turnover_event SET state = NULL WHERE run_id = %s AND state IS NOT NULL",
                         (ctx.run.id,))
            if resumed_from is not None:   # the run's totals, not only this process's
                for st, n in conn.execute("SELECT status, count(*) FROM quic_connection WHERE run_id = %s "
                                          "GROUP BY 1", (ctx.run.id,)).fetchall():
                    counts[st] = n
        store.close()
        closed = True
    finally:
        if not closed:   # failed or stopped: what was written so far is kept
            with contextlib.suppress(Exception):
                store.close()
    return {"run_id": ctx.run.id, "counts": counts}


def _set_key_prefixes(conn, run_id: int) -> None:
    """Fill quic_token/quic_ticket.key_prefix from the per-host prefix lengths."""
    for table, col, plen in (("quic_token", "token", "token_key_prefix_len"),
                             ("quic_ticket", "ticket", "ticket_key_prefix_len")):
        conn.execute(
            f"""UPDATE {table} x SET key_prefix = substring(x.{col} from 1 for h.{plen})
                FROM quic_turnover_host h
                WHERE x.run_id = %s AND h.run_id = x.run_id AND h.address = x.address
                  AND h.hostname IS NOT DISTINCT FROM x.hostname AND h.{plen} > 0""",
            (run_id,))


def resume_turnover(run_id: int) -> tuple:
    """The context, targets and options to continue an interrupted quic-turnover run."""
    from netsurvey.clictx import migrated_db, state as st

    db = migrated_db()
    with db.connect() as conn:
        row = conn.execute("SELECT kind, parameters, status FROM scan_run WHERE id=%s", (run_id,)).fetchone()
    if row is None or row[0] != "quic-turnover" or "targets" not in (row[1] or {}):
        raise UsageError(f"--resume: no resumable quic-turnover run with id {run_id}")
    if row[2] == "finished":
        raise UsageError(f"--resume: run {run_id} is already finished")
    p = row[1]
    targets = [ScanTarget(h, a, port, rank) for rank, h, a, port in p["targets"]]
    return p, targets, lambda: _reopen(db, run_id, st.config)


def _reopen(db, run_id: int, cfg):
    from netsurvey.etiquette import TargetPolicy, limiter_from_config
    from netsurvey.runs import reopen_run
    from netsurvey.scanning import ScanContext

    return ScanContext(db=db, run=reopen_run(db, run_id), config=cfg, policy=TargetPolicy.from_config(cfg.etiquette),
                       limiter=limiter_from_config(cfg.etiquette))
