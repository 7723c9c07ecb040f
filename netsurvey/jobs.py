"""Scheduled, sharded, resumable scans on procrastinate (a PostgreSQL task queue) in the
same database.

- ``netsurvey scan ... --shards N`` (intercepted in ``cli.main``) records a 'queued'
  ``scan_run`` with the command's argv and defers N ``scan_shard`` tasks.
- ``netsurvey worker`` (any number, any machine with the same DSN) runs them: each task
  runs the scan command in a child process with ``NETSURVEY_SHARD=i/N`` and
  ``NETSURVEY_RUN_ID`` set (see ``shard.py`` for what changes), forked from a
  multiprocessing forkserver that imported the command line once (no Python start-up per
  shard). The child dies with the worker (a pidfd watch); a worker killed with SIGKILL stops heart-beating, and the
  other workers retry its stalled jobs. Retries are idempotent: a shard commits its rows
  and its ``job_shard`` row in one transaction.
- ``netsurvey scan ... --procs N`` (also intercepted) runs the N shards at once on this
  machine, without the queue (:func:`run_local`): the same shard processes, so the same
  exactly-once commits, and the way to use every core for one scan.
- ``config/schedule.toml`` declares campaigns: cron entries become procrastinate periodic
  tasks; "rounds x interval" entries are deferred with ``schedule start NAME``.
"""
from __future__ import annotations

import asyncio
import ctypes
import datetime as dt
import json
import logging
import os
import re
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import procrastinate
from pydantic import BaseModel, ConfigDict, model_validator

from .db import Database
from .errors import UsageError

QUEUE = "scans"
TASK_NAME = "netsurvey.scan_shard"
SCHEDULE_TASK = "netsurvey.scheduled"
#: Scheduled (cron) tasks have their own queue: only workers that carry the schedule (and
#: so know those tasks) take them; a worker without one would fail them (TaskNotFound).
SCHEDULE_QUEUE = "scans-schedule"
DEFAULT_SCHEDULE = Path("config/schedule.toml")
logger = logging.getLogger("netsurvey.jobs")


# -- schedule config ------------------------------------------------------------------
_DURATION = re.compile(r"^(\d+(?:\.\d+)?)(s|m|h|d)?$")


def parse_duration(text: str) -> float:
    """'45m' / '10s' / '2h' / '1d' / '30' (seconds) -> seconds."""
    m = _DURATION.match(str(text).strip())
    if not m:
        raise ValueError(f"{text!r} is not a duration like 30s, 45m, 2h, 1d")
    return float(m.group(1)) * {"s": 1, None: 1, "m": 60, "h": 3600, "d": 86400}[m.group(2)]


class ScheduleEntry(BaseModel):
    """A recurring scan: either ``cron`` (5-field cron, UTC) or ``rounds`` x ``interval``."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    name: str
    command: list[str]            # argv after 'netsurvey', e.g. ["scan", "tls", "--list", "tranco"]
    cron: Optional[str] = None
    rounds: Optional[int] = None
    interval: Optional[str] = None
    shards: int = 1

    @model_validator(mode="after")
    def _v(self):
        if (self.cron is None) == (self.rounds is None):
            raise ValueError("give either cron or rounds + interval")
        if self.rounds is not None:
            if self.interval is None or self.rounds < 1:
                raise ValueError("rounds needs a positive count and an interval")
            parse_duration(self.interval)
        if self.cron is not None:
            from croniter import croniter

            if not croniter.is_valid(self.cron):
                raise ValueError(f"invalid cron expression {self.cron!r}")
        if not self.command or self.command[0] != "scan":
            raise ValueError("command must be a 'scan ...' argv")
        return self


class ScheduleFile(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    schedule: list[ScheduleEntry] = []


def load_schedule(path: Optional[Path] = None) -> list[ScheduleEntry]:
    from .config import load_toml_model

    path = Path(path or os.environ.get("NETSURVEY_SCHEDULE", DEFAULT_SCHEDULE))
    if not path.exists():
        return []
    return load_toml_model(path, ScheduleFile, "schedule file").schedule


# -- the procrastinate app ------------------------------------------------------------
def _pdeathsig() -> None:
    """In the child: die with SIGKILL when the worker process dies."""
    libc = ctypes.CDLL("libc.so.6", use_errno=True)
    libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


_shard_ctx = None


def _shard_context():
    """A multiprocessing 'forkserver' that has imported the whole command line once: each
    shard is forked from it (a fresh, single-threaded process) instead of starting Python
    and importing netsurvey again, ~0.5 s less per shard. Start-up is then a few ms."""
    global _shard_ctx
    if _shard_ctx is None:
        import multiprocessing as mp

        ctx = mp.get_context("forkserver")
        ctx.set_forkserver_preload(["netsurvey.cli"])
        _shard_ctx = ctx
    return _shard_ctx


def _die_with(pid: int) -> None:
    """Kill this process (SIGKILL) as soon as process ``pid`` exits: a thread waits on a
    pidfd. (PR_SET_PDEATHSIG would watch the forkserver, which outlives a killed worker
    while its children run.)"""
    import select
    import threading

    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        os._exit(137)

    def watch() -> None:
        select.select([fd], [], [])
        os.kill(os.getpid(), signal.SIGKILL)

    threading.Thread(target=watch, name="die-with-worker", daemon=True).start()


def _shard_main(argv: list[str], env: dict[str, str], worker_pid: int) -> None:
    """In the forked shard process: the worker's environment plus the shard's, then the
    command line as if run as ``netsurvey ARGV``. Dies with the worker (SIGKILL included)."""
    os.environ.clear()
    os.environ.update(env)
    _die_with(worker_pid)
    sys.argv = ["netsurvey", *argv]
    from netsurvey.clictx import state
    from netsurvey.cli import main

    state.forget()  # forked from a running command: read DSN and config anew
    main()


def _shard_env(dsn: str, run_id: int, shard: int, shards: int, attempt: int) -> dict[str, str]:
    return dict(os.environ, NETSURVEY_DSN=dsn, NETSURVEY_SHARD=f"{shard}/{shards}", NETSURVEY_RUN_ID=str(run_id),
                NETSURVEY_SHARD_ATTEMPT=str(attempt))


def run_shard_process(dsn: str, run_id: int, shard: int, shards: int, argv: list[str], attempt: int = 1) -> int:
    """Run one shard of ``argv`` to completion; returns its exit code. Forked from the
    forkserver unless ``NETSURVEY_SHARD_SUBPROCESS=1`` (then a fresh ``python -m
    netsurvey.cli`` process, as a fallback)."""
    env = _shard_env(dsn, run_id, shard, shards, attempt)
    if os.environ.get("NETSURVEY_SHARD_SUBPROCESS") == "1":
        p = subprocess.run([sys.executable, "-m", "netsurvey.cli", *argv], env=env, preexec_fn=_pdeathsig,
                           stdin=subprocess.DEVNULL)
        return p.returncode
    proc = _shard_context().Process(target=_shard_main, args=(list(argv), env, os.getpid()), name=f"shard-{run_id}-{shard}")
    proc.start()
    proc.join()
    return proc.exitcode if proc.exitcode is not None else 1


def make_app(dsn: str, schedule: list[ScheduleEntry] | None = None) -> procrastinate.App:
    """The procrastinate app on ``dsn`` with the shard task and the schedule's periodic tasks."""
    app = procrastinate.App(connector=procrastinate.PsycopgConnector(conninfo=dsn))

    @app.task(name=TASK_NAME, queue=QUEUE, pass_context=True,
              retry=procrastinate.RetryStrategy(max_attempts=4, wait=1))
    def scan_shard(context, run_id: int, shard: int, shards: int, argv: list[str]) -> None:
        db = Database(dsn)
        with db.connect() as conn:
            row = conn.execute("SELECT status FROM scan_run WHERE id = %s", (run_id,)).fetchone()
            done = conn.execute("SELECT 1 FROM job_shard WHERE run_id = %s AND shard = %s",
                                (run_id, shard)).fetchone()
        if row is None or row[0] == "cancelled" or done:
            return
        attempt = (context.job.attempts or 0) + 1
        rc = run_shard_process(dsn, run_id, shard, shards, argv, attempt)
        if rc != 0:
            raise RuntimeError(f"run {run_id} shard {shard}/{shards}: command exited {rc}")

    for entry in schedule or []:
        if entry.cron is None:
            continue

        def make(entry=entry):
            @app.periodic(cron=entry.cron, periodic_id=entry.name)
            @app.task(name=f"{SCHEDULE_TASK}.{entry.name}", queue=SCHEDULE_QUEUE, pass_context=True)
            def scheduled(context, timestamp: int) -> None:
                start_command(Database(dsn), entry.command, entry.shards, app=context.app, note=entry.name)
        make()
    return app


def ensure_queue_schema(db: Database, app: procrastinate.App) -> None:
    """Apply procrastinate's schema once (guarded by an advisory lock)."""
    with db.connect() as conn:
        conn.execute("SELECT pg_advisory_xact_lock(727275)")
        if conn.execute("SELECT to_regclass('procrastinate_jobs') IS NULL").fetchone()[0]:
            from procrastinate.schema import SchemaManager

            conn.execute(SchemaManager.get_schema())
        conn.commit()


def _check_shardable(argv: list[str], shards: int, flag: str) -> None:
    if shards < 1:
        raise UsageError(f"{flag} must be at least 1")
    if not argv or argv[0] != "scan" or len(argv) < 2:
        raise UsageError("only 'scan ...' commands can be sharded")


def _insert_queued_run(db: Database, argv: list[str], shards: int, note: str | None) -> int:
    with db.connect() as conn:
        return conn.execute(
            "INSERT INTO scan_run (kind, parameters, status, shards, command) VALUES (%s, %s, 'queued', %s, %s)"
            " RETURNING id",
            (argv[1], json.dumps({"argv": argv, "schedule": note}), shards, json.dumps(argv))).fetchone()[0]


#: Attempts per shard of a local run (again only when the shard committed nothing).
LOCAL_ATTEMPTS = 2


@dataclass(frozen=True)
class LocalRun:
    """How a ``--procs`` run ended: its ``status`` ('finished' or 'failed'), ``counts``
    summed over the shards, and the exit code of each shard's last attempt."""

    run_id: int
    status: str
    counts: dict
    exit_codes: dict[int, int]


def run_local(db: Database, argv: list[str], procs: int, *, on_shard=None) -> LocalRun:
    """Run ``argv`` (a 'scan ...' command) as ``procs`` shards at once on this machine, each in
    its own process (one per core: a scanner's engine is one asyncio loop), into one run.
    Shards are forked from this process, which has the command line imported already (no
    start-up per shard); each dies with it. A shard that exits non-zero, other than 2 (bad
    input), is run once more if it committed nothing; ``on_shard(shard, rc)`` is called as
    each shard ends. The run's status becomes 'finished' when every shard committed as
    finished, else 'failed'."""
    import multiprocessing as mp
    from multiprocessing.connection import wait

    _check_shardable(argv, procs, "--procs")
    db.migrate()
    run_id = _insert_queued_run(db, argv, procs, "local")
    ctx = mp.get_context("fork")

    def start(shard: int, attempt: int):
        env = _shard_env(db.dsn, run_id, shard, procs, attempt)
        p = ctx.Process(target=_shard_main, args=(list(argv), env, os.getpid()), name=f"shard-{run_id}-{shard}")
        p.start()
        return p

    def committed(shard: int) -> bool:
        with db.connect() as conn:
            return conn.execute("SELECT 1 FROM job_shard WHERE run_id = %s AND shard = %s",
                                (run_id, shard)).fetchone() is not None

    running = {start(i, 1): (i, 1) for i in range(procs)}
    rcs: dict[int, int] = {}
    try:
        while running:
            for sentinel in wait([p.sentinel for p in running]):
                p = next(q for q in running if q.sentinel == sentinel)
                shard, attempt = running.pop(p)
                p.join()
                rc = p.exitcode if p.exitcode is not None else 1
                # again only if the shard left nothing: a scan that failed inside commits its
                # shard as 'failed' (and the run becomes 'failed'), and a retry would only
                # find its job_shard row and exit 0
                if rc not in (0, 2) and attempt < LOCAL_ATTEMPTS and not committed(shard):
                    running[start(shard, attempt + 1)] = (shard, attempt + 1)
                    continue
                rcs[shard] = rc
                if on_shard is not None:
                    on_shard(shard, rc)
    finally:
        for p in running:  # interrupted (Ctrl-C, SIGTERM): the shards go with us
            p.kill()
            p.join()
        with db.connect() as conn:  # shards that never committed: the run cannot finish by itself
            conn.execute("UPDATE scan_run SET status = 'failed', finished_at = clock_timestamp() WHERE id = %s "
                         "AND status IN ('queued', 'running')", (run_id,))
            status, counts = conn.execute("SELECT status, counts FROM scan_run WHERE id = %s",
                                          (run_id,)).fetchone()
    return LocalRun(run_id, status, counts or {}, dict(sorted(rcs.items())))


def start_command(db: Database, argv: list[str], shards: int, *, app: procrastinate.App | None = None,
                  note: str | None = None, schedule_at: dt.datetime | None = None) -> int:
    """Record a queued run for ``argv`` (a 'scan ...' command) and defer its shards."""
    _check_shardable(argv, shards, "--shards")
    db.migrate()
    own = app is None
    app = app or make_app(db.dsn)
    ensure_queue_schema(db, app)
    run_id = _insert_queued_run(db, argv, shards, note)
    if own:
        app.open()
    try:
        task = app.tasks[TASK_NAME]
        for i in range(shards):
            task.configure(queueing_lock=f"run{run_id}-shard{i}", schedule_at=schedule_at).defer(
                run_id=run_id, shard=i, shards=shards, argv=argv)
    finally:
        if own:
            app.close()
    return run_id


async def _retry_stalled(app: procrastinate.App, every: float, heartbeat_timeout: float) -> None:
    """Retry jobs whose worker stopped heart-beating (e.g. killed with SIGKILL)."""
    while True:
        await asyncio.sleep(every)
        try:
            for job in await app.job_manager.get_stalled_jobs(seconds_since_heartbeat=heartbeat_timeout):
                logger.warning("retrying stalled job %s", job.id)
                await app.job_manager.retry_job(job)
        except Exception as exc:  # keep the worker alive; the next round tries again
            logger.warning("stalled-job check failed: %s", exc)


async def run_worker(db: Database, concurrency: int, *, wait: bool = True, heartbeat: float = 5.0,
                     stalled_after: float = 15.0, schedule: list[ScheduleEntry] | None = None) -> None:
    app = make_app(db.dsn, schedule)
    db.migrate()
    ensure_queue_schema(db, app)
    async with app.open_async():
        checker = asyncio.create_task(_retry_stalled(app, heartbeat, stalled_after))
        try:
            queues = [QUEUE, SCHEDULE_QUEUE] if any(e.cron for e in schedule or []) else [QUEUE]
            await app.run_worker_async(queues=queues, concurrency=concurrency, wait=wait,
                                       update_heartbeat_interval=heartbeat, stalled_worker_timeout=stalled_after,
                                       install_signal_handlers=True)
        finally:
            checker.cancel()


def cancel_run(db: Database, run_id: int) -> int:
    """Mark the run cancelled and cancel its shards not yet started; returns jobs cancelled."""
    with db.connect() as conn:
        r = conn.execute("UPDATE scan_run SET status = 'cancelled', finished_at = now() WHERE id = %s "
                         "AND status IN ('queued', 'running') RETURNING id", (run_id,)).fetchone()
        if r is None:
            raise UsageError(f"run {run_id} is not queued or running")
        if conn.execute("SELECT to_regclass('procrastinate_jobs') IS NULL").fetchone()[0]:
            return 0
        n = conn.execute("UPDATE procrastinate_jobs SET status = 'cancelled' WHERE status = 'todo' "
                         "AND task_name = %s AND (args->>'run_id')::bigint = %s", (TASK_NAME, run_id)).rowcount
    return n


def next_due(entry: ScheduleEntry, now: dt.datetime | None = None) -> Optional[dt.datetime]:
    if entry.cron is None:
        return None
    from croniter import croniter

    now = now or dt.datetime.now(dt.timezone.utc)
    return croniter(entry.cron, now).get_next(dt.datetime)


def start_rounds(db: Database, entry: ScheduleEntry) -> list[int]:
    """Defer every round of a 'rounds x interval' entry (round k at now + k * interval)."""
    if entry.rounds is None:
        raise UsageError(f"schedule {entry.name!r} is a cron entry; workers start it on time")
    step = parse_duration(entry.interval)
    now = dt.datetime.now(dt.timezone.utc)
    return [start_command(db, entry.command, entry.shards, note=f"{entry.name} round {k + 1}/{entry.rounds}",
                          schedule_at=now + dt.timedelta(seconds=k * step)) for k in range(entry.rounds)]
