"""Rows out of ``netsurvey sql``: valid CSV and JSON for any query, streamed.

Values are encoded the same way whatever the query:

=============  =====================================  =========================================
PostgreSQL     CSV (RFC 4180)                         JSON / JSON lines
=============  =====================================  =========================================
NULL           empty field                            null
boolean        true / false                           true / false
integer        digits                                 number
numeric        exact decimal text                     number (integral: exact; else float64);
                                                      NaN -> null
float          shortest repr; NaN, Infinity,          number; NaN, Infinity, -Infinity -> null
               -Infinity as PostgreSQL writes them    (JSON has no such numbers)
bytea          \\x + lower-case hex (PostgreSQL's)     "\\x..." string
timestamptz    ISO 8601 in UTC (…+00:00)              the same string
date, time     ISO 8601                               the same string
json, jsonb    JSON text                              the JSON value itself (nested)
arrays         JSON array text, e.g. ["a","b"]        JSON array
inet, uuid,    PostgreSQL's text form                 string
interval, …
=============  =====================================  =========================================

Rows come from :meth:`psycopg.Cursor.stream` (libpq's single-row/chunked mode), so memory
does not grow with the result, and the extended protocol still allows exactly one
statement.
"""
from __future__ import annotations

import csv
import datetime as dt
import decimal
import json
import math
import sys
from pathlib import Path
from typing import IO, Any, Generator, Iterable, Optional, Sequence

from .errors import UsageError

FORMATS = ("table", "csv", "json", "jsonl")
STREAM_CHUNK_ROWS = 1000


def read_query(query: Optional[str], file: Optional[Path], stdin: IO[str] = sys.stdin) -> str:
    """The query from the argument, ``-`` (stdin) or ``-f FILE``; exactly one source."""
    if file is not None and query is not None:
        raise UsageError("give the query either as an argument or with -f, not both")
    src = str(file) if file is not None else query
    try:
        if src == "-":
            text = stdin.read()
        elif file is not None and not file.is_file():
            raise UsageError(f"{file}: " + ("not a regular file" if file.exists() else "file not found"))
        elif file is not None:
            text = file.read_text(encoding="utf-8")
        elif query is None:
            raise UsageError("no query: give one as an argument, '-' for stdin or -f FILE")
        else:
            text = query
        text.encode("utf-8")   # argv and a C-locale stdin carry bad bytes as surrogates
    except (UnicodeDecodeError, UnicodeEncodeError) as exc:   # were internal errors (review attack, issue 20)
        where = "stdin" if src == "-" else "the query" if file is None else src
        raise UsageError(f"{where}: not UTF-8 text (at offset {exc.start})") from None
    text = text.strip()
    while text.endswith(";"):          # a trailing ';' (as in a .sql file) is not a second statement
        text = text[:-1].rstrip()
    if not text:
        raise UsageError("the query is empty")
    return text


# -- values ----------------------------------------------------------------------------
def _utc(v: dt.datetime) -> str:
    return (v.astimezone(dt.timezone.utc) if v.tzinfo else v).isoformat()


def _float_text(v: float) -> str:
    if math.isnan(v):
        return "NaN"
    if math.isinf(v):
        return "Infinity" if v > 0 else "-Infinity"
    return repr(v)


def json_value(v: Any) -> Any:
    """A value json.dumps writes as valid JSON (see the table above)."""
    if v is None or isinstance(v, (bool, int, str)):
        return v
    if isinstance(v, float):
        return None if math.isnan(v) or math.isinf(v) else v
    if isinstance(v, decimal.Decimal):
        if not v.is_finite():
            return None
        return int(v) if v == v.to_integral_value() else float(v)
    if isinstance(v, (bytes, bytearray, memoryview)):
        return "\\x" + bytes(v).hex()
    if isinstance(v, dt.datetime):
        return _utc(v)
    if isinstance(v, (dt.date, dt.time)):
        return v.isoformat()
    if isinstance(v, (list, tuple)):
        return [json_value(x) for x in v]
    if isinstance(v, dict):
        return {str(k): json_value(x) for k, x in v.items()}
    return str(v)   # inet, uuid, timedelta, ranges, ...


def csv_value(v: Any) -> str:
    """One CSV field's text (see the table above); the csv module does the quoting."""
    if v is None:
        return ""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        return _float_text(v)
    if isinstance(v, (bytes, bytearray, memoryview)):
        return "\\x" + bytes(v).hex()
    if isinstance(v, dt.datetime):
        return _utc(v)
    if isinstance(v, (dt.date, dt.time)):
        return v.isoformat()
    if isinstance(v, (list, tuple, dict)):
        return dumps(v)
    return str(v)


def dumps(v: Any) -> str:
    return json.dumps(json_value(v), ensure_ascii=False, allow_nan=False, separators=(",", ":"))


# -- rows ------------------------------------------------------------------------------
def json_columns(cur) -> list[int]:
    return [i for i, d in enumerate(cur.description or ()) if d.type_code in JSON_OIDS]


def _describe(conn, query: str) -> list[str] | None:
    """Column names of ``query`` as the server describes it (None: it returns no rows)."""
    pg = conn.pgconn
    res = pg.prepare(b"", query.encode(conn.info.encoding))
    if res.error_message:
        return None
    d = pg.describe_prepared(b"")
    return [d.fname(i).decode() for i in range(d.nfields)] if d.nfields else None


def stream(cur, query: str) -> tuple[list[str], Generator[tuple, None, None]]:
    """Start ``query`` on ``cur`` and return (column names, row iterator). The query is
    sent with the extended protocol (one statement only). Errors raise UsageError."""
    import psycopg

    # chunks of rows need libpq 17 (psycopg[binary] ships 17+); older: single-row mode
    it = cur.stream(query, size=STREAM_CHUNK_ROWS if psycopg.pq.version() >= 170000 else 1)
    try:
        first = next(it, None)
    except psycopg.Error as exc:
        raise UsageError(f"query failed: {(exc.diag.message_primary or str(exc)).strip()}") from None
    cols: Optional[list[str]]
    if cur.description is not None:
        cols = [d.name for d in cur.description]
    else:   # no row came: a SELECT with an empty result, or a statement without rows
        cols = _describe(cur.connection, query)
        if cols is None:
            raise UsageError("query returned no rows (only read-only queries are allowed)")

    def rows() -> Generator[tuple, None, None]:
        if first is None:
            return
        yield first
        try:
            yield from it
        except psycopg.Error as exc:
            raise UsageError(f"query failed: {(exc.diag.message_primary or str(exc)).strip()}") from None
    return cols, rows()


JSON_OIDS = (114, 3802)   # json, jsonb


def write_csv(cols: Sequence[str], rows: Iterable[Sequence[Any]], fh: IO[str], json_cols: Sequence[int] = ()) -> int:
    """RFC 4180 CSV with a header; ``json_cols`` (indexes of json/jsonb columns) are
    written as JSON text even when the value is a bare string or number."""
    w = csv.writer(fh, lineterminator="\n")
    w.writerow(cols)
    js = set(json_cols)
    n = 0
    for r in rows:
        w.writerow([("" if v is None else dumps(v)) if i in js else csv_value(v) for i, v in enumerate(r)])
        n += 1
    return n


def write_json(cols: Sequence[str], rows: Iterable[Sequence[Any]], fh: IO[str], lines: bool = False) -> int:
    """A JSON array of objects (written as rows arrive), or JSON lines with ``lines``."""
    n = 0
    if not lines:
        fh.write("[")
    for r in rows:
        obj = dumps(dict(zip(cols, r)))
        fh.write(obj + "\n" if lines else ("," if n else "") + "\n" + obj)
        n += 1
    if not lines:
        fh.write("\n]\n" if n else "]\n")
    return n
