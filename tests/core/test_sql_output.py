"""`netsurvey sql` output: valid CSV and JSON whatever the column types (bytea, jsonb,
arrays, NaN, numeric, timestamptz), streamed rows, the query from stdin or -f FILE."""
from __future__ import annotations

import csv
import io
import json
import subprocess
import sys

import pytest

from conftest import REPO, run_cli

QUERY = ("SELECT 1::int AS i, 2.50::numeric AS num, 'NaN'::float8 AS nan, 'Infinity'::float8 AS inf, 0.1::float8 AS f,"
         " '\\x01ff'::bytea AS b, '{\"a\": [1, 2.5], \"s\": \"x,y\"}'::jsonb AS j, '\"bare\"'::jsonb AS js,"
         " ARRAY['a', 'b,c', NULL] AS arr, ARRAY[1, 2] AS ints, true AS t, NULL::text AS n,"
         " '2026-11-02 12:30:00+02'::timestamptz AS ts, '198.18.0.1'::inet AS ip, 'line\none \"q\"' AS txt")


def test_csv_is_valid_and_typed(db):
    r = run_cli("sql", QUERY, "--format", "csv", dsn=db.dsn)
    assert r.returncode == 0, r.stderr
    rows = list(csv.DictReader(io.StringIO(r.stdout)))
    assert len(rows) == 1
    v = rows[0]
    assert v["b"] == "\\x01ff"                                    # PostgreSQL's bytea hex, not b'\x01\xff'
    assert json.loads(v["j"]) == {"a": [1, 2.5], "s": "x,y"}       # JSON text, not a Python dict
    assert v["js"] == '"bare"'                                     # jsonb string stays JSON
    assert json.loads(v["arr"]) == ["a", "b,c", None] and json.loads(v["ints"]) == [1, 2]
    assert (v["i"], v["num"], v["nan"], v["inf"], v["f"]) == ("1", "2.50", "NaN", "Infinity", "0.1")
    assert v["t"] == "true" and v["n"] == "" and v["ip"] == "198.18.0.1"
    assert v["ts"] == "2026-11-02T10:30:00+00:00"                  # ISO 8601, UTC
    assert v["txt"] == 'line\none "q"'


def test_json_is_valid_with_numbers(db):
    r = run_cli("sql", QUERY, "--format", "json", dsn=db.dsn)
    assert r.returncode == 0, r.stderr
    assert "NaN" not in r.stdout and "Infinity" not in r.stdout
    [v] = json.loads(r.stdout, parse_constant=lambda c: pytest.fail(f"invalid JSON constant {c}"))
    assert v["i"] == 1 and v["num"] == 2.5 and isinstance(v["num"], float) and v["f"] == 0.1
    assert v["nan"] is None and v["inf"] is None                   # JSON has no NaN/Infinity
    assert v["b"] == "\\x01ff" and v["j"] == {"a": [1, 2.5], "s": "x,y"} and v["js"] == "bare"
    assert v["arr"] == ["a", "b,c", None] and v["t"] is True and v["n"] is None
    assert v["ts"] == "2026-11-02T10:30:00+00:00" and v["ip"] == "198.18.0.1"
    r = run_cli("sql", "SELECT g, g * 1.5 AS x FROM generate_series(1, 3) g", "--format", "jsonl", dsn=db.dsn)
    assert [json.loads(line) for line in r.stdout.splitlines()] == [
        {"g": 1, "x": 1.5}, {"g": 2, "x": 3}, {"g": 3, "x": 4.5}]
    r = run_cli("sql", "SELECT 1 AS a WHERE false", "--format", "json", dsn=db.dsn)
    assert r.returncode == 0 and json.loads(r.stdout) == []


def test_query_from_stdin_and_file(db, tmp_path):
    def run(args, stdin=None):
        import os

        env = dict(os.environ, NETSURVEY_DSN=db.dsn)
        return subprocess.run([sys.executable, "-m", "netsurvey.cli", "sql", *args, "--format", "csv"], cwd=REPO,
                              env=env, input=stdin, capture_output=True, text=True, timeout=120)

    r = run(["-"], "SELECT 41 + 1 AS answer;\n")
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == ["answer", "42"]
    f = tmp_path / "q.sql"
    f.write_text("-- a comment\nSELECT 'from file' AS src;\n")
    r = run(["-f", str(f)])
    assert r.stdout.splitlines() == ["src", "from file"], r.stderr
    r = run(["-f", "-"], "SELECT 7 AS seven")
    assert r.stdout.splitlines() == ["seven", "7"], r.stderr
    for args, stdin, text in [(["-f", str(tmp_path / "missing.sql")], None, "file not found"),
                              (["SELECT 1", "-f", str(f)], None, "not both"),
                              ([], None, "no query"), (["-"], "  ;\n", "empty"),
                              (["-"], "SELECT 1; SELECT 2", "query failed")]:
        r = run(args, stdin)
        assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1 and text in r.stderr, (args, r.stderr)


def test_rows_are_streamed_not_fetched_all(db):
    """The CSV of 200,000 rows arrives through the cursor's stream in chunks: the first
    rows reach the reader before the query has produced the last one."""
    import os

    env = dict(os.environ, NETSURVEY_DSN=db.dsn)
    # pg_sleep in the last row: rows before it must already be on stdout while it sleeps
    q = "SELECT g, CASE WHEN g = 200000 THEN pg_sleep(5)::text END AS s FROM generate_series(1, 200000) g"
    p = subprocess.Popen([sys.executable, "-m", "netsurvey.cli", "sql", q, "--format", "csv"], cwd=REPO, env=env,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        first = [p.stdout.readline() for _ in range(3)]
        assert first == ["g,s\n", "1,\n", "2,\n"]
        assert p.poll() is None            # still running: the sleeping last row is not out yet
    finally:
        rest = p.communicate(timeout=120)[0]
    assert p.returncode == 0
    assert rest.splitlines()[-1] == "200000,"


def test_a_reader_that_leaves_early_ends_the_command(db):
    """`netsurvey sql ... | head -1`: the half-read row stream held the connection's lock and
    the command hung for ever in its rollback (review attack, issue 20). Now it exits, with
    at most click's exit 1 for the closed pipe and nothing on stderr."""
    import os

    env = dict(os.environ, NETSURVEY_DSN=db.dsn, PYTHONPATH=str(REPO))
    for fmt in ("csv", "json", "jsonl"):
        p = subprocess.Popen([sys.executable, "-m", "netsurvey.cli", "sql",
                              "SELECT g FROM generate_series(1, 300000) g", "--format", fmt],
                             cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        p.stdout.readline()
        p.stdout.close()            # what `head -1` does
        try:
            rc = p.wait(timeout=60)
        except subprocess.TimeoutExpired:
            p.kill()
            pytest.fail(f"--format {fmt}: netsurvey sql hung after its reader left")
        assert rc in (0, 1), rc
        assert p.stderr.read() == b"", fmt


def test_copy_is_refused_in_one_line(db):
    """COPY ... TO STDOUT left the connection unable to roll back, and psycopg's warning
    about it was a second line on stderr."""
    for q in ("COPY (SELECT 1) TO STDOUT", "COPY target FROM STDIN"):
        r = run_cli("sql", q, dsn=db.dsn)
        assert r.returncode == 2, r.stdout
        assert len(r.stderr.strip().splitlines()) == 1, r.stderr
