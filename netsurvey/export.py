"""``netsurvey export --run ID``: the rows of one run as a citable dataset.

One file per table that has a ``run_id`` column (found in the database's catalog, so
tables added by later migrations are exported without a change here), holding that run's
rows, plus the rows of the target list the run read (``target``, when its parameters name a
list) and ``manifest.json``: the run's parameters, vantage, tool versions and counts, the
target list, the exporter's versions, per file the row count, size, SHA-256 and the column
types and comments (the data dictionary travels with the data).

Encodings, the same in every format:

* bytea: lower-case hex without prefix (``a1b2...``)
* timestamptz: ISO 8601 in UTC (``2026-11-23T23:49:44.123456+00:00``; Parquet: timestamp[us, UTC])
* jsonb/json: JSON (JSONL: nested values; CSV and Parquet: JSON text)
* arrays: JSON arrays (JSONL: nested; CSV: JSON text; Parquet: a list column)
* numeric: a number (Parquet: float64); float NaN/Infinity: the strings "NaN", "Infinity"
  in JSONL (JSON has no such numbers), as PostgreSQL writes them in CSV, IEEE values in Parquet
* inet: the address (``198.18.0.1``; with ``/len`` only for a network); every other
  type: PostgreSQL's text form

Memory stays bounded whatever the run's size: CSV streams through ``COPY ... TO STDOUT``
in the server's chunks, JSONL and Parquet through a server-side cursor fetched
``batch_rows`` rows at a time (one Parquet row group per batch). Every table is read in
one REPEATABLE READ snapshot, so row counts and files agree.
"""
from __future__ import annotations

import datetime as dt
import hashlib
import json
import os
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator, Optional, Sequence

import psycopg
import typer
from psycopg import sql

from .db import Database
from .errors import UsageError
from .options import json_option

FORMATS = ("jsonl", "parquet", "csv")
BATCH_ROWS = 10_000
MANIFEST_FORMAT = "netsurvey-export/1"

ENCODING_NOTES = {
    "bytea": "lower-case hex, no prefix",
    "timestamptz": "ISO 8601, UTC (+00:00); Parquet timestamp[us, tz=UTC]",
    "json/jsonb": "JSON (nested in JSONL, JSON text in CSV and Parquet)",
    "arrays": "JSON arrays (nested in JSONL, JSON text in CSV, list columns in Parquet)",
    "numeric": "number (float64 in Parquet)",
    "float NaN/Infinity": "\"NaN\"/\"Infinity\" strings in JSONL, NaN/Infinity in CSV, IEEE in Parquet",
    "inet": "address text, /len only when not a single host",
    "other types (interval, ...)": "PostgreSQL text form",
    "null": "JSON null; empty unquoted CSV field; Parquet null",
}


@dataclass(frozen=True)
class Column:
    name: str
    type: str          # format_type(), e.g. "timestamp with time zone", "text[]"
    base: str          # pg_type.typname of the column, or of the element for arrays
    is_array: bool
    comment: Optional[str]


@dataclass
class TableExport:
    table: str
    file: str
    rows: int = 0
    bytes: int = 0
    sha256: str = ""
    batches: int = 0
    columns: list[Column] = field(default_factory=list)


_INT32 = {"int2", "int4"}
_FLOAT = {"float4", "float8", "numeric"}
_PLAIN_JSON = {"bool", "int2", "int4", "int8", "float4", "float8", "numeric", "text", "varchar", "bpchar",
               "json", "jsonb", "timestamptz", "date"}


# -- the catalog ------------------------------------------------------------------------
def run_tables(conn: psycopg.Connection) -> list[str]:
    """Ordinary tables of the current schema that have a ``run_id`` column."""
    return [r[0] for r in conn.execute(
        """SELECT c.relname FROM pg_class c
           JOIN pg_attribute a ON a.attrelid = c.oid AND a.attname = 'run_id' AND NOT a.attisdropped
           WHERE c.relnamespace = current_schema()::regnamespace AND c.relkind IN ('r', 'p')
           ORDER BY c.relname""")]


def run_relations(conn: psycopg.Connection) -> list[str]:
    """Tables and views of the current schema that have a ``run_id`` column (``--table``)."""
    return [r[0] for r in conn.execute(
        """SELECT c.relname FROM pg_class c
           JOIN pg_attribute a ON a.attrelid = c.oid AND a.attname = 'run_id' AND NOT a.attisdropped
           WHERE c.relnamespace = current_schema()::regnamespace AND c.relkind IN ('r', 'p', 'v', 'm')
           ORDER BY c.relname""")]


def columns_of(conn: psycopg.Connection, relation: str) -> list[Column]:
    rows = conn.execute(
        """SELECT a.attname, format_type(a.atttypid, a.atttypmod),
                  coalesce(et.typname, t.typname), et.oid IS NOT NULL,
                  col_description(a.attrelid, a.attnum)
           FROM pg_attribute a JOIN pg_type t ON t.oid = a.atttypid
           LEFT JOIN pg_type et ON et.oid = t.typelem AND t.typcategory = 'A'
           WHERE a.attrelid = %s::regclass AND a.attnum > 0 AND NOT a.attisdropped
           ORDER BY a.attnum""", (relation,)).fetchall()
    return [Column(*r) for r in rows]


# -- per-format select lists -------------------------------------------------------------
def _expr(col: Column, fmt: str) -> sql.Composable:
    c = sql.Identifier(col.name)
    if col.is_array:
        if fmt == "jsonl":
            return c if col.base in _PLAIN_JSON else sql.SQL("{}::text[]").format(c)
        if fmt == "parquet" and col.base in (_INT32 | _FLOAT | {"int8", "bool"}):
            return sql.SQL("{}::float8[]").format(c) if col.base == "numeric" else c
        if fmt == "parquet":
            return sql.SQL("{}::text[]").format(c)
        return sql.SQL("to_json({})::text").format(c)      # csv
    if col.base == "bytea":
        return sql.SQL("encode({}, 'hex')").format(c)
    if col.base in ("json", "jsonb"):
        return c if fmt == "jsonl" else sql.SQL("{}::text").format(c)
    if col.base in ("timestamptz", "timestamp"):
        return sql.SQL("to_json({}) #>> '{{}}'").format(c) if fmt == "csv" else c
    if fmt == "parquet" and col.base == "numeric":
        return sql.SQL("{}::float8").format(c)
    if col.base in _PLAIN_JSON or col.base == "date":
        return c
    if col.base == "inet":              # 198.18.0.1, not 198.18.0.1/32 (a network keeps its /len)
        return sql.SQL("abbrev({})").format(c)
    return sql.SQL("{}::text").format(c)


def _select(relation: str, cols: Sequence[Column], fmt: str, where: sql.Composable) -> sql.Composed:
    items = sql.SQL(", ").join(sql.SQL("{} AS {}").format(_expr(c, fmt), sql.Identifier(c.name)) for c in cols)
    return sql.SQL("SELECT {} FROM {} WHERE {}").format(items, sql.Identifier(relation), where)


def _arrow_type(col: Column):
    import pyarrow as pa

    scalar = {"bool": pa.bool_(), "int2": pa.int32(), "int4": pa.int32(), "int8": pa.int64(),
              "float4": pa.float64(), "float8": pa.float64(), "numeric": pa.float64(),
              "timestamptz": pa.timestamp("us", tz="UTC"), "timestamp": pa.timestamp("us"),
              "date": pa.date32()}.get(col.base, pa.string())
    if col.is_array:
        return pa.list_(scalar if col.base in (_INT32 | _FLOAT | {"int8", "bool"}) else pa.string())
    return scalar


def arrow_schema(cols: Sequence[Column]):
    import pyarrow as pa

    return pa.schema([pa.field(c.name, _arrow_type(c), metadata={"pg_type": c.type, "comment": c.comment or ""})
                      for c in cols])


# -- streaming ---------------------------------------------------------------------------
class _HashingFile:
    """A binary file that hashes and counts what is written to it."""

    def __init__(self, path: Path):
        self.fh = path.open("wb")
        self.sha = hashlib.sha256()
        self.bytes = 0

    def write(self, b: bytes) -> None:
        self.fh.write(b)
        self.sha.update(b)
        self.bytes += len(b)

    def close(self) -> None:
        self.fh.close()


def _batches(conn: psycopg.Connection, query: sql.Composed, batch_rows: int) -> Iterator[list[tuple]]:
    """Rows of ``query`` through a server-side cursor, ``batch_rows`` at a time."""
    with conn.cursor(name="netsurvey_export") as cur:
        cur.itersize = batch_rows
        cur.execute(query)
        while True:
            rows = cur.fetchmany(batch_rows)
            if not rows:
                return
            yield rows


def _write_csv(conn, relation, cols, where, path: Path, t: TableExport) -> None:
    q = sql.SQL("COPY ({}) TO STDOUT WITH (FORMAT csv, HEADER true)").format(_select(relation, cols, "csv", where))
    f = _HashingFile(path)
    try:
        with conn.cursor() as cur, cur.copy(q) as copy:
            for chunk in copy:          # the server's chunks, never the whole table
                f.write(bytes(chunk))
                t.batches += 1
    finally:
        f.close()
    t.rows = conn.execute(sql.SQL("SELECT count(*) FROM {} WHERE {}").format(sql.Identifier(relation), where)
                          ).fetchone()[0]
    t.bytes, t.sha256 = f.bytes, f.sha.hexdigest()


def _write_jsonl(conn, relation, cols, where, path: Path, t: TableExport, batch_rows: int) -> None:
    q = sql.SQL("SELECT row_to_json(r)::text FROM ({}) r").format(_select(relation, cols, "jsonl", where))
    f = _HashingFile(path)
    try:
        for rows in _batches(conn, q, batch_rows):
            f.write("".join(r[0] + "\n" for r in rows).encode())
            t.rows += len(rows)
            t.batches += 1
    finally:
        f.close()
    t.bytes, t.sha256 = f.bytes, f.sha.hexdigest()


def arrow_tables(conn, relation: str, cols: Sequence[Column], where: sql.Composable, batch_rows: int = BATCH_ROWS):
    """The rows as pyarrow Tables of at most ``batch_rows`` rows (server-side cursor)."""
    import pyarrow as pa

    schema = arrow_schema(cols)
    for rows in _batches(conn, _select(relation, cols, "parquet", where), batch_rows):
        columns = list(zip(*rows))      # column-wise: ~2x faster than from_pylist over dicts
        yield pa.Table.from_arrays([pa.array(col, type=f.type) for col, f in zip(columns, schema)], schema=schema)


def _write_parquet(conn, relation, cols, where, path: Path, t: TableExport, batch_rows: int) -> None:
    import pyarrow.parquet as pq

    schema = arrow_schema(cols)
    with pq.ParquetWriter(path, schema, compression="zstd") as w:
        for table in arrow_tables(conn, relation, cols, where, batch_rows):
            w.write_table(table)
            t.rows += table.num_rows
            t.batches += 1
        if t.rows == 0:
            w.write_table(schema.empty_table())
    t.bytes, t.sha256 = path.stat().st_size, sha256_file(path)


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


# -- the run and its context -------------------------------------------------------------
def _iso(v) -> Any:
    if isinstance(v, dt.datetime):
        return v.astimezone(dt.timezone.utc).isoformat()
    if isinstance(v, dt.date):
        return v.isoformat()
    return v


def run_row(conn: psycopg.Connection, run_id: int) -> dict | None:
    cur = conn.execute("SELECT * FROM scan_run WHERE id = %s", (run_id,))
    row = cur.fetchone()
    if row is None:
        return None
    return {d.name: _iso(v) for d, v in zip(cur.description, row)}  # type: ignore[arg-type]  # a row came: described


def target_list_of(conn: psycopg.Connection, run: dict) -> dict | None:
    """The import of the list named in the run's parameters that was newest when the run
    started (the one ``select_targets`` read), with ``top`` when the run used a cut."""
    params = run.get("parameters") or {}
    name = params.get("list") if isinstance(params, dict) else None
    if not name:
        return None
    cur = conn.execute(
        "SELECT id, name, list_date, source, imported_at, n_targets FROM target_list"
        " WHERE name = %s AND imported_at <= %s::timestamptz ORDER BY list_date DESC, id DESC LIMIT 1",
        (name, run["started_at"]))
    row = cur.fetchone()
    if row is None:
        return {"name": name, "id": None, "note": "no import of this list older than the run is in the database"}
    out = {d.name: _iso(v) for d, v in zip(cur.description, row)}  # type: ignore[arg-type]  # a row came: described
    out["top"] = params.get("top")
    return out


def _git_commit() -> Optional[str]:
    try:
        r = subprocess.run(["git", "-C", str(Path(__file__).resolve().parent), "rev-parse", "HEAD"],
                           capture_output=True, text=True, timeout=5)
    except (OSError, subprocess.SubprocessError):
        return None
    return r.stdout.strip() or None if r.returncode == 0 else None


def exporter_versions(conn: psycopg.Connection, fmt: str) -> dict:
    import platform
    from importlib import metadata

    out = {"netsurvey": metadata.version("netsurvey"), "git_commit": _git_commit(),
           "python": platform.python_version(), "psycopg": psycopg.__version__,
           "postgresql": conn.execute("SHOW server_version").fetchone()[0],  # type: ignore[index]  # one row
           "schema_migrations": [r[0] for r in conn.execute("SELECT version FROM schema_migrations ORDER BY 1")]}
    if fmt == "parquet":
        import pyarrow

        out["pyarrow"] = pyarrow.__version__
    return out


# -- the command -------------------------------------------------------------------------
def check_out_dir(out_dir: Path) -> None:
    """``--out`` must be a new or an empty directory that can be made where it is named:
    refused (UsageError) before anything is written, also below a file, through a dangling
    or looping symbolic link, or with a name longer than the file system takes."""
    try:
        if out_dir.is_symlink() and not out_dir.exists():
            raise UsageError(f"--out: {out_dir} is a symbolic link to nothing (dangling or a loop)")
        if out_dir.exists():
            if not out_dir.is_dir() or any(out_dir.iterdir()):
                raise UsageError(f"--out: {out_dir} exists and is not an empty directory")
            return
        for parent in out_dir.absolute().parents:
            if parent.is_symlink() and not parent.exists():
                raise UsageError(f"--out: {parent} is a symbolic link to nothing (dangling or a loop)")
            if parent.exists():
                if not parent.is_dir():
                    raise UsageError(f"--out: {parent} is not a directory")
                name_max = os.pathconf(parent, "PC_NAME_MAX")
                below = out_dir.absolute().relative_to(parent).parts
                if any(len(os.fsencode(part)) > name_max for part in below):
                    raise UsageError(f"--out: a name in {out_dir} is longer than {name_max} bytes")
                break
    except OSError as exc:
        raise UsageError(f"--out: {out_dir}: {exc.strerror or exc}") from None


def export_run(db: Database, run_id: int, out_dir: Path, fmt: str, tables: Sequence[str] = (),
               batch_rows: int = BATCH_ROWS) -> dict:
    """Write the run's rows and ``manifest.json`` into ``out_dir``; returns the manifest.
    Bad input raises UsageError before anything is written."""
    if fmt not in FORMATS:
        raise UsageError(f"--format: {fmt!r} is not one of {', '.join(FORMATS)}")
    if batch_rows < 1:
        raise UsageError("batch size must be at least 1 row")
    if fmt == "parquet":
        try:
            import pyarrow.parquet  # noqa: F401
        except ImportError:
            raise UsageError("--format parquet needs pyarrow (pip install pyarrow)") from None
    check_out_dir(out_dir)
    with db.connect() as conn:
        conn.isolation_level = psycopg.IsolationLevel.REPEATABLE_READ
        conn.read_only = True
        conn.execute("SET TIME ZONE 'UTC'")
        conn.execute("SET extra_float_digits = 3")
        run = run_row(conn, run_id)
        if run is None:
            raise UsageError(f"--run: no scan_run with id {run_id}")
        known = run_relations(conn)
        bad = [t for t in tables if t not in known]
        if bad:
            raise UsageError(f"--table: {', '.join(bad)} has no run_id column (tables: {', '.join(run_tables(conn))})")
        chosen = list(dict.fromkeys(tables)) or run_tables(conn)
        tlist = target_list_of(conn, run)
        jobs: list[tuple[str, sql.Composable]] = [
            (t, sql.SQL("run_id = {}").format(sql.Literal(run_id))) for t in chosen]
        if not tables and tlist and tlist.get("id") is not None:
            where: sql.Composable = sql.SQL("list_id = {}").format(sql.Literal(tlist["id"]))
            if isinstance(tlist.get("top"), int):
                where = sql.SQL("{} AND rank <= {}").format(where, sql.Literal(tlist["top"]))
            jobs.append(("target", where))
        try:
            out_dir.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise UsageError(f"--out: {out_dir}: {exc.strerror or exc}") from None
        results: list[TableExport] = []
        try:
            for relation, where in jobs:
                cols = columns_of(conn, relation)
                t = TableExport(relation, f"{relation}.{fmt}", columns=cols)
                path = out_dir / t.file
                if fmt == "csv":
                    _write_csv(conn, relation, cols, where, path, t)
                elif fmt == "jsonl":
                    _write_jsonl(conn, relation, cols, where, path, t, batch_rows)
                else:
                    _write_parquet(conn, relation, cols, where, path, t, batch_rows)
                results.append(t)
            manifest = {
                "format": MANIFEST_FORMAT,
                "created_at": dt.datetime.now(dt.timezone.utc).isoformat(),
                "file_format": fmt,
                "run": run,
                "target_list": tlist,
                "exporter": exporter_versions(conn, fmt),
                "encoding": ENCODING_NOTES,
                "files": [{"table": t.table, "file": t.file, "rows": t.rows, "bytes": t.bytes,
                           "sha256": t.sha256,
                           "columns": [{"name": c.name, "type": c.type, "comment": c.comment} for c in t.columns]}
                          for t in results],
            }
        except BaseException:
            shutil.rmtree(out_dir, ignore_errors=True)   # nothing half-written stays behind
            raise
        conn.rollback()
    tmp = out_dir / ".manifest.json.tmp"
    tmp.write_text(json.dumps(manifest, indent=2, default=str) + "\n")
    os.replace(tmp, out_dir / "manifest.json")
    manifest["_batches"] = {t.table: t.batches for t in results}
    return manifest


# -- the command (registered by netsurvey.cli) ---------------------------------------------

def export_command(
    run: int = typer.Option(..., "--run", help="scan_run id to export."),
    tables: list[str] = typer.Option([], "--table", help="Only this table or view (repeatable; default: every table with a run_id column)."),
    fmt: str = typer.Option("parquet", "--format", help="jsonl, parquet or csv."),
    out_dir: Path = typer.Option(..., "--out", help="New or empty directory for the files and manifest.json."),
    as_json: bool = json_option(help="Print the manifest as JSON."),
) -> None:
    """Write one run's rows (one file per table) and manifest.json with checksums; streams."""
    from .clictx import migrated_db

    manifest = export_run(migrated_db(create=False), run, out_dir, fmt, tables)   # a run: never a new database
    manifest.pop("_batches", None)
    if as_json:
        print(json.dumps(manifest, default=str))
        return
    for f in manifest["files"]:
        print(f"{out_dir / f['file']}: {f['rows']} rows")
    print(out_dir / "manifest.json")
