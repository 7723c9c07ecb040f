"""The shared results writer: binary and text COPY, batching, flush on close and on signal."""
import ipaddress
import os
import signal
import subprocess
import sys
import textwrap

from netsurvey.writer import ResultWriter


def make_table(db):
    with db.connect() as conn:
        conn.execute("CREATE TABLE obs (run_id bigint, address inet, cookie bytea, rtt_ms double precision, note text)")


def count(db):
    with db.connect() as conn:
        return conn.execute("SELECT count(*) FROM obs").fetchone()[0]


def test_binary_copy_roundtrip_and_batching(db):
    make_table(db)
    w = ResultWriter(db, "obs", ["run_id", "address", "cookie", "rtt_ms", "note"],
                     types=["int8", "inet", "bytea", "float8", "text"], batch_rows=100)
    for i in range(250):
        w.write((i, ipaddress.ip_address(f"198.18.0.{i % 250}"), bytes([i % 256]) * 8, i / 10, None))
    assert count(db) == 200          # two full batches flushed, 50 buffered
    w.close()
    assert count(db) == 250
    with db.connect() as conn:
        row = conn.execute("SELECT host(address), cookie, rtt_ms FROM obs WHERE run_id = 7").fetchone()
    assert row == ("198.18.0.7", b"\x07" * 8, 0.7)


def test_binary_copy_with_the_types_of_the_catalog(db):
    """types="catalog": each column's type comes from the table's definition (the schema is
    the one statement of it), arrays and time stamps included; a column the table lacks is
    named."""
    import datetime

    import pytest

    with db.connect() as conn:
        conn.execute("CREATE TABLE obs2 (run_id bigint, address inet, answers text[], at timestamptz, n smallint)")
    at = datetime.datetime(2026, 11, 27, 12, 0, tzinfo=datetime.timezone.utc)
    with ResultWriter(db, "obs2", ["n", "run_id", "answers", "address", "at"], types="catalog") as w:
        assert w.types == [21, 20, 1009, 869, 1184]   # int2, int8, text[], inet, timestamptz
        w.write((3, 7, ["198.18.0.1", "198.18.0.2"], ipaddress.ip_address("2001:2::1"), at))
    with db.connect() as conn:
        assert conn.execute("SELECT n, run_id, answers, host(address), at FROM obs2").fetchone() == (
            3, 7, ["198.18.0.1", "198.18.0.2"], "2001:2::1", at)
    with pytest.raises(ValueError, match="obs2 has no column 'nope'"):
        ResultWriter(db, "obs2", ["run_id", "nope"], types="catalog")


def test_no_scanner_repeats_its_column_types():
    """Result rows are mapped to columns by name; their types are read from the catalog
    (types="catalog"), never spelled again in Python."""
    import re

    from conftest import REPO

    spelled = [f"{p.relative_to(REPO)}:{n}" for d in ("scanners", "browser_probes", "atlas")
               for p in sorted((REPO / d).rglob("*.py")) for n, line in enumerate(p.read_text().splitlines(), 1)
               if re.search(r"\btypes=(?!\"catalog\")|\(\"\w+\", \"(?:int[248]|text|inet|bytea|bool|float[48])\"\)", line)]
    assert spelled == [], spelled


def test_text_copy_and_context_manager(db):
    make_table(db)
    with ResultWriter(db, "obs", ["run_id", "note"]) as w:
        w.write_many((i, f"n{i}") for i in range(10))
    assert count(db) == 10


def test_flush_on_sigterm(db):
    make_table(db)
    code = textwrap.dedent(f"""
        import sys, time
        sys.path.insert(0, {os.getcwd()!r})
        from netsurvey.db import Database
        from netsurvey.writer import ResultWriter, flush_all_on_signal
        flush_all_on_signal()
        w = ResultWriter(Database(dsn={db.dsn!r}), "obs", ["run_id", "note"], types=["int8", "text"], batch_rows=10**6)
        for i in range(1234):
            w.write((i, "x"))
        print("ready", flush=True)
        time.sleep(60)
    """)
    p = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    assert p.stdout.readline().strip() == "ready"
    assert count(db) == 0
    p.send_signal(signal.SIGTERM)
    assert p.wait(20) == 128 + signal.SIGTERM
    assert count(db) == 1234


def test_background_batches_all_land_and_a_failed_batch_is_kept(db):
    import psycopg
    import pytest

    make_table(db)
    w = ResultWriter(db, "obs", ["run_id", "note"], types=["int8", "text"], batch_rows=100, background=True)
    for i in range(250):
        w.write((i, "x"))
    w.flush()  # waits for the batch in flight, then writes the rest
    assert w.rows_written == 250 and count(db) == 250
    w.close()
    with db.connect() as conn:
        conn.execute("ALTER TABLE obs ADD CONSTRAINT small CHECK (run_id < 1000)")
    w = ResultWriter(db, "obs", ["run_id", "note"], types=["int8", "text"], batch_rows=100, background=True)
    for i in range(950, 1050):  # this full batch is refused by the server, in the helper thread
        w.write((i, "y"))
    with pytest.raises(psycopg.errors.CheckViolation):
        w.flush()  # the refused batch's error surfaces in the caller
    assert len(w._buf) == 100 and count(db) == 250  # kept, nothing half-written
    w._buf = [r for r in w._buf if r[0] < 1000]
    w.close()
    assert count(db) == 300
