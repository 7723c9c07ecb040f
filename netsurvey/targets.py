"""Top lists: streaming import of Tranco/Alexa ``rank,domain`` CSV (plain or zipped) and
selection of the top N targets for scanners.

Import streams the file into a temporary staging table with COPY (a 1M-line list is never
held in memory), normalises names (lower case, IDNA A-labels, no trailing dot), skips
blank and ``#`` comment lines, reports malformed lines with their line numbers and
de-duplicates (the first occurrence of a hostname or rank wins). If more than
``max_bad_share`` of the lines are malformed nothing is imported.
"""
from __future__ import annotations

import contextlib
import datetime as dt
import io
import re
import sys
import zipfile
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterator, Optional

import idna

from .db import Database
from .errors import UsageError

_LABEL_OK = re.compile(r"^[a-z0-9_]([a-z0-9_-]{0,61}[a-z0-9_])?$")


@dataclass(frozen=True)
class BadLine:
    """A malformed line: 1-based line number, the reason and the text (truncated)."""

    line_no: int
    reason: str
    text: str


@dataclass
class ImportReport:
    """What an import did. Counts are lines / rows."""

    list_id: Optional[int]
    name: str
    list_date: dt.date
    lines: int = 0            # non-blank, non-comment lines read
    imported: int = 0         # rows in target
    duplicates: int = 0       # lines skipped because hostname or rank repeated
    bad: list[BadLine] = field(default_factory=list)  # first 1000 bad lines
    n_bad: int = 0


def normalize_hostname(raw: str) -> str:
    """Lower-case, IDNA (UTS-46) encode and validate one hostname. Raises ValueError."""
    name = raw.strip().rstrip(".")
    if not name:
        raise ValueError("empty hostname")
    if any(c.isspace() for c in name):
        raise ValueError("hostname contains whitespace")
    if name.isascii():
        name = name.lower()
    else:
        try:
            name = idna.encode(name, uts46=True).decode("ascii")
        except idna.IDNAError as exc:
            raise ValueError(f"invalid IDN: {exc}") from None
    if len(name) > 253:
        raise ValueError("hostname longer than 253 characters")
    for label in name.split("."):
        if not _LABEL_OK.match(label):
            raise ValueError(f"invalid label {label!r}")
    return name


@contextlib.contextmanager
def _read_errors(path: Path):
    """A damaged archive or an unreadable file is bad input: one line, nothing imported
    (raised inside the import's transaction, which is rolled back)."""
    try:
        yield
    except (zipfile.BadZipFile, zlib.error, EOFError) as exc:
        raise UsageError(f"{path}: damaged zip archive: {exc}") from None
    except OSError as exc:
        raise UsageError(f"{path}: cannot read: {exc.strerror or exc}") from None


def _open_text(path: Path) -> tuple[io.TextIOBase, int]:
    """Open plain or zipped CSV as text; returns (stream, total bytes for progress)."""
    with _read_errors(path):
        return _open_text_unchecked(path)


def _open_text_unchecked(path: Path) -> tuple[io.TextIOBase, int]:
    if zipfile.is_zipfile(path):
        zf = zipfile.ZipFile(path)
        names = [n for n in zf.namelist() if n.lower().endswith(".csv")]
        if not names:
            raise UsageError(f"{path}: zip archive holds no .csv file")
        member = "top-1m.csv" if "top-1m.csv" in names else names[0]
        info = zf.getinfo(member)
        return io.TextIOWrapper(zf.open(member), encoding="utf-8", errors="replace"), info.file_size
    return path.open("r", encoding="utf-8", errors="replace"), path.stat().st_size


def _is_rank(s: str) -> bool:
    """ASCII digits only (str.isdigit also accepts '²' and other digits int() refuses)."""
    return s.isascii() and s.isdigit()


def parse_lines(stream: io.TextIOBase, report: ImportReport, on_bytes: Callable[[int], None] | None = None
                ) -> Iterator[tuple[int, int, str]]:
    """Yield (line_no, rank, hostname) of good lines; record bad ones in ``report``."""
    for line_no, line in enumerate(stream, start=1):
        if on_bytes is not None:
            on_bytes(len(line))
        text = line.strip()
        if not text or text.startswith("#"):
            continue
        report.lines += 1
        parts = text.split(",")
        reason = None
        if len(parts) != 2:
            reason = "expected 'rank,domain'"
        else:
            rank_s, host_s = parts[0].strip(), parts[1].strip()
            if line_no == 1 and not _is_rank(rank_s):
                report.lines -= 1  # a header line such as 'rank,domain'
                continue
            if not _is_rank(rank_s) or int(rank_s) <= 0 or int(rank_s) > 2**31 - 1:
                reason = f"bad rank {rank_s[:20]!r}"
            else:
                try:
                    yield line_no, int(rank_s), normalize_hostname(host_s)
                    continue
                except ValueError as exc:
                    reason = str(exc)
        report.n_bad += 1
        if len(report.bad) < 1000:
            report.bad.append(BadLine(line_no, reason, text[:80]))


def import_list(
    db: Database,
    path: Path,
    name: str,
    list_date: Optional[dt.date] = None,
    *,
    max_bad_share: float = 0.01,
    replace: bool = False,
    progress: Callable[[int, int], None] | None = None,
) -> ImportReport:
    """Import ``path`` as list ``name`` (``-``: plain CSV from standard input). See module
    docstring. Raises UsageError on bad input."""
    stdin = str(path) == "-"
    if not stdin and not path.exists():
        raise UsageError(f"{path}: file not found")
    if not stdin and not path.is_file():
        raise UsageError(f"{path}: not a regular file")
    list_date = list_date or dt.date.today()
    report = ImportReport(list_id=None, name=name, list_date=list_date)
    stream: io.TextIOBase
    if stdin:   # streamed once; a zip needs seeking, so only plain CSV here
        stream, total = io.TextIOWrapper(sys.stdin.buffer, encoding="utf-8", errors="replace"), 0
    else:
        stream, total = _open_text(path)
    seen_bytes = 0

    def on_bytes(n: int) -> None:
        nonlocal seen_bytes
        seen_bytes += n
        if progress is not None and seen_bytes % 65536 < n:
            progress(seen_bytes, total)

    with db.connect() as conn, stream, _read_errors(path):
        with conn.transaction():
            existing = conn.execute(
                "SELECT id FROM target_list WHERE name = %s AND list_date = %s", (name, list_date)
            ).fetchone()
            if existing and not replace:
                raise UsageError(f"list {name!r} dated {list_date} already imported (use --replace)")
            if existing:
                conn.execute("DELETE FROM target_list WHERE id = %s", (existing[0],))
            conn.execute(
                "CREATE TEMP TABLE staging (line_no int, rank int, hostname text) ON COMMIT DROP"
            )
            with conn.cursor().copy("COPY staging (line_no, rank, hostname) FROM STDIN (FORMAT BINARY)") as cp:
                cp.set_types(["int4", "int4", "text"])
                for row in parse_lines(stream, report, on_bytes):
                    cp.write_row(row)
            if progress is not None:
                progress(total, total)
            if report.lines == 0:
                raise UsageError(f"{path}: no targets found")
            if report.n_bad > max_bad_share * report.lines:
                first = report.bad[0]
                raise UsageError(
                    f"{path}:{first.line_no}: {first.reason} ({report.n_bad} of {report.lines} lines bad,"
                    f" more than {max_bad_share:.1%}); nothing imported"
                )
            list_id = conn.execute(  # type: ignore[index]  # INSERT ... RETURNING: one row
                "INSERT INTO target_list (name, source, list_date) VALUES (%s, %s, %s) RETURNING id",
                (name, str(path), list_date),
            ).fetchone()[0]
            # First occurrence of a hostname, then of a rank, wins.
            imported = conn.execute(
                """
                INSERT INTO target (list_id, rank, hostname)
                SELECT %s, rank, hostname FROM (
                    SELECT DISTINCT ON (rank) rank, hostname, line_no FROM (
                        SELECT DISTINCT ON (hostname) rank, hostname, line_no
                        FROM staging ORDER BY hostname, line_no) h
                    ORDER BY rank, line_no) r
                ORDER BY line_no
                """,
                (list_id,),
            ).rowcount
            report.list_id = list_id
            report.imported = imported
            report.duplicates = report.lines - report.n_bad - imported
            conn.execute(
                "UPDATE target_list SET n_targets=%s, n_bad_lines=%s, n_duplicates=%s WHERE id=%s",
                (imported, report.n_bad, report.duplicates, list_id),
            )
    return report


@dataclass(frozen=True)
class Target:
    """One hostname of a list at its rank."""

    rank: int
    hostname: str


#: Rows fetched per round trip by the server-side cursor of :class:`TargetStream` (and the
#: size of the windows the run path works in: spread.py, the TFO engine's chunks).
STREAM_BATCH = 10_000

#: The shard of a hostname, in SQL: ``shard.shard_of`` (sha256's first 8 bytes, big-endian,
#: unsigned, mod count) for ``hostname`` (ASCII after normalize_hostname).
_SQL_SHARD = ("mod(('x' || encode(substr(sha256(convert_to(hostname, 'UTF8')), 1, 8), 'hex'))::bit(64)::bigint::numeric"
              " + 18446744073709551616, 18446744073709551616) %% %s")


class TargetStream:
    """The newest import of a list, ranks ascending, streamed (issue 26: a 1M-name list
    held as Python objects cost ~200 bytes a name before anything was probed).

    Iterating opens a connection and a server-side cursor and yields :class:`Target`
    rows ``STREAM_BATCH`` at a time; ``len()`` counts them in SQL. In a shard only the
    shard's names are selected (the shard hash in SQL, the same as ``shard.shard_of``),
    after the ``top`` cut, as the list version did. Each iteration reads the list again
    (a list is never changed once imported: a re-import makes a new list id)."""

    def __init__(self, db: Database, list_id: int, top: Optional[int], shard: Optional[tuple[int, int]]):
        self.db, self.list_id, self.top, self.shard = db, list_id, top, shard
        self._len: Optional[int] = None

    def _query(self, what: str) -> tuple[str, tuple]:
        sql = f"SELECT {what} FROM (SELECT rank, hostname FROM target WHERE list_id = %s ORDER BY rank LIMIT %s) t"
        args: tuple = (self.list_id, self.top)
        if self.shard is not None:
            sql += f" WHERE {_SQL_SHARD} = %s"
            args += (self.shard[1], self.shard[0])
        return sql, args

    def __len__(self) -> int:
        if self._len is None:
            sql, args = self._query("count(*)")
            with self.db.connect() as conn:
                self._len = conn.execute(sql, args).fetchone()[0]  # type: ignore[index]  # count(*): one row
        return self._len

    def __iter__(self) -> Iterator[Target]:
        sql, args = self._query("rank, hostname")
        with self.db.connect() as conn, conn.transaction():
            with conn.cursor(name="target_stream") as cur:
                cur.itersize = STREAM_BATCH
                cur.execute(sql + " ORDER BY rank", args)
                for r, h in cur:
                    yield Target(r, h)


def stream_targets(db: Database, name: str, top: Optional[int] = None, *, every_shard: bool = False) -> TargetStream:
    """The newest import of list ``name``, ranks ascending, first ``top`` only if given, as
    a :class:`TargetStream` (in a shard: the shard's names; with ``every_shard`` all of
    them, and the measurement takes its share of the work itself, then says so with
    :func:`netsurvey.shard.mark_filtered`)."""
    if top is not None and top <= 0:
        raise UsageError("--top must be a positive number")
    if top is not None and top > 2**31 - 1:
        raise UsageError(f"--top must be at most {2**31 - 1} (ranks are 32-bit)")
    with db.connect() as conn:
        row = conn.execute(
            "SELECT id FROM target_list WHERE name = %s ORDER BY list_date DESC, id DESC LIMIT 1", (name,)
        ).fetchone()
        if row is None:
            raise UsageError(f"no target list named {name!r} (import one with 'netsurvey targets import')")
    from . import shard

    spec = None if every_shard else shard.current()
    if spec is not None:
        shard.mark_filtered()
    return TargetStream(db, row[0], top, (spec.index, spec.count) if spec is not None else None)


def select_targets(db: Database, name: str, top: Optional[int] = None) -> list[Target]:
    """:func:`stream_targets` as a list (for the commands that need the names together:
    a survey's plan, the browsers' page lists)."""
    return list(stream_targets(db, name, top))
