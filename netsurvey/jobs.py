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
  tasks; a "rounds x interval" entry becomes ONE run with rounds on ``schedule start
  NAME`` (``campaign.py``: each round's shards deferred to its due time, exactly once per
  run, round and shard).
"""
from __future__ import annotations

import asyncio
import ctypes
import datetime as dt
import json
import logging
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Optional

import procrastinate
from pydantic import BaseModel, ConfigDict, model_validator

from .db import Database
from .errors import UsageError

if TYPE_CHECKING:  # annotations only: runctx is imported where it is used
    from .runctx import RunSpec

QUEUE = "scans"
TASK_NAME = "netsurvey.scan_shard"
SCHEDULE_TASK = "netsurvey.scheduled"
#: Scheduled (cron) tasks have their own queue: only workers that carry the schedule (and
#: so know those tasks) take them; a worker without one would fail them (TaskNotFound).
SCHEDULE_QUEUE = "scans-schedule"
DEFAULT_SCHEDULE = Path("config/schedule.toml")
logger = logging.getLogger("netsurvey.jobs")


# -- schedule config ------------------------------------------------------------------


from .durations import parse_duration_s as parse_duration  # noqa: E402 - the one duration rule


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
        from .measure import MAX_SHARDS

        if not 1 <= self.shards <= MAX_SHARDS:   # as --shards; cron entries are queued by workers
            raise ValueError(f"shards must be between 1 and {MAX_SHARDS}")
        return self


class ScheduleFile(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    schedule: list[ScheduleEntry] = []


def load_schedule(path: Optional[Path] = None) -> list[ScheduleEntry]:
    from .config import load_toml_model

    path = Path(path or os.environ.get("NETSURVEY_SCHEDULE", DEFAULT_SCHEDULE))  # type: ignore[arg-type]  # falls back to DEFAULT_SCHEDULE: never None
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


def _shard_main(spec_json: str, shard: tuple[int, int, int, int], env: dict[str, str], worker_pid: int,
                config_path: Optional[str]) -> None:
    """In the forked shard process: the worker's environment (the DSN travels there, never
    on a command line), then the measurement of ``spec_json`` run as shard ``shard``
    (index, count, run id, attempt) under the worker's config. Dies with the worker
    (SIGKILL included). Exit codes as the command line's: 2 bad input, 1 failure."""
    os.environ.clear()
    os.environ.update(env)
    _die_with(worker_pid)
    sys.exit(_run_shard_here(spec_json, shard, config_path))


def _run_shard_here(spec_json: str, shard: tuple, config_path: Optional[str]) -> int:
    from rich.console import Console

    from netsurvey.clictx import state
    from netsurvey.errors import MigrationError
    from netsurvey.measure import load_registry, run_spec
    from netsurvey.runctx import RunSpec, ShardSpec
    from netsurvey.shard import ShardConnectionLost

    load_registry()  # forked from the command line it is there already; a fresh interpreter loads it
    state.forget()  # forked from a running command: read DSN and config anew
    state.dsn = os.environ.get("NETSURVEY_DSN")
    state.config_path = Path(config_path) if config_path else None
    try:
        run_spec(RunSpec.from_json(spec_json), ShardSpec(*shard))
    except (UsageError, MigrationError) as exc:
        Console(stderr=True).print(f"netsurvey: error: {exc}", highlight=False, markup=False, soft_wrap=True)
        return 2 if isinstance(exc, UsageError) else 1
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except ShardConnectionLost as exc:  # database restart: exit 1, the job is retried whole
        Console(stderr=True).print(f"netsurvey: shard {shard[0]} of run {shard[2]}: {exc}", highlight=False,
                                   markup=False, soft_wrap=True)
        return 1
    return 0


def shard_entry() -> None:
    """``python -c 'from netsurvey.jobs import shard_entry; shard_entry()'``: the
    subprocess fallback of a shard; its spec comes in NETSURVEY_SHARD_SPEC (JSON)."""
    d = json.loads(os.environ.pop("NETSURVEY_SHARD_SPEC"))
    sys.exit(_run_shard_here(d["spec"], tuple(d["shard"]), d["config"]))


def _shard_env(dsn: str) -> dict[str, str]:
    return dict(os.environ, NETSURVEY_DSN=dsn)


def _config_for_shards(spec_config: Optional[str]) -> Optional[str]:
    """The worker's own --config (or NETSURVEY_CONFIG) governs its shards: the operator's
    block and opt-out lists where the packets leave. Without one, the submitter's file if
    it is readable here; else the default lookup."""
    from netsurvey.clictx import state

    if state.config_path is not None:
        return str(Path(state.config_path).resolve())
    if spec_config and Path(spec_config).is_file():
        return spec_config
    return None


def run_shard_process(dsn: str, run_id: int, shard: int, shards: int, spec: dict, attempt: int = 1,
                      round: int = 0) -> int:
    """Run one shard of ``spec`` to completion; returns its exit code. Forked from the
    forkserver unless ``NETSURVEY_SHARD_SUBPROCESS=1`` (then a fresh Python process, as a
    fallback; the spec goes through its environment)."""
    from netsurvey.runctx import RunSpec

    spec_json = RunSpec.from_json(spec).to_json()
    env = _shard_env(dsn)
    config = _config_for_shards(spec.get("config_path"))
    shard_t = (shard, shards, run_id, attempt, round)
    if os.environ.get("NETSURVEY_SHARD_SUBPROCESS") == "1":
        env["NETSURVEY_SHARD_SPEC"] = json.dumps({"spec": spec_json, "shard": shard_t, "config": config})
        p = subprocess.run([sys.executable, "-c", "from netsurvey.jobs import shard_entry; shard_entry()"],
                           env=env, preexec_fn=_pdeathsig, stdin=subprocess.DEVNULL)
        return p.returncode
    proc = _shard_context().Process(target=_shard_main, args=(spec_json, shard_t, env, os.getpid(), config),
                                    name=f"shard-{run_id}-{shard}")
    proc.start()
    proc.join()
    return proc.exitcode if proc.exitcode is not None else 1


def make_app(dsn: str, schedule: list[ScheduleEntry] | None = None) -> procrastinate.App:
    """The procrastinate app on ``dsn`` with the shard task and the schedule's periodic tasks."""
    app = procrastinate.App(connector=procrastinate.PsycopgConnector(conninfo=dsn))

    @app.task(name=TASK_NAME, queue=QUEUE, pass_context=True,
              retry=procrastinate.RetryStrategy(max_attempts=4, wait=1))
    def scan_shard(context, run_id: int, shard: int, shards: int, spec: dict, round: int = 0) -> None:
        db = Database(dsn)
        with db.connect() as conn:
            row = conn.execute("SELECT status FROM scan_run WHERE id = %s", (run_id,)).fetchone()
            done = conn.execute("SELECT 1 FROM job_shard WHERE run_id = %s AND round = %s AND shard = %s",
                                (run_id, round, shard)).fetchone()
        if row is None or row[0] == "cancelled" or done:
            return
        attempt = (context.job.attempts or 0) + 1
        rc = run_shard_process(dsn, run_id, shard, shards, spec, attempt, round)
        if rc == 2:  # bad input (e.g. the worker's config blocks every target): a retry cannot help
            _record_refused_shard(db, run_id, shard, attempt, round)
            return
        if rc != 0:
            raise RuntimeError(f"run {run_id} shard {shard}/{shards}: command exited {rc}")

    for entry in schedule or []:
        if entry.cron is None:
            continue

        def make(entry=entry):
            @app.periodic(cron=entry.cron, periodic_id=entry.name)
            @app.task(name=f"{SCHEDULE_TASK}.{entry.name}", queue=SCHEDULE_QUEUE, pass_context=True)
            def scheduled(context, timestamp: int) -> None:
                start_command(Database(dsn), entry.command, entry.shards, note=entry.name)
        make()
    return app


def _record_refused_shard(db: Database, run_id: int, shard: int, attempt: int, round: int = 0) -> None:
    """A shard that refused its input commits a 'failed' job_shard row (nothing else), so
    the run ends 'failed' once every shard is in, instead of staying queued forever."""
    import socket

    from .shard import settle_run

    with db.connect() as conn:
        conn.execute("SELECT id FROM scan_run WHERE id = %s FOR NO KEY UPDATE", (run_id,))
        conn.execute("INSERT INTO job_shard (run_id, round, shard, status, counts, worker, attempt) VALUES "
                     "(%s, %s, %s, 'failed', '{\"refused\": 1}', %s, %s) ON CONFLICT (run_id, round, shard) DO NOTHING",
                     (run_id, round, shard, f"{socket.gethostname()}:{os.getpid()}", attempt))
        settle_run(conn, run_id)


def ensure_queue_schema(db: Database, app: procrastinate.App) -> None:
    """Apply procrastinate's schema once (guarded by an advisory lock)."""
    with db.connect() as conn:
        conn.execute("SELECT pg_advisory_xact_lock(727275)")
        if conn.execute("SELECT to_regclass('procrastinate_jobs') IS NULL").fetchone()[0]:  # type: ignore[index]  # one row
            from procrastinate.schema import SchemaManager

            conn.execute(SchemaManager.get_schema())
        conn.commit()


def _insert_queued_run(conn, spec, shards: int, note: str | None) -> int:
    from .runs import NEW_RUN_LOCK
    from .secrets import mask_argv

    conn.execute(NEW_RUN_LOCK)   # first in its transaction (runs.NEW_RUN_LOCK says why)
    return conn.execute(
        "INSERT INTO scan_run (kind, parameters, status, shards, command) VALUES (%s, %s, 'queued', %s, %s)"
        " RETURNING id",
        (spec.measurement, json.dumps({"spec": json.loads(spec.to_json()), "schedule": note,
                                       "submitted_by": mask_argv(sys.argv[1:])}),
         shards, json.dumps(["scan", spec.measurement])),
    ).fetchone()[0]


#: Attempts per shard of a local run (again only when the shard committed nothing).
LOCAL_ATTEMPTS = 2
#: Seconds an interrupted local run gives its shards to flush their rows before SIGKILL.
SHARD_TERM_GRACE_S = 30.0


@dataclass(frozen=True)
class LocalRun:
    """How a ``--procs`` run ended: its ``status`` ('finished' or 'failed'), ``counts``
    summed over the shards, and the exit code of each shard's last attempt."""

    run_id: int
    status: str
    counts: dict
    exit_codes: dict[int, int]


def run_local(db: Database, spec, procs: int, *, on_shard=None) -> LocalRun:
    """Run ``spec`` (a measurement and its options, :class:`~netsurvey.runctx.RunSpec`) as ``procs`` shards at once on this machine, each in
    its own process (one per core: a scanner's engine is one asyncio loop), into one run.
    Shards are forked from this process, which has the command line imported already (no
    start-up per shard); each dies with it. A shard that exits non-zero, other than 2 (bad
    input), is run once more if it committed nothing; ``on_shard(shard, rc)`` is called as
    each shard ends. The run's status becomes 'finished' when every shard committed as
    finished, else 'failed'."""
    import multiprocessing as mp
    from multiprocessing.connection import wait

    db.migrate()
    with db.connect() as conn:
        run_id = _insert_queued_run(conn, spec, procs, "local")
    ctx = mp.get_context("fork")
    spec_json = spec.to_json()
    config = _config_for_shards(spec.config_path)

    def start(shard: int, attempt: int):
        # (index, count, run, attempt, round, keep_on_interrupt): nothing retries a --procs
        # shard after a SIGTERM, so it keeps what it has, as an inline run does
        p = ctx.Process(target=_shard_main, args=(spec_json, (shard, procs, run_id, attempt, 0, True), _shard_env(db.dsn),
                                                  os.getpid(), config), name=f"shard-{run_id}-{shard}")
        p.start()
        return p

    def committed(shard: int) -> bool:
        with db.connect() as conn:
            return conn.execute("SELECT 1 FROM job_shard WHERE run_id = %s AND shard = %s",
                                (run_id, shard)).fetchone() is not None

    parent = os.getpid()

    def on_term(signum, frame):
        if os.getpid() != parent:   # a shard forked before it set its own handler
            signal.signal(signum, signal.SIG_DFL)
            os.kill(os.getpid(), signum)
            return
        raise SystemExit(128 + signum)   # into the finally below (Python's default: die, shards SIGKILLed)

    old_term = signal.signal(signal.SIGTERM, on_term)
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
        signal.signal(signal.SIGTERM, old_term)
        # interrupted (Ctrl-C, SIGTERM): the shards go with us, but as the inline run path
        # does, flushing their rows (SIGTERM); a SIGKILL here lost every buffered row
        for p in running:
            p.terminate()
        until = time.monotonic() + SHARD_TERM_GRACE_S
        for p in running:
            p.join(timeout=max(0.0, until - time.monotonic()))
            if p.exitcode is None:
                p.kill()
                p.join()
        with db.connect() as conn:  # shards that never committed: the run cannot finish by itself
            conn.execute("UPDATE scan_run SET status = 'failed', finished_at = clock_timestamp() WHERE id = %s "
                         "AND status IN ('queued', 'running')", (run_id,))
            status, counts = conn.execute("SELECT status, counts FROM scan_run WHERE id = %s",  # type: ignore[misc]  # the run's row
                                          (run_id,)).fetchone()
    return LocalRun(run_id, status, counts or {}, dict(sorted(rcs.items())))


def start_command(db: Database, argv: list[str], shards: int, *, note: str | None = None,
                  schedule_at: dt.datetime | None = None) -> int:
    """Queue a 'scan ...' argv (a schedule entry): parsed and validated with the
    measurement's own options first (bad input queues nothing)."""
    from .measure import parse_spec_argv

    return start_spec(db, parse_spec_argv(argv), shards, note=note, schedule_at=schedule_at)


def start_spec(db: Database, spec, shards: int, *, note: str | None = None,
               schedule_at: dt.datetime | None = None) -> int:
    """Record a queued run for ``spec`` and defer its ``shards`` jobs, all in one
    transaction (an interrupted submission leaves nothing behind)."""
    if not 1 <= shards:
        raise UsageError("--shards must be at least 1")
    db.migrate()
    ensure_queue_schema(db, make_app(db.dsn))
    with db.connect() as conn:
        run_id = _insert_queued_run(conn, spec, shards, note)
        spec_d = json.loads(spec.to_json())
        jobs = [(QUEUE, TASK_NAME, 0, None, f"run{run_id}-shard{i}",
                 json.dumps({"run_id": run_id, "shard": i, "shards": shards, "spec": spec_d}), schedule_at)
                for i in range(shards)]
        for k in range(0, len(jobs), 1000):
            conn.execute("SELECT procrastinate_defer_jobs_v1(%s::procrastinate_job_to_defer_v1[])",
                         ([j for j in jobs[k:k + 1000]],))
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
        if conn.execute("SELECT to_regclass('procrastinate_jobs') IS NULL").fetchone()[0]:  # type: ignore[index]  # one row
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


# -- --shards / --procs of a measurement (netsurvey.measure calls this) ----------------
def submit(m, params: dict, *, shards: Optional[int], procs: Optional[int]) -> None:
    """Queue ``m`` with ``params`` as ``shards`` jobs, or run it as ``procs`` shards here."""
    import typer

    from .clictx import state
    from .measure import make_spec

    spec = make_spec(m, params, state.config_path)
    if shards is not None:
        run_id = start_spec(state.db, spec, shards)
        typer.echo(f"queued run {run_id}: {shards} shards of '{m.name}'; start workers with 'netsurvey worker'")
        return
    assert procs is not None   # netsurvey.measure._execute: --shards or --procs is given
    _run_procs(state, spec, procs, as_json=bool(params.get("as_json")))


def _run_procs(state, spec: RunSpec, procs: int, *, as_json: bool) -> None:
    import json
    import sys

    from rich.console import Console

    err = Console(stderr=True)

    def on_shard(i: int, rc: int) -> None:
        if rc != 2:
            err.print(f"run: shard {i + 1}/{procs} {'done' if rc == 0 else f'failed (exit {rc})'}")

    run = run_local(state.db, spec, procs, on_shard=on_shard)
    codes = run.exit_codes
    if codes and all(rc == 2 for rc in codes.values()):
        sys.exit(2)  # bad input: every shard said why
    if as_json:  # the shards printed theirs; this last line is the run's
        print(json.dumps({"run_id": run.run_id, "status": run.status, "counts": run.counts,
                          "shards": {str(i): rc for i, rc in codes.items()}}))
    else:
        total = ", ".join(f"{k} {v}" for k, v in sorted(run.counts.items()))
        Console().print(f"run {run.run_id}: {procs} shards of '{spec.measurement}' {run.status} ({total})",
                        highlight=False, soft_wrap=True)
    if run.status != "finished":
        failed = ", ".join(str(i + 1) for i, rc in codes.items() if rc) or "?"  # 1-based, as above
        raise SystemExit(f"run {run.run_id} {run.status}: shard(s) {failed} of {procs} failed; "
                         "see 'netsurvey runs'")


