"""The small Python API for analysis in notebooks and scripts (see docs/data.md)::

    import netsurvey
    df = netsurvey.load(42, "tfo_probe")          # one run's rows as a pandas DataFrame
    with netsurvey.connect() as conn:             # a psycopg connection (session in UTC)
        conn.execute("SELECT ...")

The database is found as by the ``netsurvey`` command: ``dsn``, ``$NETSURVEY_DSN``,
``[database].dsn`` of the config (``config``, ``$NETSURVEY_CONFIG`` or
``./config/survey.toml``), else the embedded server. Values are typed as in a Parquet
export (``netsurvey export``): timestamps tz-aware UTC, bytea as hex text, jsonb as JSON
text, arrays as lists, inet as text.
"""
from __future__ import annotations

from pathlib import Path
from typing import Optional, Sequence

from .errors import UsageError


def database(dsn: Optional[str] = None, config: Optional[Path | str] = None):
    """The :class:`netsurvey.db.Database` the ``netsurvey`` command would use."""
    from .config import load_config
    from .db import Database

    cfg = load_config(Path(config) if config is not None else None).database
    return Database.resolve(dsn, cfg.data_dir, cfg.dsn)


def connect(dsn: Optional[str] = None, config: Optional[Path | str] = None, **kwargs):
    """A psycopg connection to the netsurvey database, its session time zone UTC."""
    conn = database(dsn, config).connect(**kwargs)
    conn.execute("SET TIME ZONE 'UTC'")
    if not conn.autocommit:
        conn.commit()
    return conn


def load(run: int, table: str, *, columns: Optional[Sequence[str]] = None, dsn: Optional[str] = None,
         config: Optional[Path | str] = None, batch_rows: int = 10_000):
    """The rows of ``table`` (a table or view with a ``run_id`` column) for scan_run ``run``
    as a pandas DataFrame; ``columns`` picks and orders columns. Streams from a server-side
    cursor into Arrow, then converts once. Raises UsageError for an unknown run, table or
    column."""
    try:
        import pandas  # noqa: F401
    except ImportError:
        raise UsageError("netsurvey.load needs pandas (pip install 'netsurvey[data]')") from None
    import pyarrow as pa
    from psycopg import sql

    from .export import arrow_schema, arrow_tables, columns_of, run_relations

    with connect(dsn, config) as conn:
        conn.read_only = True
        if conn.execute("SELECT 1 FROM scan_run WHERE id = %s", (run,)).fetchone() is None:
            raise UsageError(f"no scan_run with id {run}")
        if table not in run_relations(conn):
            raise UsageError(f"{table!r} is not a table or view with a run_id column")
        cols = columns_of(conn, table)
        if columns is not None:
            by_name = {c.name: c for c in cols}
            missing = [c for c in columns if c not in by_name]
            if missing:
                raise UsageError(f"{table} has no column {', '.join(missing)}")
            cols = [by_name[c] for c in columns]
        where = sql.SQL("run_id = {}").format(sql.Literal(int(run)))
        parts = list(arrow_tables(conn, table, cols, where, batch_rows))
        conn.rollback()
    t = pa.concat_tables(parts) if parts else arrow_schema(cols).empty_table()
    return t.to_pandas()
