"""`netsurvey db archive-run` (export one run; with --drop, detach and drop its partitions)
where it can go wrong: a table without ON DELETE CASCADE, odd --out paths, a queued run, a
late writer committing while the drop waits, the writer role, a running scan's open
transaction. Each test failed on the code before its fix. The plain export-then-drop is in
tests/core/test_partitions.py."""
from __future__ import annotations

import os
import subprocess
import sys

import psycopg
import pytest
from psycopg.conninfo import make_conninfo

from conftest import REPO, run_cli

pytestmark = [pytest.mark.timeout(300)]

def _has_roles(db) -> bool:
    with db.connect() as conn:
        return conn.execute("SELECT count(*) FROM pg_roles WHERE rolname IN "
                            "('netsurvey_reader', 'netsurvey_writer')").fetchone()[0] == 2

def test_archive_drop_of_a_handshake_timing_run(db, tmp_path):
    """handshake_timing.run_id references scan_run without ON DELETE CASCADE."""
    with db.connect() as conn:
        run = conn.execute("INSERT INTO scan_run (kind, status) VALUES ('handshake-timing', 'finished') "
                           "RETURNING id").fetchone()[0]
        conn.execute("INSERT INTO handshake_timing_sample (run_id, hostname, method, sample, status, connect_ms) "
                     "VALUES (%s, 'a.test', 'tcp', 1, 'ok', 1.5)", (run,))
        conn.commit()
    r = run_cli("db", "archive-run", "--run", str(run), "--out", str(tmp_path / "a"), "--format", "jsonl", "--drop",
                dsn=db.dsn)
    print(r.stdout, r.stderr)
    assert r.returncode == 0, r.stderr
    assert '"sample":1' in (tmp_path / "a" / "handshake_timing_sample.jsonl").read_text()
    with db.connect() as conn:
        assert conn.execute("SELECT count(*) FROM handshake_timing_sample").fetchone()[0] == 0

def _only_line(r) -> str:
    assert r.returncode == 2, (r.returncode, r.stdout, r.stderr)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    return lines[0]

@pytest.mark.parametrize("case", ["below-file", "dangling-link", "link-loop", "name-too-long"])
def test_archive_run_odd_out_is_one_line_exit_2(db, tmp_path, case):
    """These were internal errors (NotADirectoryError, FileExistsError, OSError), exit 1."""
    with db.connect() as conn:
        run = conn.execute("INSERT INTO scan_run (kind, status) VALUES ('tfo-lb', 'finished') RETURNING id").fetchone()[0]
        conn.commit()
    (tmp_path / "afile").write_text("x")
    os.symlink(tmp_path / "nowhere", tmp_path / "dangling-link")
    os.symlink("link-loop", tmp_path / "link-loop")
    out = {"below-file": tmp_path / "afile" / "sub", "dangling-link": tmp_path / "dangling-link",
           "link-loop": tmp_path / "link-loop", "name-too-long": tmp_path / "d" / ("a" * 300)}[case]
    before = sorted(os.listdir(tmp_path))
    for cmd in (["db", "archive-run", "--run", str(run), "--drop"], ["export", "--run", str(run), "--format", "csv"]):
        line = _only_line(run_cli(*cmd, "--out", str(out), dsn=db.dsn))
        assert "--out" in line and "internal error" not in line
    assert sorted(os.listdir(tmp_path)) == before and not (tmp_path / "nowhere").exists()
    with db.connect() as conn:
        assert conn.execute("SELECT count(*) FROM scan_run WHERE id = %s", (run,)).fetchone()[0] == 1

def test_archive_drop_refuses_a_queued_run(db, tmp_path):
    """A queued run (--shards N before its first shard, a campaign between rounds) has not
    ended: --drop deleted it, and its shards/rounds still to come."""
    with db.connect() as conn:
        run = conn.execute("INSERT INTO scan_run (kind, status, shards) VALUES ('tfo-lb', 'queued', 2) "
                           "RETURNING id").fetchone()[0]
        conn.commit()
    line = _only_line(run_cli("db", "archive-run", "--run", str(run), "--out", str(tmp_path / "a"), "--drop",
                              dsn=db.dsn))
    assert "queued" in line
    assert not (tmp_path / "a").exists()
    with db.connect() as conn:
        assert conn.execute("SELECT count(*) FROM scan_run WHERE id = %s", (run,)).fetchone()[0] == 1

def test_archive_drop_never_drops_rows_committed_after_the_export(db, tmp_path):
    """A late writer (a stalled shard of a run already marked failed, a late outcome) holds an
    uncommitted row of the run while archive-run exports; it commits while the drop waits.
    The drop detached and dropped the partition with that row in it: the row was in neither
    the export nor the database."""
    with db.connect() as conn:
        run = conn.execute("INSERT INTO scan_run (kind, status) VALUES ('tfo-lb', 'failed') RETURNING id").fetchone()[0]
        conn.commit()
    late = psycopg.connect(db.dsn)
    late.execute("INSERT INTO tfo_probe (run_id, round, hostname, address, port, status, probed_at) "
                 "VALUES (%s, 1, 'late.test', '198.18.3.1', 443, 'success', now())", (run,))
    e = dict(os.environ, NETSURVEY_DSN=db.dsn, PYTHONPATH=str(REPO))
    p = subprocess.Popen([sys.executable, "-m", "netsurvey.cli", "db", "archive-run", "--run", str(run), "--out",
                          str(tmp_path / "a"), "--format", "csv", "--drop"], cwd=REPO, env=e,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        import time
        deadline = time.monotonic() + 60
        with db.connect() as watch:   # wait until the drop waits for the late writer's lock
            while time.monotonic() < deadline and p.poll() is None and not watch.execute(
                    "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                    "AND wait_event_type = 'Lock' AND pid <> pg_backend_pid()").fetchone()[0]:
                watch.rollback()
                time.sleep(0.1)
        late.commit()
        _, err = p.communicate(timeout=60)
    finally:
        late.close()
        if p.poll() is None:
            p.kill()
    exported = (tmp_path / "a" / "tfo_probe.csv").read_text() if (tmp_path / "a" / "tfo_probe.csv").exists() else ""
    with db.connect() as conn:
        kept = conn.execute("SELECT count(*) FROM tfo_probe WHERE hostname = 'late.test'").fetchone()[0]
    assert kept == 1 or "late.test" in exported, f"the late row is lost (exit {p.returncode}, {err!r})"
    assert p.returncode == 2 and len(err.strip().splitlines()) == 1 and "nothing dropped" in err, err

def test_archive_run_as_writer(db, tmp_path):
    """As the writer (the workers' DSN) archive-run counted rows in run_partitions.<part>, a
    schema only the owner may use: an internal error, also without --drop. Now it archives;
    --drop (the owner's: DETACH/DROP) is refused up front, one line, nothing written, and no
    password in the message."""
    if not _has_roles(db):
        pytest.skip("a server without netsurvey's roles")
    with db.connect() as conn:
        run = conn.execute("INSERT INTO scan_run (kind, status) VALUES ('tfo-lb', 'finished') RETURNING id").fetchone()[0]
        conn.commit()
    writer = make_conninfo(db.dsn, user="netsurvey_writer", password="s3cr3tpw")
    line = _only_line(run_cli("db", "archive-run", "--run", str(run), "--out", str(tmp_path / "d"), "--drop",
                              "--format", "csv", dsn=writer))
    assert "--drop" in line and "s3cr3tpw" not in line and not (tmp_path / "d").exists()
    r = run_cli("db", "archive-run", "--run", str(run), "--out", str(tmp_path / "a"), "--format", "csv", "--json",
                dsn=writer)
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "a" / "manifest.json").exists()
    with db.connect() as conn:
        assert conn.execute("SELECT count(*) FROM scan_run WHERE id = %s", (run,)).fetchone()[0] == 1

def test_archive_drop_does_not_stall_a_running_scan(db, tmp_path):
    """A shard writes all its rows in one transaction. archive-run --drop of an old run
    waited for it (DROP TABLE of a detached partition takes ACCESS EXCLUSIVE on scan_run, for
    its foreign key's triggers, and the shard's rows hold a key-share lock there), and while
    it waited nobody could read scan_run or start a run (`netsurvey runs`, every new scan)
    until the shard ended (here: for ever). Now the drop gives up after --lock-timeout-s,
    nothing dropped, one line, and the others go on."""
    import time

    with db.connect() as conn:
        old = conn.execute("INSERT INTO scan_run (kind, status) VALUES ('tfo-lb', 'finished') RETURNING id").fetchone()[0]
        live = conn.execute("INSERT INTO scan_run (kind) VALUES ('tfo-lb') RETURNING id").fetchone()[0]
        conn.commit()
    shard = psycopg.connect(db.dsn)   # the running scan's open transaction
    shard.execute("INSERT INTO tfo_probe (run_id, round, hostname, address, port, status, probed_at) "
                  "VALUES (%s, 1, 'live.test', '198.18.3.1', 443, 'success', now())", (live,))
    e = dict(os.environ, NETSURVEY_DSN=db.dsn, PYTHONPATH=str(REPO))
    p = subprocess.Popen([sys.executable, "-m", "netsurvey.cli", "db", "archive-run", "--run", str(old), "--out",
                          str(tmp_path / "a"), "--format", "csv", "--drop", "--lock-timeout-s", "3"], cwd=REPO, env=e,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        with db.connect() as watch:   # until the drop waits for the shard's lock on tfo_probe
            while time.monotonic() < deadline and p.poll() is None and not watch.execute(
                    "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                    "AND wait_event_type = 'Lock' AND pid <> pg_backend_pid()").fetchone()[0]:
                watch.rollback()
                time.sleep(0.1)
        with psycopg.connect(db.dsn) as other:   # `netsurvey runs`, then a new scan, meanwhile
            other.execute("SET statement_timeout = '20s'")
            t0 = time.monotonic()
            try:
                other.execute("SELECT count(*) FROM scan_run").fetchone()
                other.execute("INSERT INTO scan_run (kind) VALUES ('tfo-lb')")
            except psycopg.errors.QueryCanceled:
                pass
            waited_s = time.monotonic() - t0
            other.rollback()
        assert waited_s < 10, f"reading scan_run and starting a run waited {waited_s:.0f} s behind the drop"
        _, err = p.communicate(timeout=30)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
        shard.rollback()
        shard.close()
    assert p.returncode == 2 and len(err.strip().splitlines()) == 1 and "nothing dropped" in err, err
    with db.connect() as conn:
        assert conn.execute("SELECT count(*) FROM scan_run WHERE id = %s", (old,)).fetchone()[0] == 1
