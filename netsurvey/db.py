"""Database access: the embedded PostgreSQL (netsurvey.embedded) or any server by DSN, and migrations.

The DSN is chosen in this order: ``--dsn``, ``$NETSURVEY_DSN``, ``[database].dsn`` in the
config, else the embedded server whose data directory is ``[database].data_dir``
(default ``.netsurvey/pgdata``), started on demand and left running for later commands.
"""
from __future__ import annotations

import hashlib
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import psycopg
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from .errors import MigrationError, UsageError

#: Numbered plain-SQL migrations, applied in file-name order.
SCHEMA_DIR = Path(__file__).resolve().parent.parent / "schema"
_MIGRATION_NAME = re.compile(r"^(\d{4})_[a-z0-9_]+\.sql$")

def mask_dsn(dsn: str) -> str:
    """``dsn`` with any password replaced by ``****`` (for printing and recording)."""
    try:
        params = conninfo_to_dict(dsn)
    except psycopg.Error:
        return "(not a valid DSN)"
    if not params.get("password"):
        return dsn
    if "://" in dsn:
        masked = re.sub(r"(://[^:/@?]*:)[^@/?]*@", r"\1****@", dsn)
        return re.sub(r"([?&]password=)[^&]*", r"\1****", masked)
    return make_conninfo("", **{**params, "password": "****"})


def check_dsn(dsn: str, source: str = "--dsn") -> str:
    """``dsn`` if it is a libpq connection string (key=value or postgres[ql]:// URI)."""
    if "://" in dsn and not dsn.startswith(("postgresql://", "postgres://")):
        raise UsageError(f"{source}: {dsn.split('://', 1)[0]}:// is not a PostgreSQL DSN (postgresql://...)")
    try:
        conninfo_to_dict(dsn)
    except psycopg.Error as exc:
        # libpq quotes what it could not parse: the whole URI, password included
        said = re.sub(r'"[^"]*"', '"***"', str(exc).strip().splitlines()[0])
        raise UsageError(f"{source}: not a libpq connection string: {said}") from None
    from .etiquette import check_resolvers_on_machine

    # a database at a testbed address is reached in the testbed, never by the default route
    # (the session-31 adversary: NETSURVEY_DSN host=198.18.77.5 outside the testbed sent SYNs
    # to port 5432 over it); names and socket directories are libpq's to resolve
    params = conninfo_to_dict(dsn)
    hosts = [h.strip() for k in ("host", "hostaddr") for h in str(params.get(k) or "").split(",")]
    check_resolvers_on_machine([h for h in hosts if h and not h.startswith("/")], f"{source}: database host")
    return dsn


@dataclass(frozen=True)
class Database:
    """Where the data lives. ``dsn`` is a libpq connection string (the role that migrates
    and writes); ``reader`` that of the read-only role (None: derived, see reader_dsn)."""

    dsn: str
    embedded_dir: Optional[Path] = None
    reader: Optional[str] = None

    @classmethod
    def resolve(cls, dsn: Optional[str], data_dir: Path, config_dsn: str = "", *, create: bool = True,
                reader_dsn: str = "") -> "Database":
        """The database named by ``dsn``, $NETSURVEY_DSN or ``config_dsn``, else the embedded
        server of ``data_dir``, started (and with ``create`` initialised) on demand. Without
        ``create`` a missing embedded cluster is the error "no database here"."""
        from . import embedded

        chosen = dsn or os.environ.get("NETSURVEY_DSN") or config_dsn
        reader = os.environ.get("NETSURVEY_READER_DSN") or reader_dsn or None
        if reader:
            check_dsn(reader, "NETSURVEY_READER_DSN")
        if chosen:
            return cls(dsn=check_dsn(chosen), reader=reader)
        pm = embedded.ensure_running(Path(data_dir), create=create)
        return cls(dsn=embedded.conninfo(pm, embedded.OWNER_ROLE), embedded_dir=Path(data_dir).absolute(),
                   reader=embedded.conninfo(pm, embedded.READER_ROLE))

    @property
    def reader_dsn(self) -> str:
        """DSN of the read-only role: given, or this DSN with the user netsurvey_reader when
        it names one of the embedded server's roles without a password, else this DSN."""
        from .embedded import OWNER_ROLE, READER_ROLE, WRITER_ROLE

        if self.reader:
            return self.reader
        params = conninfo_to_dict(self.dsn)
        if params.get("user") in (OWNER_ROLE, WRITER_ROLE) and not params.get("password"):
            return make_conninfo(self.dsn, user=READER_ROLE)
        return self.dsn

    @property
    def masked_dsn(self) -> str:
        return mask_dsn(self.dsn)

    def connect(self, **kwargs) -> psycopg.Connection:
        try:
            return psycopg.connect(self.dsn, **kwargs)
        except psycopg.Error as exc:
            raise UsageError(f"cannot connect to database: {str(exc).strip().splitlines()[0]}") from None

    # -- migrations ---------------------------------------------------------------
    def migrate(self, schema_dir: Path = SCHEMA_DIR) -> list[str]:
        """Apply pending migrations, each in its own transaction. Returns names applied.

        Each applied file's SHA-256 is recorded; a file edited after it was applied is
        refused (MigrationError naming it) before anything runs. Then procrastinate's
        schema (the job queue) is created, or upgraded with procrastinate's own migration
        files, recorded as ``procrastinate/<file>``. When nothing is pending this only
        reads (the writer and reader roles may call it). A failing migration is rolled
        back (the database stays as it was) and raises :class:`MigrationError` naming
        the file.
        """
        files = migration_files(schema_dir)
        sums = {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in files}
        queue_files = procrastinate_migration_files() if schema_dir == SCHEMA_DIR else []
        applied: list[str] = []
        with self.connect(autocommit=True) as conn:
            recorded = _recorded(conn)
            if recorded is not None:
                _check_sums(recorded, sums)
                if all(recorded.get(n) for n in sums) and all(f"procrastinate/{q.name}" in recorded
                                                              for q in queue_files):
                    return []  # nothing to do: no lock, no write
            with conn.transaction():  # parallel `db up`: one creates the table, the others wait
                conn.execute("SELECT pg_advisory_xact_lock(727274)")
                conn.execute(
                    "CREATE TABLE IF NOT EXISTS schema_migrations ("
                    " version text PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now(), checksum text)"
                )
                if not conn.execute("SELECT 1 FROM information_schema.columns WHERE table_name = 'schema_migrations'"
                                    " AND column_name = 'checksum' AND table_schema = current_schema()").fetchone():
                    conn.execute("ALTER TABLE schema_migrations ADD COLUMN checksum text")
                recorded = _recorded(conn) or {}
                _check_sums(recorded, sums)
                for name, checksum in recorded.items():
                    if name in sums and checksum is None:  # applied before checksums were recorded
                        conn.execute("UPDATE schema_migrations SET checksum = %s WHERE version = %s",
                                     (sums[name], name))
            done = set(recorded)
            for path in files:
                if path.name in done:
                    continue
                if self._apply(conn, path.name, path.read_text(), sums[path.name]):
                    applied.append(path.name)
            if queue_files:
                self._queue_schema(conn, queue_files)
        return applied

    @staticmethod
    def _apply(conn, name: str, sql: str, checksum: str, record: tuple[str, ...] = ()) -> bool:
        """Run ``sql`` and record ``name`` (and ``record``) in one transaction, unless a
        parallel process did. Returns whether it ran."""
        try:
            with conn.transaction():
                conn.execute("SELECT pg_advisory_xact_lock(727274)")
                if conn.execute("SELECT 1 FROM schema_migrations WHERE version = %s", (name,)).fetchone():
                    return False
                if sql:
                    conn.execute(sql)
                for version in (name, *record):
                    conn.execute("INSERT INTO schema_migrations (version, checksum) VALUES (%s, %s)"
                                 " ON CONFLICT (version) DO NOTHING", (version, checksum))
        except psycopg.Error as exc:
            msg = (exc.diag.message_primary or str(exc)).strip()
            raise MigrationError(name, msg) from None
        return True

    def _queue_schema(self, conn, queue_files: list[Path]) -> None:
        """procrastinate's schema: created whole when missing (its migrations then count as
        applied), else its migration files not yet recorded are applied in order."""
        names = [f"procrastinate/{q.name}" for q in queue_files]
        recorded = _recorded(conn) or {}
        if all(n in recorded for n in names):
            return
        has_queue = conn.execute("SELECT to_regclass('procrastinate_jobs') IS NOT NULL").fetchone()[0]
        if not has_queue or not any(v.startswith("procrastinate/") for v in recorded):
            # created now from the whole schema, or earlier by a version that recorded
            # nothing (then it was this installed version's schema): all are applied
            schema = queue_files[0].parent.parent / "schema.sql"
            self._apply(conn, "procrastinate/schema.sql", "" if has_queue else schema.read_text(),
                        hashlib.sha256(schema.read_bytes()).hexdigest(), tuple(names))
            return
        for q, name in zip(queue_files, names):
            if name not in recorded:
                self._apply(conn, name, q.read_text(), hashlib.sha256(q.read_bytes()).hexdigest())

    def status(self) -> dict:
        """Server version, applied migrations and row counts of the core tables."""
        with self.connect() as conn:
            version = conn.execute("SHOW server_version").fetchone()[0]  # type: ignore[index]  # one row
            has = conn.execute("SELECT to_regclass('schema_migrations') IS NOT NULL").fetchone()[0]  # type: ignore[index]  # one row
            applied = [r[0] for r in conn.execute("SELECT version FROM schema_migrations ORDER BY 1")] if has else []
            pending = [p.name for p in migration_files() if p.name not in applied]
            counts = {}
            for table in ("target_list", "target", "scan_run"):
                if conn.execute("SELECT to_regclass(%s) IS NOT NULL", (table,)).fetchone()[0]:  # type: ignore[index]  # one row
                    counts[table] = conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0]  # type: ignore[index]  # one row
        return {
            "dsn": self.masked_dsn,
            "embedded": self.embedded_dir is not None,
            "server_version": version,
            "applied": applied,
            "pending": pending,
            "rows": counts,
        }


def _recorded(conn) -> Optional[dict]:
    """version -> checksum of schema_migrations (None if the table is missing)."""
    if not conn.execute("SELECT to_regclass('schema_migrations') IS NOT NULL").fetchone()[0]:
        return None
    has_sum = conn.execute("SELECT 1 FROM information_schema.columns WHERE table_name = 'schema_migrations'"
                           " AND column_name = 'checksum' AND table_schema = current_schema()").fetchone()
    query = ("SELECT version, checksum FROM schema_migrations" if has_sum
             else "SELECT version, NULL FROM schema_migrations")
    rows = dict(conn.execute(query).fetchall())
    conn.commit() if not conn.autocommit else None
    return rows


def _check_sums(recorded: dict, sums: dict) -> None:
    for name, checksum in recorded.items():
        if name in sums and checksum is not None and checksum != sums[name]:
            raise MigrationError(name, "was edited after it was applied (its SHA-256 differs from the one "
                                       "recorded); restore it and put the change in a new migration")


def procrastinate_migration_files() -> list[Path]:
    """procrastinate's own migration files, in the order its versions apply them."""
    import importlib.util

    spec = importlib.util.find_spec("procrastinate")
    if spec is None or not spec.submodule_search_locations:
        return []
    base = Path(list(spec.submodule_search_locations)[0]) / "sql"
    return sorted((base / "migrations").glob("*.sql"))


def migration_files(schema_dir: Path = SCHEMA_DIR) -> list[Path]:
    files = sorted(p for p in schema_dir.glob("*.sql"))
    for p in files:
        if not _MIGRATION_NAME.match(p.name):
            raise MigrationError(p.name, "migration files must be named NNNN_name.sql")
    return files


def stop_embedded(data_dir: Path) -> bool:
    """Stop the embedded server if it runs. Returns True if one was stopped."""
    from . import embedded

    return embedded.stop(Path(data_dir))
