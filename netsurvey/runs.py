"""Run bookkeeping: one ``scan_run`` row per scanner execution."""
from __future__ import annotations

import json
import platform
import socket
import sys
import threading
import time
from dataclasses import dataclass, field
from importlib import metadata
from typing import Any, Callable, Optional

from .db import Database
from .runctx import counts_json


def tool_versions(*packages: str) -> dict[str, str]:
    """Versions of netsurvey, Python and the given distributions."""
    out = {"netsurvey": metadata.version("netsurvey"), "code": code_version(), "python": platform.python_version()}
    for p in packages:
        try:
            out[p] = metadata.version(p)
        except metadata.PackageNotFoundError:
            out[p] = "missing"
    return out


def code_version() -> str:
    """netsurvey's version and, in a git checkout, the commit (read without running git)."""
    from pathlib import Path

    version = metadata.version("netsurvey")
    git = Path(__file__).resolve().parent.parent / ".git"
    try:
        if git.is_file():  # a worktree: "gitdir: PATH"
            git = Path(git.read_text().split(":", 1)[1].strip())
        head = (git / "HEAD").read_text().strip()
        if head.startswith("ref: "):
            ref = head[5:]
            p = git / ref
            if not p.exists() and (git / "commondir").exists():
                p = (git / (git / "commondir").read_text().strip() / ref).resolve()
            head = p.read_text().strip() if p.exists() else ref
        return f"{version}+g{head[:12]}"
    except (OSError, IndexError):
        return version


def vantage_description(namespace: Optional[str] = None) -> dict[str, Any]:
    """Where the run was made: host, platform, network namespace and the command line
    (secrets masked: a --dsn password never reaches the database)."""
    from .secrets import mask_argv

    return {"host": socket.gethostname(), "platform": platform.platform(), "netns": namespace,
            "argv": mask_argv(sys.argv[1:])}


@dataclass
class Run:
    """An open scan run. A measurement adds to ``counts`` as it goes; the run path
    (:mod:`netsurvey.measure`) ends the run: 'finished' when the measurement returns (or
    opens its next run), 'failed' when it raises, with these counts. ``finish`` is the
    run path's (and the library's) way to end it; a measurement never calls it."""

    db: Database
    id: int
    counts: dict = field(default_factory=dict, compare=False, repr=False)
    ended: bool = field(default=False, compare=False, repr=False)
    #: how the run ends when the measurement returns (a measurement that stopped early on
    #: purpose says 'cancelled'); a failure is 'failed' unless the measurement set this
    outcome: Optional[str] = field(default=None, compare=False, repr=False)
    #: counts the run path adds when the run ends, however it ends (read from the database)
    final_counts: Optional[Callable[[], dict]] = field(default=None, compare=False, repr=False)

    def finish(self, status: str = "finished", counts: Optional[dict] = None) -> None:
        """Record the end of the run. In shard mode (see shard.py) this commits the shard's
        results and its job_shard row atomically instead; a shard committed before is not
        committed again."""
        from . import runctx, shard

        self.ended = True
        ctx = runctx.current()
        spec = shard.current()
        if spec is not None:
            stopped = ctx is not None and ctx.interrupted
            if stopped and not spec.keep_on_interrupt:
                return  # stopped by a signal: commit nothing, the shard is retried whole
            from .writer import flush_all_open

            flush_all_open()  # every buffered row into the shard's transaction, then commit it with its job_shard row
            shard.commit_shard(self.db.dsn, "finished" if status == "finished" and not stopped else "failed",
                               counts or {})
            return
        with self.db.connect() as conn:
            # the first end wins: a dry run's 'cancelled' is not overwritten by a command's
            # own 'failed' handler, nor an interrupted run's 'failed' by a later 'finished'
            conn.execute(
                "UPDATE scan_run SET status=%s, finished_at=now(), counts=%s "
                "WHERE id=%s AND status IN ('running', 'queued')",
                (status, counts_json(counts), self.id),
            )
        release_run(self.db, self.id)


#: Taken first in every transaction that inserts a scan_run row. Its trigger creates the
#: run's partitions (schema/0150), and attaching a partition clones the foreign key to
#: scan_run, which needs this lock: taken inside the INSERT it is an upgrade from the
#: INSERT's ROW EXCLUSIVE, and two runs starting together (or a run starting beside a
#: transaction that updated scan_run) deadlocked (CI rehearsal: `scan tfo-lb` died with
#: DeadlockDetected in ensure_run_partitions). Taken first, they queue instead.
NEW_RUN_LOCK = "LOCK TABLE scan_run IN SHARE ROW EXCLUSIVE MODE"


#: First key of the session advisory lock "this process runs scan_run N" (second key: N).
RUN_LIVENESS_KEY = 0x6E73
_liveness: dict[str, Any] = {}   # dsn -> the connection holding this process's run locks
_held: set[tuple[str, int]] = set()
#: Seconds between two checks that the liveness session is still there. A database restart,
#: an idle-session timeout or pg_terminate_backend drops it (and the locks) while the run goes
#: on: a --resume from another process then ran the live run a second time.
LIVENESS_CHECK_S = 1.0
_watch_lock = threading.Lock()   # one user of the liveness connections at a time
_watching: list[threading.Thread] = []


def _retake_locks() -> None:
    """Check every liveness session; one that is gone is opened again and its runs' locks
    taken again. A run another process took meanwhile: say so on stderr (one line)."""
    import psycopg

    with _watch_lock:
        for dsn in {d for d, _ in _held}:
            conn = _liveness.get(dsn)
            try:
                if conn is not None and not conn.closed:
                    conn.execute("SELECT 1")
                    continue
            except psycopg.Error:
                pass
            try:
                if conn is not None:
                    conn.close()
                conn = _liveness[dsn] = psycopg.connect(dsn, autocommit=True)
                for d, run_id in sorted(_held):
                    if d == dsn and not conn.execute("SELECT pg_try_advisory_lock(%s, %s)",  # type: ignore[index]  # one row
                                                     (RUN_LIVENESS_KEY, run_id)).fetchone()[0]:
                        print(f"run {run_id}: its liveness lock was lost and another process holds it now "
                              "(a --resume of it elsewhere?)", file=sys.stderr)
            except psycopg.Error:
                pass   # the database is still away: tried again at the next check


def _watch() -> None:
    while True:
        time.sleep(LIVENESS_CHECK_S)
        if _held:
            _retake_locks()


def release_run(db: Database, run_id: int) -> None:
    """The run ended here: give its liveness lock back (a process that runs many runs would
    otherwise fill the server's lock table)."""
    if (db.dsn, int(run_id)) not in _held:
        return
    with _watch_lock:
        _held.discard((db.dsn, int(run_id)))
        conn = _liveness.get(db.dsn)
        try:
            if conn is not None and not conn.closed:
                conn.execute("SELECT pg_advisory_unlock(%s, %s)", (RUN_LIVENESS_KEY, int(run_id)))
        except Exception:   # the connection is gone, and the lock with it
            pass


def hold_run(db: Database, run_id: int, *, resuming: bool = False) -> None:
    """Mark ``run_id`` as run by this process until it exits: a session advisory lock on a
    connection kept open (a killed process's connection closes, and the lock with it).
    ``resuming`` (--resume): if another live process holds the run, raise UsageError instead
    of running it twice at once (its rows would be written twice)."""
    import psycopg

    with _watch_lock:
        for attempt in (1, 2):   # a connection from before a database restart is replaced once
            conn = _liveness.get(db.dsn)
            if conn is None or conn.closed:
                conn = _liveness[db.dsn] = psycopg.connect(db.dsn, autocommit=True)
            try:
                got = conn.execute("SELECT pg_try_advisory_lock(%s, %s)",  # type: ignore[index]  # one row
                                   (RUN_LIVENESS_KEY, int(run_id))).fetchone()[0]
                break
            except psycopg.OperationalError:
                conn.close()
                if attempt == 2:
                    raise
        if got and (db.dsn, int(run_id)) in _held:
            # re-entrant in one session: taken twice here, it would stay held after its one release
            conn.execute("SELECT pg_advisory_unlock(%s, %s)", (RUN_LIVENESS_KEY, int(run_id)))  # type: ignore[union-attr]  # connected in the loop
        if got:
            _held.add((db.dsn, int(run_id)))
            if not _watching:
                _watching.append(threading.Thread(target=_watch, name="run-liveness", daemon=True))
                _watching[0].start()
    if not got and resuming:
        from .errors import UsageError

        raise UsageError(f"--resume: run {run_id} is still being run by another process; stop it first "
                         "(a killed run can be resumed at once)")
    if resuming:
        # read again under the lock: the process that ran it may have finished it (and let the
        # lock go) between the caller's status check and this lock; the resume then set a
        # finished run 'running' and probed it all again
        with db.connect() as c:
            row = c.execute("SELECT status, coalesce(parameters->>'dry_run', '') FROM scan_run WHERE id = %s",
                            (int(run_id),)).fetchone()
        if row is not None and (row[0] == "finished" or row[1] == "true"):
            release_run(db, run_id)
            from .errors import UsageError

            # a dry run's record (cancelled, with the plan) was resumed as a real run: it probed
            # everything while its row still says dry_run
            raise UsageError(f"--resume: run {run_id} is already finished" if row[0] == "finished" else
                             f"--resume: run {run_id} was a dry run (nothing was run); start the scan anew")


def start_run(db: Database, kind: str, parameters: dict, *, packages: tuple[str, ...] = (),
              namespace: Optional[str] = None) -> Run:
    from . import shard

    spec = shard.current()
    if spec is not None:   # a shard of a queued run: reuse it
        with db.connect() as conn:
            conn.execute("UPDATE scan_run SET status = 'running', parameters = parameters || %s::jsonb, vantage = %s,"
                         " tool_versions = %s WHERE id = %s AND status = 'queued'",
                         (json.dumps(parameters, default=str), json.dumps(vantage_description(namespace)),
                          json.dumps(tool_versions(*packages)), spec.run_id))
        run = Run(db, spec.run_id)
    else:
        vantage = json.dumps(vantage_description(namespace))   # before the lock: it may look up routes
        with db.connect() as conn:
            conn.execute(NEW_RUN_LOCK)
            run_id = conn.execute(  # type: ignore[index]  # INSERT ... RETURNING: one row
                "INSERT INTO scan_run (kind, parameters, vantage, tool_versions) VALUES (%s,%s,%s,%s) RETURNING id",
                (kind, json.dumps(parameters, default=str), vantage, json.dumps(tool_versions(*packages))),
            ).fetchone()[0]
        run = Run(db, run_id)
        hold_run(db, run_id)   # a --resume of it while this process lives is refused
    _adopt(run)
    return run


def _adopt(run: Run) -> None:
    """The run path ends ``run`` (finished, failed, or failed when a signal stops the
    command); a measurement's next run (a repeat, a round) ends the one before."""
    from . import runctx

    ctx = runctx.current()
    if ctx is None:
        return
    ctx.runs.append(run)   # first: if ending an earlier run fails, the run path still ends this one
    for earlier in ctx.runs[:-1]:
        if not earlier.ended:
            earlier.finish("finished", earlier.counts)


def reopen_run(db: Database, run_id: int) -> Run:
    """``--resume``: take the interrupted run ``run_id`` over (refused while another live
    process runs it), set it running again; the run path ends it like a new run."""
    hold_run(db, run_id, resuming=True)
    with db.connect() as conn:
        conn.execute("UPDATE scan_run SET status='running' WHERE id=%s", (run_id,))
    run = Run(db, run_id)
    _adopt(run)
    return run
