"""Database access: the embedded PostgreSQL (pgserver) or any server by DSN, and migrations.

The DSN is chosen in this order: ``--dsn``, ``$NETSURVEY_DSN``, ``[database].dsn`` in the
config, else the embedded server whose data directory is ``[database].data_dir``
(default ``.netsurvey/pgdata``), started on demand and left running for later commands.
"""
from __future__ import annotations

import logging
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import psycopg

from .errors import MigrationError, UsageError

#: Numbered plain-SQL migrations, applied in file-name order.
SCHEMA_DIR = Path(__file__).resolve().parent.parent / "schema"
_MIGRATION_NAME = re.compile(r"^(\d{4})_[a-z0-9_]+\.sql$")

logging.getLogger("pgserver").setLevel(logging.WARNING)


def _embedded_server(data_dir: Path):
    import warnings

    warnings.filterwarnings("ignore", module="platformdirs")
    import pgserver  # imported lazily: it starts nothing until asked

    data_dir = data_dir.resolve()
    data_dir.parent.mkdir(parents=True, exist_ok=True)
    if os.geteuid() == 0:
        # pgserver runs postgres as the 'pgserver' user, which must be able to reach it.
        for p in [data_dir.parent, *data_dir.parent.parents]:
            mode = p.stat().st_mode
            if not mode & 0o001:
                p.chmod(mode | 0o001)
    import subprocess
    import time

    # pgserver waits at most 10 s for `pg_ctl -w start`; on a loaded machine that can
    # expire although the server comes up. Asking again finds the running server.
    from pgserver.utils import PostmasterInfo

    # pgserver caches one handle per data directory and process; if that server has
    # stopped since (db down, a restart), forget the handle so the server is started again.
    info = PostmasterInfo.read_from_pgdata(data_dir) if data_dir.exists() else None
    if info is None or not info.is_running():
        pgserver.PostgresServer._instances.pop(data_dir, None)
    for attempt in range(4):
        try:
            return pgserver.get_server(data_dir, cleanup_mode=None)
        except subprocess.TimeoutExpired:
            if attempt == 3:
                raise
            time.sleep(2)


@dataclass(frozen=True)
class Database:
    """Where the data lives. ``dsn`` is a libpq connection string."""

    dsn: str
    embedded_dir: Optional[Path] = None

    @classmethod
    def resolve(cls, dsn: Optional[str], data_dir: Path, config_dsn: str = "") -> "Database":
        chosen = dsn or os.environ.get("NETSURVEY_DSN") or config_dsn
        if chosen:
            return cls(dsn=chosen)
        server = _embedded_server(data_dir)
        return cls(dsn=server.get_uri(), embedded_dir=data_dir.resolve())

    def connect(self, **kwargs) -> psycopg.Connection:
        try:
            return psycopg.connect(self.dsn, **kwargs)
        except psycopg.OperationalError as exc:
            raise UsageError(f"cannot connect to database: {str(exc).strip().splitlines()[0]}") from None

    # -- migrations ---------------------------------------------------------------
    def migrate(self, schema_dir: Path = SCHEMA_DIR) -> list[str]:
        """Apply pending migrations, each in its own transaction. Returns names applied.

        A failing migration is rolled back (the database stays as it was) and raises
        :class:`MigrationError` naming the file.
        """
        files = migration_files(schema_dir)
        applied: list[str] = []
        with self.connect(autocommit=True) as conn:
            conn.execute(
                "CREATE TABLE IF NOT EXISTS schema_migrations ("
                " version text PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())"
            )
            done = {r[0] for r in conn.execute("SELECT version FROM schema_migrations")}
            for path in files:
                if path.name in done:
                    continue
                try:
                    with conn.transaction():
                        conn.execute("SELECT pg_advisory_xact_lock(727274)")
                        again = conn.execute(
                            "SELECT 1 FROM schema_migrations WHERE version = %s", (path.name,)
                        ).fetchone()
                        if again:
                            continue
                        conn.execute(path.read_text())
                        conn.execute("INSERT INTO schema_migrations (version) VALUES (%s)", (path.name,))
                except psycopg.Error as exc:
                    msg = (exc.diag.message_primary or str(exc)).strip()
                    raise MigrationError(path.name, msg) from None
                applied.append(path.name)
        return applied

    def status(self) -> dict:
        """Server version, applied migrations and row counts of the core tables."""
        with self.connect() as conn:
            version = conn.execute("SHOW server_version").fetchone()[0]
            has = conn.execute("SELECT to_regclass('schema_migrations') IS NOT NULL").fetchone()[0]
            applied = [r[0] for r in conn.execute("SELECT version FROM schema_migrations ORDER BY 1")] if has else []
            pending = [p.name for p in migration_files() if p.name not in applied]
            counts = {}
            for table in ("target_list", "target", "scan_run"):
                if conn.execute("SELECT to_regclass(%s) IS NOT NULL", (table,)).fetchone()[0]:
                    counts[table] = conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0]
        return {
            "dsn": self.dsn,
            "embedded": self.embedded_dir is not None,
            "server_version": version,
            "applied": applied,
            "pending": pending,
            "rows": counts,
        }


def migration_files(schema_dir: Path = SCHEMA_DIR) -> list[Path]:
    files = sorted(p for p in schema_dir.glob("*.sql"))
    for p in files:
        if not _MIGRATION_NAME.match(p.name):
            raise MigrationError(p.name, "migration files must be named NNNN_name.sql")
    return files


def stop_embedded(data_dir: Path) -> bool:
    """Stop the embedded server if it runs. Returns True if one was stopped."""
    from pgserver._commands import pg_ctl
    from pgserver.utils import PostmasterInfo

    data_dir = data_dir.resolve()
    if not data_dir.exists():
        return False
    info = PostmasterInfo.read_from_pgdata(data_dir)
    if info is None or not info.is_running():
        return False
    user = "pgserver" if os.geteuid() == 0 else None
    pg_ctl(["-w", "stop", "-m", "fast"], pgdata=data_dir, user=user)
    return True
