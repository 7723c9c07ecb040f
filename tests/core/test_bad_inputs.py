"""Bad input, as a careless user gives it: one line on stderr, exit code 2, and the
database exactly as it was (issue 21's list, plus the cases tested elsewhere before)."""
from __future__ import annotations

import io
import zipfile
from pathlib import Path

import pytest

from conftest import REPO, run_cli

NAME = "tfo-support-table"  # any figure: the checks come before the figure runs


def _bad_crc_zip(path: Path) -> None:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("top-1m.csv", "".join(f"{i},h{i}.example.test\n" for i in range(1, 200)))
    data = bytearray(buf.getvalue())
    crc_at = data.rindex(b"PK\x01\x02") + 16  # the CRC-32 in the central directory entry
    data[crc_at] ^= 0xFF
    path.write_bytes(bytes(data))


def _files(tmp: Path) -> None:
    (tmp / "adir").mkdir()
    _bad_crc_zip(tmp / "badcrc.zip")
    (tmp / "superscript.csv").write_text("1,a.example.test\n\u00b2,b.example.test\n", encoding="utf-8")
    (tmp / "afile").write_text("precious\n")
    (tmp / "latin1.csv").write_bytes(b"0.1,0.2\n\xe9t\xe9,0.3\n")
    (tmp / "binary.sql").write_bytes(b"select '\xff\xfe'\n")
    (tmp / "empty.csv").write_bytes(b"")
    for name, value in (("huge", "1e400"), ("inf", "inf"), ("nan", "nan")):
        (tmp / f"rate-{name}.toml").write_text(f"[etiquette]\nrate_pps = {value}\n")


# (id, argv, a fragment of the one stderr line). {tmp} is the test's directory.
CASES = [
    ("import-directory", ["targets", "import", "{tmp}/adir", "--list", "x"], "not a regular file"),
    ("import-bad-crc-zip", ["targets", "import", "{tmp}/badcrc.zip", "--list", "x"], "damaged zip archive"),
    ("import-superscript-rank", ["targets", "import", "{tmp}/superscript.csv", "--list", "x"], "bad rank"),
    ("import-missing", ["targets", "import", "{tmp}/nope.csv", "--list", "x"], "file not found"),
    ("import-bad-date", ["targets", "import", "tests/data/sample_top.csv", "--list", "x", "--date", "2026-13-01"],
     "--date"),
    ("dsn-not-a-dsn", ["--dsn", "not a dsn", "targets", "list"], "--dsn"),
    ("dsn-mysql", ["--dsn", "mysql://x", "targets", "list"], "not a PostgreSQL DSN"),
    ("top-huge", ["scan", "tls", "--list", "x", "--top", "99999999999999999999"], "--top"),
    ("rate-nan", ["scan", "tfo", "--list", "x", "--rate", "nan"], "--rate: nan is not a finite number"),
    ("cooldown-nan", ["scan", "tfo", "--list", "x", "--cooldown", "nan"], "--cooldown: nan is not a finite number"),
    ("runs-limit-negative", ["runs", "--limit", "-5"], "--limit"),
    ("archive-unknown-run", ["db", "archive-run", "--run", "987654321", "--out", "{tmp}/arch", "--drop"],
     "no scan_run with id 987654321"),
    ("archive-out-file", ["db", "archive-run", "--run", "1", "--out", "{tmp}/afile"], "--out"),
    ("plot-out-file", ["plot", NAME, "--out", "{tmp}/afile"], "is not a directory"),
    ("plot-out-below-file", ["plot", NAME, "--out", "{tmp}/afile/figs"], "is not a directory"),
    ("report-out-file", ["report", "--out", "{tmp}/afile"], "is not a directory"),
    ("plot-unknown-run", ["plot", NAME, "--run", "987654321", "--out", "{tmp}/figs"], "no scan run with id 987654321"),
    ("report-unknown-run", ["report", "--run", "987654321", "--out", "{tmp}/rep"], "no scan run with id 987654321"),
    ("simulate-input-dir", ["simulate", "tfo-revisits", "--input", "{tmp}/adir"], "not a regular file"),
    ("simulate-input-not-utf8", ["simulate", "tfo-revisits", "--input", "{tmp}/latin1.csv"], "not UTF-8"),
    ("config-rate-1e400", ["--config", "{tmp}/rate-huge.toml", "targets", "list"], "etiquette.rate_pps"),
    ("config-rate-inf", ["--config", "{tmp}/rate-inf.toml", "targets", "list"], "etiquette.rate_pps"),
    ("config-rate-nan", ["--config", "{tmp}/rate-nan.toml", "targets", "list"], "etiquette.rate_pps"),
    ("sql-format", ["sql", "select 1", "--format", "xml"], "--format"),
    ("sql-timeout-nan", ["sql", "select 1", "--timeout-s", "nan"], "--timeout-s"),
    # review attack (issue 20): these were internal errors, a silent exit 0, or a blank line first
    ("sql-timeout-huge", ["sql", "select 1", "--timeout-s", "1e308"], "--timeout-s: at most"),
    ("sql-file-not-utf8", ["sql", "-f", "{tmp}/binary.sql"], "not UTF-8"),
    ("sql-arg-not-utf8", ["sql", "select '\udcff'"], "not UTF-8"),
    ("worker-heartbeat-nan", ["worker", "--once", "--heartbeat", "nan"], "--heartbeat"),
    ("worker-stalled-negative", ["worker", "--once", "--stalled-after", "-1"], "--stalled-after"),
    ("worker-stalled-before-heartbeat", ["worker", "--once", "--stalled-after", "2"], "longer than --heartbeat"),
    ("worker-schedule-missing", ["worker", "--once", "--schedule", "{tmp}/nope.toml"], "file not found"),
    ("import-empty", ["targets", "import", "{tmp}/empty.csv", "--list", "x"], "no targets found"),
    ("tls-deadline-inf", ["scan", "tls", "--list", "sample", "--deadline", "inf", "--dry-run"], "--deadline"),
    ("tls-interval-nan", ["scan", "tls", "--list", "sample", "--interval", "nan", "--dry-run"], "--interval"),
    ("tls-shared-timeout-inf", ["scan", "tls-shared", "--list", "sample", "--timeout", "inf", "--dry-run"], "--timeout"),
    ("tls-shared-concurrency-0", ["scan", "tls-shared", "--list", "sample", "--concurrency", "0", "--dry-run"],
     "--concurrency"),
]


def _snapshot(db) -> dict:
    """Row count of every table of the database (the schema and netsurvey's data)."""
    with db.connect() as conn:
        tables = [r[0] for r in conn.execute(
            "SELECT quote_ident(schemaname) || '.' || quote_ident(tablename) FROM pg_tables "
            "WHERE schemaname NOT IN ('pg_catalog', 'information_schema') ORDER BY 1")]
        return {t: conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in tables}


@pytest.fixture
def imported_db(db):
    r = run_cli("targets", "import", "tests/data/sample_top.csv", "--list", "sample", dsn=db.dsn)
    assert r.returncode == 0, r.stderr
    return db


@pytest.mark.parametrize("argv,fragment", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_bad_input_is_one_line_exit_2_and_writes_nothing(imported_db, tmp_path, argv, fragment):
    _files(tmp_path)
    listing = sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*"))
    before = _snapshot(imported_db)
    r = run_cli(*[a.replace("{tmp}", str(tmp_path)) for a in argv], dsn=imported_db.dsn, cwd=REPO)
    lines = r.stderr.rstrip("\n").split("\n")   # not strip(): a blank line (a progress bar's) is a line
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert len(lines) == 1 and lines[0].startswith("netsurvey: error: ") and fragment in lines[0], lines
    assert _snapshot(imported_db) == before
    assert sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*")) == listing  # no file written
    assert (tmp_path / "afile").read_text() == "precious\n"


def _only_line(r) -> str:
    assert r.returncode == 2, (r.returncode, r.stdout, r.stderr)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    return lines[0]

@pytest.mark.parametrize("argv", [
    ["scan", "quic-second-opinion", "--target", "a.test=198.18.0.5", "--timeout", "inf"],
    ["scan", "tls-second-opinion", "--target", "a.test=198.18.0.5", "--timeout", "inf"],
    ["scan", "tls-second-opinion", "--target", "a.test=198.18.0.5", "--client", "testssl", "--testssl-timeout", "inf"],
    ["scan", "tls-second-opinion", "--target", "a.test=198.18.0.5", "--client", "sslyze", "--sslyze-timeout", "inf"],
], ids=["quic-timeout-inf", "gnutls-timeout-inf", "testssl-timeout-inf", "sslyze-timeout-inf"])
def test_second_opinion_infinite_timeouts_are_bad_input(db, routes_ns, argv):
    """'inf' passed 'must be positive' (not inf > 0 is False): a dry run accepted it, and a real
    run raised OverflowError in int(timeout) for every target (the clients' own timeouts)."""
    with db.connect() as conn:
        runs = conn.execute("SELECT count(*) FROM scan_run").fetchone()[0]
    line = _only_line(run_cli(*argv, "--dry-run", dsn=db.dsn, netns=routes_ns))
    assert "timeout" in line and "finite" in line, line
    with db.connect() as conn:
        assert conn.execute("SELECT count(*) FROM scan_run").fetchone()[0] == runs
