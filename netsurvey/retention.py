"""Retention of old runs: ``netsurvey db archive-run --run N --out DIR [--drop]``.

The tables that grow with every campaign are partitioned by run (schema/0150_partition_by_run.sql,
one partition per table and run in the schema ``run_partitions``). Archiving a run writes it with
``netsurvey export`` (every table with a run_id, the target list, manifest.json with row counts
and SHA-256 per file); with ``--drop`` the run's partitions are then dropped (their space is
freed at once, no VACUUM) and its scan_run row deleted (cascading to the other result tables).
docs/retention.md says when and how.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import psycopg
from psycopg import sql

from .db import Database
from .errors import UsageError


@dataclass(frozen=True)
class RunPartition:
    """One partition of one run: its parent table, its name, rows and size."""

    table: str
    partition: str
    rows: int
    size_bytes: int


def run_partitions(conn: psycopg.Connection, run_id: int) -> list[RunPartition]:
    """The partitions holding ``run_id``'s rows (parents listed in run_partitioned)."""
    if conn.execute("SELECT to_regclass('run_partitioned') IS NULL").fetchone()[0]:  # type: ignore[index]  # one row
        return []
    out = []
    # rows counted through the parent (pruned to the partition): the schema run_partitions
    # is the owner's, and a writer or reader archiving (no --drop) has no USAGE on it
    for table, part, size in conn.execute(
            """SELECT p.table_name, c.relname, pg_total_relation_size(c.oid)
               FROM run_partitioned p
               JOIN pg_inherits i ON i.inhparent = to_regclass(p.table_name)
               JOIN pg_class c ON c.oid = i.inhrelid
               WHERE c.relnamespace = 'run_partitions'::regnamespace AND c.relname = p.table_name || '_r' || %s
               ORDER BY 1""", (str(run_id),)).fetchall():
        rows = conn.execute(sql.SQL("SELECT count(*) FROM {} WHERE run_id = %s").format(sql.Identifier(table)),  # type: ignore[index]  # one row
                            (run_id,)).fetchone()[0]
        out.append(RunPartition(table, part, rows, size))
    return out


#: a run in these states has not ended: more rows may come (a queued run is a sharded run or
#: a campaign of rounds waiting for its next shard or round)
NOT_ENDED = ("queued", "running")


#: how long the drop waits for a lock (the run's row, each parent table, scan_run itself:
#: DROP TABLE of a partition takes ACCESS EXCLUSIVE on scan_run for its foreign key's
#: triggers) before giving up: a shard writes all its rows in one transaction, and a drop
#: waiting behind it kept everyone else from reading scan_run or starting a run until the
#: shard ended
LOCK_TIMEOUT_S = 5.0


def drop_run(db: Database, run_id: int, exported: dict[str, int] | None = None,
             lock_timeout_s: float = LOCK_TIMEOUT_S) -> list[RunPartition]:
    """Drop ``run_id``'s partitions and delete its scan_run row (one transaction). Returns what
    was dropped. A run that has not ended is refused (UsageError). With ``exported`` (table:
    rows written), a table holding other than that many rows of the run (rows that arrived
    after the export) refuses the drop: the run's row is locked first (FOR UPDATE), so no
    row referencing it can be inserted until the drop commits."""
    with db.connect() as conn:
        conn.execute(sql.SQL("SET LOCAL lock_timeout = {}").format(sql.Literal(f"{max(1, int(lock_timeout_s * 1000))}ms")))
        try:
            return _drop_locked(conn, run_id, exported)
        except psycopg.errors.LockNotAvailable:
            conn.rollback()
            raise UsageError(f"--drop: run {run_id}'s tables were in use by another transaction (a running scan) for "
                             f"more than {lock_timeout_s:g} s; nothing dropped (the export stays): try again later "
                             "or with a longer --lock-timeout-s") from None


def _drop_locked(conn: psycopg.Connection, run_id: int, exported: dict[str, int] | None) -> list[RunPartition]:
    """The drop, in the caller's transaction (lock_timeout set)."""
    row = conn.execute("SELECT status FROM scan_run WHERE id = %s FOR UPDATE", (run_id,)).fetchone()
    if row is None:
        raise UsageError(f"--run: no scan_run with id {run_id}")
    if row[0] in NOT_ENDED:
        raise UsageError(f"--run: run {run_id} is still {row[0]}; archive it once it ended")
    for table, rows in (exported or {}).items():
        now = conn.execute(sql.SQL("SELECT count(*) FROM {} WHERE run_id = %s").format(sql.Identifier(table)),  # type: ignore[index]  # one row
                           (run_id,)).fetchone()[0]
        if now != rows:
            raise UsageError(f"run {run_id}: {table} holds {now} rows, the export wrote {rows}; nothing dropped")
    parts = run_partitions(conn, run_id)
    for p in parts:
        # DETACH first: the rows leave the parent at once, DROP then frees their files
        conn.execute(sql.SQL("ALTER TABLE {} DETACH PARTITION run_partitions.{}").format(
            sql.Identifier(p.table), sql.Identifier(p.partition)))
        conn.execute(sql.SQL("DROP TABLE run_partitions.{}").format(sql.Identifier(p.partition)))
    conn.execute("DELETE FROM scan_run WHERE id = %s", (run_id,))
    conn.commit()
    return parts


def archive_run(db: Database, run_id: int, out_dir: Path, fmt: str, drop: bool,
                lock_timeout_s: float = LOCK_TIMEOUT_S) -> tuple[dict, list[RunPartition]]:
    """Export ``run_id`` into ``out_dir`` (``netsurvey export``) and, with ``drop``, drop it once
    every file is written and its row count matches the database's. Returns the manifest and
    the partitions dropped."""
    from .export import FORMATS, check_out_dir, export_run

    check_out_dir(out_dir)
    if fmt not in FORMATS:
        raise UsageError(f"--format: {fmt!r} is not one of {', '.join(FORMATS)}")
    with db.connect() as conn:
        row = conn.execute("SELECT status FROM scan_run WHERE id = %s", (run_id,)).fetchone()
        if row is None:
            raise UsageError(f"--run: no scan_run with id {run_id}")
        if drop and row[0] in NOT_ENDED:
            raise UsageError(f"--run: run {run_id} is still {row[0]}; archive it once it ended")
        if drop:   # detaching and dropping partitions is the owner's: refused before anything is written
            user, owns = conn.execute(  # type: ignore[misc]  # an aggregate: one row
                "SELECT current_user, coalesce(bool_and(pg_has_role(current_user, c.relowner, 'USAGE')), true) "
                "FROM run_partitioned p JOIN pg_class c ON c.oid = to_regclass(p.table_name)").fetchone() \
                if conn.execute("SELECT to_regclass('run_partitioned') IS NOT NULL").fetchone()[0] else (None, True)  # type: ignore[index]  # one row
            if not owns:
                raise UsageError(f"--drop: role {user!r} does not own the partitioned tables; archive with the "
                                 "owner's DSN (netsurvey_owner), or without --drop")
        before = {p.table: p.rows for p in run_partitions(conn, run_id)}
    manifest = export_run(db, run_id, out_dir, fmt)
    manifest.pop("_batches", None)
    written = {f["table"]: f["rows"] for f in manifest["files"]}
    short = [t for t, n in before.items() if written.get(t) != n]
    if short:
        raise UsageError(f"export of run {run_id} wrote other row counts than the partitions hold ({', '.join(short)}); "
                         "nothing dropped")
    exported = {f["table"]: f["rows"] for f in manifest["files"] if f["table"] != "target"}
    return manifest, (drop_run(db, run_id, exported, lock_timeout_s) if drop else [])
