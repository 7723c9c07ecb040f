"""One results writer for every scanner: buffered, batched COPY into PostgreSQL.

Rows are buffered in memory (at most ``batch_rows``) and written with ``COPY ... FROM
STDIN`` — binary format when the column types are given, text otherwise — each batch in
its own transaction, so a crash loses at most the unflushed buffer. Buffers are flushed
on :meth:`ResultWriter.close`, on leaving the ``with`` block, and on SIGTERM/SIGINT
(see :func:`flush_all_on_signal`).

In a shard of a sharded run, a table with a ``shard_id`` column (every result table, see
schema/0115_row_vantage.sql) gets the shard's ``job_shard.id`` appended to each row: the
row knows its round and its vantage (``row_vantage(run_id, shard_id)``, view
``shard_origin``) without the measurement doing anything.

Example (the column types come from the table's definition, ``types="catalog"``)::

    with ResultWriter(db, "tfo_probe", ["run_id", "address", "cookie"], types="catalog") as w:
        w.write((run_id, ipaddress.ip_address("198.18.3.1"), b"\\x01..."))

With binary COPY, values must be the Python types psycopg dumps for the declared type
(``ipaddress`` objects for inet, ``bytes`` for bytea, ``datetime`` for timestamptz).
"""
from __future__ import annotations

import signal
import threading
import time
import weakref
from typing import Any, Iterable, Optional, Sequence

import psycopg
from psycopg import sql

from .db import Database

_OPEN_WRITERS: "weakref.WeakSet[ResultWriter]" = weakref.WeakSet()


def table_columns(conn: psycopg.Connection, table: str) -> dict[str, int]:
    """Column name -> type oid of ``table``, from the database's catalog (one query; a
    transaction it opened on an idle connection is ended again)."""
    idle = conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE
    have: dict[str, int] = dict(conn.execute("SELECT attname, atttypid::int FROM pg_attribute WHERE attrelid = to_regclass(%s) "
                                             "AND attnum > 0 AND NOT attisdropped", (table,)).fetchall())
    if idle and not conn.autocommit:
        conn.rollback()   # each batch is a transaction of its own
    return have


def catalog_types(have: dict[str, int], table: str, columns: Sequence[str]) -> list[int]:
    """The type (oid) of each of ``columns`` (``have``: :func:`table_columns`); ValueError
    naming a column the table does not have."""
    missing = [c for c in columns if c not in have]
    if missing:
        raise ValueError(f"table {table} has no column {missing[0]!r}")
    return [have[c] for c in columns]


class ResultWriter:
    """Buffered COPY writer for one table.

    :param db: the database (or an open psycopg connection to reuse).
    :param table: target table name.
    :param columns: column names in row order.
    :param types: ``"catalog"``: each column's type read from the database catalog (binary
        COPY; the table's own definition in schema/ is the one statement of its types);
        or PostgreSQL type names per column (binary COPY); or None for text COPY.
    :param batch_rows: rows buffered before a flush.
    :param background: write full batches from a helper thread while the caller goes on
        (an asyncio scan is not stalled by the database's ~0.1 s per 10,000-row COPY); at
        most one batch is in flight, :meth:`flush` and :meth:`close` wait for it, and a
        batch that finally fails is kept and its error raised by the next call.
    """

    def __init__(
        self,
        db: Database | psycopg.Connection,
        table: str,
        columns: Sequence[str],
        *,
        types: Optional[Sequence[str | int] | str] = None,
        batch_rows: int = 10_000,
        retry_seconds: float = 120.0,
        background: bool = False,
    ):
        if types is not None and types != "catalog" and len(types) != len(columns):
            raise ValueError("types must match columns")
        from . import shard

        self._db = db if isinstance(db, Database) else None
        if self._db is not None and shard.current() is not None:
            # shard mode: one shared connection and transaction, committed by Run.finish
            self._own_conn = False
            self._conn = shard.connection(self._db.dsn)
        else:
            self._own_conn = isinstance(db, Database)
            self._conn = db.connect() if isinstance(db, Database) else db
        self.table = table
        self.columns = list(columns)
        in_shard = self._db is not None and shard.current() is not None
        # the catalog, read once: the column types, and whether the table has shard_id
        have = table_columns(self._conn, table) if types == "catalog" or in_shard else {}
        self.types: Optional[list[str | int]] = (
            list(catalog_types(have, table, self.columns)) if types == "catalog" else list(types) if types else None)
        self._stamp = None   # shard mode: this shard's job_shard.id, appended to each row as shard_id
        if in_shard and self._db is not None and "shard_id" not in self.columns and "shard_id" in have:
            self._stamp = shard.row_id(self._db.dsn)
            self.columns.append("shard_id")
            if self.types:
                self.types.append(20)   # int8
        self.batch_rows = batch_rows
        self.retry_seconds = retry_seconds
        self._buf: list[Sequence[Any]] = []
        self._lock = threading.RLock()  # re-entrant: a signal handler's flush may interrupt a holder
        self.rows_written = 0
        self.closed = False
        self._background = background
        self._pending: Optional[threading.Thread] = None  # the thread writing ``_inflight``
        self._inflight: Optional[list] = None  # the batch handed to it (None once written or taken back)
        self._failed: Optional[BaseException] = None
        cols = sql.SQL(", ").join(sql.Identifier(c) for c in self.columns)
        fmt = sql.SQL(" (FORMAT BINARY)") if self.types else sql.SQL("")
        self._copy_sql = sql.SQL("COPY {} ({}) FROM STDIN{}").format(sql.Identifier(table), cols, fmt)
        _OPEN_WRITERS.add(self)

    def write(self, row: Sequence[Any]) -> None:
        """Buffer one row (a tuple in column order); flushes when the batch is full."""
        if self._stamp is not None:
            row = (*row, self._stamp)
        self._buf.append(row)
        if len(self._buf) >= self.batch_rows:
            if self._background:
                self._flush_in_background()
            else:
                self.flush()

    def _flush_in_background(self) -> None:
        self._wait_pending()
        t = threading.Thread(target=self._write_inflight, name=f"writer-{self.table}", daemon=True)
        with self._lock:  # the batch is always reachable from self: in _buf or in _inflight
            self._inflight, self._buf = self._buf, []
            self._pending = t
        t.start()

    def _write_inflight(self) -> None:
        rows = self._inflight
        if rows is None:
            return  # taken back before this thread ran (see _wait_pending)
        try:
            self._write_batch(rows)
        except BaseException as exc:
            self._keep(rows)
            self._failed = exc
        finally:
            self._inflight = None

    def _keep(self, rows: list) -> None:
        """Put a batch that was not written back in front of the buffer (the next flush
        tries it again, in order)."""
        with self._lock:
            self._buf[:0] = rows

    def _wait_pending(self) -> None:
        t = self._pending
        if t is not None:
            if t.ident is None:  # not started (a signal handler's flush between hand-over and start)
                rows, self._inflight = self._inflight, None
                self._keep(rows or [])
            else:
                t.join()
            self._pending = None
        if self._failed is not None:
            exc, self._failed = self._failed, None
            raise exc

    def write_many(self, rows: Iterable[Sequence[Any]]) -> None:
        for row in rows:
            self.write(row)

    def flush(self) -> int:
        """Write the buffer in one COPY transaction. Returns the number of rows written.

        If the database goes away (restart, network), the batch stays buffered and the
        writer reconnects with backoff for up to ``retry_seconds``; the failed transaction
        was rolled back, so re-sending it duplicates nothing. Only then does it raise.
        """
        before = self.rows_written
        self._wait_pending()
        with self._lock:
            rows, self._buf = self._buf, []
        try:
            self._write_batch(rows)
        except BaseException:
            self._keep(rows)
            raise
        return self.rows_written - before

    def _write_batch(self, rows: list) -> None:
        if not rows:
            return
        with self._lock:
            deadline = time.monotonic() + self.retry_seconds
            delay = 0.2
            while True:
                try:
                    self._copy(rows)
                    break
                except psycopg.OperationalError:
                    if not self._own_conn or time.monotonic() > deadline:
                        raise
                    time.sleep(delay)
                    delay = min(delay * 2, 5.0)
                    self._reconnect()
            self.rows_written += len(rows)

    def _copy(self, rows: list) -> None:
        with self._conn.transaction():
            with self._conn.cursor().copy(self._copy_sql) as copy:
                if self.types:
                    copy.set_types(self.types)
                for row in rows:
                    copy.write_row(row)

    def _reconnect(self) -> None:
        try:
            self._conn.close()
        except Exception:
            pass
        assert self._db is not None   # only a connection it owns (made from its Database) is reconnected
        try:
            self._conn = psycopg.connect(self._db.dsn)
        except psycopg.OperationalError:
            pass  # still down; the next _copy fails fast on the closed connection

    def close(self) -> None:
        if self.closed:
            return
        try:
            self.flush()
        finally:
            self.closed = True
            _OPEN_WRITERS.discard(self)
            if self._own_conn:
                self._conn.close()

    def __enter__(self) -> "ResultWriter":
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        self.close()


def flush_all_open() -> int:
    """Flush every open writer; returns rows written. Used on signals."""
    total = 0
    for w in list(_OPEN_WRITERS):
        if not w.closed:
            try:
                total += w.flush()
            except psycopg.Error:
                pass
    return total


def flush_all_on_signal(signals: Sequence[int] = (signal.SIGTERM, signal.SIGINT)) -> None:
    """Install handlers that flush every open writer, then exit as the signal asks."""

    def handler(signum, frame):
        flush_all_open()
        signal.signal(signum, signal.SIG_DFL)
        if signum == signal.SIGINT:
            raise KeyboardInterrupt
        raise SystemExit(128 + signum)

    for s in signals:
        signal.signal(s, handler)
