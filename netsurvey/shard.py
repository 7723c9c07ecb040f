"""Shard mode: what a scan command does differently when a worker runs one shard of a
sharded run (the active run context's ``shard``, see ``runctx.py``; set by the run path
in ``measure.py`` from the spec the task in ``jobs.py`` hands over).

- ``targets.select_targets`` keeps only the targets whose stable hash falls in shard i;
- ``clictx.open_scan`` reuses run R instead of creating a run;
- every ``ResultWriter`` writes through one shared connection inside one open
  transaction, and ``Run.finish`` commits it together with the shard's ``job_shard`` row.
  A shard that dies (SIGKILL, database restart) therefore leaves nothing behind, and a
  shard that already committed cannot commit twice: exactly once per (run, round, shard).
"""
from __future__ import annotations

import contextlib
import hashlib
import os
import signal
import socket
from typing import Optional

import psycopg

from .runctx import ShardSpec, counts_json, current_shard

__all__ = ["ShardSpec", "ShardConnectionLost", "current", "shard_of", "commit_shard"]


def current() -> Optional[ShardSpec]:
    """The shard this process runs (None when not a shard of a queued run)."""
    return current_shard()


def shard_of(key: str, count: int) -> int:
    """Stable shard of a target key (hostname or address): the first 8 bytes of its
    sha256, big-endian, unsigned, mod count. SHA-256 (sha1 until issue 26) because
    PostgreSQL has it built in: ``targets.TargetStream`` picks a shard's names in SQL
    with the same hash. The shards of one run must all use one version of this."""
    return int.from_bytes(hashlib.sha256(key.encode()).digest()[:8], "big") % count


_conn: Optional[psycopg.Connection] = None
_filtered = False
_row_id: Optional[int] = None


def mark_filtered() -> None:
    """Called by target selection: this command really restricted itself to its shard."""
    global _filtered
    _filtered = True


class ShardConnectionLost(RuntimeError):
    """The shard's connection died (database restart, network) with its transaction: the
    rows written so far are gone. Not a bad input: the shard process exits 1 and the
    worker's job is retried whole (committing a job_shard row now would end the run
    'failed', or 'finished' without the lost rows)."""


def connection(dsn: str) -> psycopg.Connection:
    """The shard's shared connection, inside one open transaction. Opened once: if it was
    lost, raises :class:`ShardConnectionLost` instead of opening a new one."""
    global _conn
    if _conn is not None and _conn.closed:
        raise ShardConnectionLost("the shard's database connection was lost with its uncommitted rows; "
                                  "the shard is retried")
    if _conn is None:
        _conn = psycopg.connect(dsn)
        _conn.execute("SELECT 1")  # opens the transaction; writers' flushes become savepoints
    return _conn


def row_id(dsn: str) -> int:
    """This shard's ``job_shard.id``, drawn once (a sequence value: not rolled back) and
    committed with its job_shard row; ResultWriter stamps it into each row's ``shard_id``,
    so every row knows the shard - round and vantage - whose commit brought it in."""
    global _row_id
    if _row_id is None:
        _row_id = connection(dsn).execute(
            "SELECT nextval(pg_get_serial_sequence('job_shard', 'id'))").fetchone()[0]  # type: ignore[index]  # one row
    return _row_id


def commit_shard(dsn: str, status: str, counts: dict) -> bool:
    """Commit the shard's results with its job_shard row; False if it was already committed
    (then everything this attempt wrote is rolled back). Marks the run finished when the
    last shard commits."""

    spec = current()
    assert spec is not None
    conn = connection(dsn)
    if not _filtered and spec.index > 0:
        # the command ignored sharding (e.g. an address-range scan): shard 0 did it all
        counts = {"not-shardable": 1}
        conn.rollback()
        conn.execute("SELECT 1")
    # NO KEY UPDATE: the shard's result rows hold FOR KEY SHARE on this row (their foreign key);
    # FOR UPDATE would conflict with another shard's and two committing shards deadlocked
    conn.execute("SELECT id FROM scan_run WHERE id = %s FOR NO KEY UPDATE", (spec.run_id,))
    from .vantage import shard_vantage_json

    with signals_deferred():   # a SIGTERM between the job_shard row and the commit lost both
        row = conn.execute(
            """INSERT INTO job_shard (run_id, round, shard, status, counts, worker, attempt, vantage, id)
               VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s) ON CONFLICT (run_id, round, shard) DO NOTHING RETURNING shard""",
            (spec.run_id, spec.round, spec.index, status, counts_json(counts), f"{socket.gethostname()}:{os.getpid()}",
             spec.attempt, shard_vantage_json(), row_id(dsn))).fetchone()
        if row is None:
            conn.rollback()
            return False
        settle_run(conn, spec.run_id)
        conn.commit()
        return True


@contextlib.contextmanager
def signals_deferred():
    """SIGTERM and SIGINT that arrive inside the block are delivered when it ends: the
    shard's commit (its rows with its job_shard row) is not cut in two (found by the
    issue-20 adversary: the interrupt handler's second commit found the row inserted,
    rolled back, and the shard lost its rows). Main thread only (Python handles signals
    there)."""
    import threading

    if threading.current_thread() is not threading.main_thread():
        yield
        return
    got: list[int] = []
    saved = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGINT)}
    for s in saved:
        signal.signal(s, lambda signum, frame: got.append(signum))
    try:
        yield
    finally:
        for s, h in saved.items():
            signal.signal(s, h)
        for s in dict.fromkeys(got):
            signal.raise_signal(s)


def settle_run(conn: psycopg.Connection, run_id: int) -> None:
    """Inside the transaction that just added a job_shard row: when every shard of the run
    (of every round, for a campaign run) is in, end the run ('failed' if any shard failed) with the shards' counts summed."""
    # clock_timestamp(): now() would be the start of the shard's long transaction
    conn.execute(
        """UPDATE scan_run r SET status = CASE WHEN r.status = 'cancelled' THEN r.status
                                               WHEN agg.failed > 0 THEN 'failed' ELSE 'finished' END,
                                 finished_at = clock_timestamp(), counts = agg.counts
           FROM (SELECT count(*) AS done, count(*) FILTER (WHERE status = 'failed') AS failed,
                        (SELECT coalesce(jsonb_object_agg(k, total), '{}') FROM (
                            SELECT key AS k, sum(value::bigint) AS total
                            FROM job_shard, jsonb_each_text(counts) WHERE run_id = %s GROUP BY key) t) AS counts
                 FROM job_shard WHERE run_id = %s) agg
           WHERE r.id = %s AND agg.done = r.shards * coalesce(r.rounds, 1)""", (run_id, run_id, run_id))
