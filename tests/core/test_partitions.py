"""Run partitions (schema/0150_partition_by_run.sql, issue 26 item 6): each new run gets a
partition of every table that grows per campaign; the one writer's binary COPY lands there;
the views read through the parents; a database with rows is converted in place (rows,
views, comments, grants kept); `netsurvey db archive-run` exports a run and drops it."""
from __future__ import annotations

import datetime as dt
import ipaddress
import json
import shutil

import psycopg
import pytest
from psycopg.conninfo import make_conninfo

from conftest import run_cli
from netsurvey.db import migration_files
from netsurvey.writer import ResultWriter

PARTITIONED = {"tfo_probe", "tls_handshake", "tls_resumption", "tls_lifetime_event", "quic_connection",
               "dns_ttl_probe", "dns_ecs_probe"}
COLS = ["run_id", "round", "hostname", "address", "port", "status", "reply", "cookie_len", "probed_at"]
TYPES = ["int8", "int4", "text", "inet", "int4", "text", "text", "int4", "timestamptz"]
T0 = dt.datetime(2026, 11, 2, tzinfo=dt.timezone.utc)


def _lb_rows(run_id: int):
    """A tfo-lb survey: a.test always TFO on one address, b.test on two addresses, never TFO."""
    for k in (1, 2, 3):
        yield (run_id, k, "a.test", ipaddress.ip_address("198.18.3.1"), 443, "success", "syn-ack", 8,
               T0 + dt.timedelta(seconds=k))
        yield (run_id, k, "b.test", ipaddress.ip_address(f"198.18.3.{10 + k % 2}"), 443, "success", "syn-ack", None,
               T0 + dt.timedelta(seconds=k))


def _partitions(conn, run_id: int) -> set[str]:
    return {r[0] for r in conn.execute(
        "SELECT i.inhparent::regclass::text FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid "
        "WHERE c.relnamespace = 'run_partitions'::regnamespace AND c.relname LIKE %s", (f"%\\_r{run_id}",))}


def test_a_run_gets_partitions_the_writer_fills_and_the_views_read(db):
    with db.connect() as conn:
        run = conn.execute("INSERT INTO scan_run (kind, status) VALUES ('tfo-lb', 'finished') RETURNING id").fetchone()[0]
        other = conn.execute("INSERT INTO scan_run (kind) VALUES ('tfo-lb') RETURNING id").fetchone()[0]
        conn.commit()
        assert _partitions(conn, run) == PARTITIONED
        # every parent is partitioned by run_id and has its BRIN index on time
        assert {r[0] for r in conn.execute(
            "SELECT c.relname FROM pg_partitioned_table p JOIN pg_class c ON c.oid = p.partrelid")} >= PARTITIONED
        brin = {r[0] for r in conn.execute(
            "SELECT t.relname FROM pg_index x JOIN pg_class i ON i.oid = x.indexrelid JOIN pg_class t ON t.oid = x.indrelid"
            " JOIN pg_am a ON a.oid = i.relam WHERE a.amname = 'brin'")}
        assert PARTITIONED <= brin
    with ResultWriter(db, "tfo_probe", COLS, types=TYPES) as w:   # the writer's binary COPY into the parent
        w.write_many(_lb_rows(run))
        w.write_many(_lb_rows(other))
    with db.connect() as conn:
        where = dict(conn.execute("SELECT run_id, tableoid::regclass::text FROM tfo_probe GROUP BY 1, 2").fetchall())
        assert where == {run: f"run_partitions.tfo_probe_r{run}", other: f"run_partitions.tfo_probe_r{other}"}
        assert conn.execute("SELECT hostname, rounds_probed, rounds_tfo, addresses, tfo_class FROM tfo_lb_host"
                            " WHERE run_id = %s ORDER BY 1", (run,)).fetchall() == [
            ("a.test", 3, 3, 1, "always"), ("b.test", 3, 0, 2, "never")]
        assert conn.execute("SELECT connection, hostnames, new_address FROM tfo_lb_new_address WHERE run_id = %s"
                            " ORDER BY 1", (run,)).fetchall() == [(2, 1, 0), (3, 1, 0)]
        # each run's partition is aggregated on its own (0152), in every new session
        assert conn.execute("SHOW enable_partitionwise_aggregate").fetchone()[0] == "on"
        # a run's query reads its partition only
        plan = "\n".join(r[0] for r in conn.execute(f"EXPLAIN SELECT * FROM tfo_probe WHERE run_id = {run}"))
        assert f"tfo_probe_r{run}" in plan and f"tfo_probe_r{other}" not in plan
    # the writer role (not the owner of the parents) starts runs: the partitions come along
    with db.connect() as conn:
        if not conn.execute("SELECT 1 FROM pg_roles WHERE rolname = 'netsurvey_writer'").fetchone():
            return  # a server without netsurvey's roles (README, "Security")
    writer = make_conninfo(db.dsn, user="netsurvey_writer")
    with psycopg.connect(writer) as conn:
        third = conn.execute("INSERT INTO scan_run (kind) VALUES ('dns-ttl') RETURNING id").fetchone()[0]
        conn.commit()
        assert _partitions(conn, third) == PARTITIONED


def test_a_database_with_rows_is_converted_in_place(empty_db, tmp_path):
    before = tmp_path / "schema"
    before.mkdir()
    for p in migration_files():
        if p.name < "0150":
            shutil.copy(p, before)
    empty_db.migrate(before)
    catalog = """SELECT c.relname, c.relkind, obj_description(c.oid, 'pg_class'),
                        (SELECT array_agg(a.attname || ':' || format_type(a.atttypid, a.atttypmod) || ':'
                                          || coalesce(col_description(c.oid, a.attnum), '') ORDER BY a.attnum)
                         FROM pg_attribute a WHERE a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped),
                        (SELECT array_agg(x::text ORDER BY x::text) FROM unnest(c.relacl) x)
                 FROM pg_class c WHERE c.relnamespace = 'public'::regnamespace AND c.relkind IN ('r', 'p', 'v')
                   AND c.relname NOT LIKE 'procrastinate%%'
                 ORDER BY 1"""
    with empty_db.connect() as conn:
        run = conn.execute("INSERT INTO scan_run (kind, status) VALUES ('tfo-lb', 'finished') RETURNING id").fetchone()[0]
        conn.commit()
    with ResultWriter(empty_db, "tfo_probe", COLS, types=TYPES) as w:
        w.write_many(_lb_rows(run))
    with empty_db.connect() as conn:
        old = {r[0]: r for r in conn.execute(catalog)}
        old_views = conn.execute("SELECT * FROM tfo_lb_host ORDER BY hostname").fetchall()
    # 0150 alone: later migrations add tables of their own (0161, 0163) and columns
    shutil.copy(next(p for p in migration_files() if p.name.startswith("0150_")), before)
    assert empty_db.migrate(before) == ["0150_partition_by_run.sql"]
    with empty_db.connect() as conn:
        new = {r[0]: r for r in conn.execute(catalog)}
        assert conn.execute("SELECT * FROM tfo_lb_host ORDER BY hostname").fetchall() == old_views
        assert conn.execute("SELECT count(*) FROM run_partitions.tfo_probe_r%s" % run).fetchone()[0] == 6
    assert set(new) - set(old) == {"run_partitioned"}
    for name, row in old.items():
        want = row
        if name in PARTITIONED:  # now a partitioned table whose comment says so
            assert new[name][1] == "p" and new[name][2].startswith(row[2]) and "Partitioned by run" in new[name][2]
            want = (row[0], "p", new[name][2], *row[3:])
        assert new[name] == want, name
    assert empty_db.migrate()[:1] == ["0151_tfo_lb_new_address_window.sql"]  # and on


def test_archive_run_exports_then_drops_only_that_run(db, tmp_path):
    with db.connect() as conn:
        run = conn.execute("INSERT INTO scan_run (kind, status) VALUES ('tfo-lb', 'finished') RETURNING id").fetchone()[0]
        other = conn.execute("INSERT INTO scan_run (kind, status) VALUES ('tfo-lb', 'finished') RETURNING id").fetchone()[0]
        running = conn.execute("INSERT INTO scan_run (kind) VALUES ('tfo-lb') RETURNING id").fetchone()[0]
        conn.commit()
    with ResultWriter(db, "tfo_probe", COLS, types=TYPES) as w:
        for r in (run, other, running):
            w.write_many(_lb_rows(r))
    # bad input: one line, exit 2, nothing written or dropped
    r = run_cli("db", "archive-run", "--run", str(running), "--out", str(tmp_path / "x"), "--drop", dsn=db.dsn)
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1 and "still running" in r.stderr
    assert not (tmp_path / "x").exists()
    r = run_cli("db", "archive-run", "--run", "999999", "--out", str(tmp_path / "y"), dsn=db.dsn)
    assert r.returncode == 2 and not (tmp_path / "y").exists()

    out = tmp_path / "archive"
    r = run_cli("db", "archive-run", "--run", str(run), "--out", str(out), "--format", "jsonl", "--drop", "--json",
                dsn=db.dsn)
    assert r.returncode == 0, r.stderr
    said = json.loads(r.stdout)
    manifest = json.loads((out / "manifest.json").read_text())
    files = {f["table"]: f for f in manifest["files"]}
    assert files["tfo_probe"]["rows"] == 6
    lines = [json.loads(x) for x in (out / "tfo_probe.jsonl").read_text().splitlines()]
    assert sorted((x["hostname"], x["round"]) for x in lines) == sorted(
        (h, k) for k in (1, 2, 3) for h in ("a.test", "b.test"))
    assert {d["table"] for d in said["dropped"]} == PARTITIONED
    assert [d["rows"] for d in said["dropped"] if d["table"] == "tfo_probe"] == [6]
    with db.connect() as conn:
        assert _partitions(conn, run) == set()
        assert conn.execute("SELECT count(*) FROM scan_run WHERE id = %s", (run,)).fetchone()[0] == 0
        assert dict(conn.execute("SELECT run_id, count(*) FROM tfo_probe GROUP BY 1").fetchall()) == {
            other: 6, running: 6}
        assert _partitions(conn, other) == PARTITIONED


OLD_NEW_ADDRESS = """
WITH p AS (
    SELECT t.run_id, t.hostname, t.round, t.address,
           NOT EXISTS (SELECT 1 FROM tfo_probe e WHERE e.run_id = t.run_id AND e.hostname = t.hostname
                       AND e.round > 0 AND e.round < t.round AND e.address = t.address) AS new_address
    FROM tfo_probe t JOIN tfo_lb_host h ON h.run_id = t.run_id AND h.hostname = t.hostname
    WHERE t.round > 0 AND h.tfo_class = 'always'
)
SELECT run_id, round AS connection, count(*) AS hostnames,
       count(*) FILTER (WHERE new_address) AS new_address,
       count(*) FILTER (WHERE new_address)::float8 / count(*) AS failure_rate
FROM p WHERE round > 1 GROUP BY run_id, round"""


def test_fig_3_3_view_gives_what_the_correlated_subquery_gave(db):
    """0151's window definition of tfo_lb_new_address against 0002's NOT EXISTS one, on random
    surveys with addresses revisited, duplicate rounds, NULL addresses and round 0 rows."""
    import random

    rnd = random.Random(26)
    with db.connect() as conn:
        runs = [conn.execute("INSERT INTO scan_run (kind) VALUES ('tfo-lb') RETURNING id").fetchone()[0]
                for _ in range(3)]
        conn.commit()
    with ResultWriter(db, "tfo_probe", COLS, types=TYPES) as w:
        for run in runs:
            for h in range(60):
                n = rnd.choice([1, 1, 2, 3, 8])
                for k in range(rnd.choice([0, 1]), rnd.randint(2, 10)):
                    for _ in range(rnd.choice([1, 1, 1, 2])):
                        addr = None if rnd.random() < 0.03 else ipaddress.ip_address(f"198.18.{h}.{rnd.randrange(n)}")
                        tfo = 8 if (h % 3 or rnd.random() < 0.9) else None
                        w.write((run, k, f"h{h}.test", addr, 443, "success", "syn-ack", tfo, T0))
    with db.connect() as conn:
        old = conn.execute(OLD_NEW_ADDRESS + " ORDER BY 1, 2").fetchall()
        new = conn.execute("SELECT * FROM tfo_lb_new_address ORDER BY 1, 2").fetchall()
    assert len(old) > 10 and any(r[3] not in (0, r[2]) for r in old)
    assert new == old


def test_runs_started_together_beside_a_writer_do_not_deadlock(db):
    """Eight runs started at once (each creates its partitions in scan_run's trigger), while
    another transaction has updated scan_run and writes rows: every run is created, none
    dies of DeadlockDetected (the CI rehearsal's `scan tfo-lb` did, before runs.NEW_RUN_LOCK)."""
    import threading

    from netsurvey.runs import start_run

    first = start_run(db, "tfo", {"n": 0})
    errors: list[BaseException] = []
    made: list[int] = []
    go = threading.Barrier(9)

    def starter(i):
        try:
            go.wait()
            made.append(start_run(db, "tfo", {"n": i}).id)
        except BaseException as exc:   # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=starter, args=(i,)) for i in range(1, 9)]
    for t in threads:
        t.start()
    with db.connect() as conn:   # a writer of the first run: updated scan_run, then writes rows
        conn.execute("UPDATE scan_run SET counts = '{\"x\": 1}' WHERE id = %s", (first.id,))
        go.wait()
        import time as _t
        _t.sleep(1.5)            # the starters queue behind this transaction meanwhile
        conn.execute("INSERT INTO tfo_probe (run_id, hostname, address, port, status, probed_at) "
                     "VALUES (%s, 'a.test', '198.18.2.1', 443, 'success', now())", (first.id,))
    for t in threads:
        t.join(60)
    assert errors == [], errors
    assert len(made) == 8
    with db.connect() as conn:
        parts = conn.execute("SELECT count(*) FROM pg_inherits WHERE inhparent = 'tfo_probe'::regclass").fetchone()[0]
    assert parts >= 9


def test_the_writer_role_may_take_the_new_run_lock(db):
    """Workers start runs with the writer's DSN: runs.NEW_RUN_LOCK (SHARE ROW EXCLUSIVE on
    scan_run) needs its UPDATE privilege, and the run's partitions come with the INSERT."""
    import psycopg
    from psycopg.conninfo import make_conninfo

    from netsurvey.runs import NEW_RUN_LOCK

    with db.connect() as conn:
        if conn.execute("SELECT count(*) FROM pg_roles WHERE rolname = 'netsurvey_writer'").fetchone()[0] == 0:
            import pytest

            pytest.skip("a server without netsurvey's roles")
    with psycopg.connect(make_conninfo(db.dsn, user="netsurvey_writer")) as conn:
        conn.execute(NEW_RUN_LOCK)
        run_id = conn.execute("INSERT INTO scan_run (kind) VALUES ('tfo') RETURNING id").fetchone()[0]
    with db.connect() as conn:
        n = conn.execute("SELECT count(*) FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid "
                         "WHERE c.relname = %s", (f"tfo_probe_r{run_id}",)).fetchone()[0]
    assert n == 1


def _has_roles(db) -> bool:
    with db.connect() as conn:
        return conn.execute("SELECT count(*) FROM pg_roles WHERE rolname IN "
                            "('netsurvey_reader', 'netsurvey_writer')").fetchone()[0] == 2

def test_reader_role_cannot_create_partitions(db):
    """ensure_run_partitions() is SECURITY DEFINER (owner's rights) and PUBLIC could execute it:
    the read-only role created and attached tables in run_partitions (a write, as the owner)."""
    if not _has_roles(db):
        pytest.skip("a server without netsurvey's roles")
    reader = make_conninfo(db.dsn, user="netsurvey_reader")
    with psycopg.connect(reader, autocommit=True) as conn:
        conn.execute("SET default_transaction_read_only = off")   # a role setting: the role may change it
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute("SELECT ensure_run_partitions(424242)")
    with db.connect() as conn:
        assert conn.execute("SELECT count(*) FROM pg_class WHERE relname LIKE '%%\\_r424242'").fetchone()[0] == 0
    # the writer still starts runs and gets their partitions (through the trigger)
    writer = make_conninfo(db.dsn, user="netsurvey_writer")
    with psycopg.connect(writer) as conn:
        run = conn.execute("INSERT INTO scan_run (kind) VALUES ('dns-ttl') RETURNING id").fetchone()[0]
        conn.commit()
        assert conn.execute("SELECT count(*) FROM pg_class WHERE relname = %s",
                            (f"tfo_probe_r{run}",)).fetchone()[0] == 1

def test_ensure_run_partitions_reads_no_temp_table(db):
    """The SECURITY DEFINER function read run_partitioned unqualified with pg_temp searched
    first: a session's temporary table of that name chose, with the owner's rights, which
    tables it partitioned (an empty one: a run without partitions, whose rows then fail)."""
    if not _has_roles(db):
        pytest.skip("a server without netsurvey's roles")
    writer = make_conninfo(db.dsn, user="netsurvey_writer")
    with psycopg.connect(writer) as conn:
        conn.execute("CREATE TEMP TABLE run_partitioned (table_name text, time_column text)")
        conn.execute("GRANT SELECT ON run_partitioned TO netsurvey_owner")   # its own table: it may
        run = conn.execute("INSERT INTO scan_run (kind) VALUES ('dns-ttl') RETURNING id").fetchone()[0]
        conn.commit()
        assert conn.execute("SELECT count(*) FROM pg_class WHERE relname = %s",
                            (f"tfo_probe_r{run}",)).fetchone()[0] == 1
