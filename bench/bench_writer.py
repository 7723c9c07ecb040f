"""Benchmark the shared results writer over 1M rows (5 columns), side by side with
psycopg's plain executemany, in one run, against the embedded PostgreSQL.

Prints rows/s and peak RSS growth (MiB) for: ResultWriter binary COPY, ResultWriter text
COPY, binary COPY of a table without an inet column (psycopg's inet binary dumper is pure
Python and dominates the first), and executemany (on 100k rows; its rate is the baseline the ratio is taken against).

Usage: python bench/bench_writer.py [--rows 1000000]

``--tfo-probe``: instead, the writer's rows/s into the real ``tfo_probe`` (12 columns, binary
COPY, its indexes) of a database migrated without and with schema/0150_partition_by_run.sql
(plain table vs one partition per run), two runs each, in alternation.
"""
from __future__ import annotations

import argparse
import ipaddress
import resource
import sys
import tempfile
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import psycopg  # noqa: E402
from psycopg.conninfo import make_conninfo  # noqa: E402

from netsurvey.db import Database, stop_embedded  # noqa: E402
from netsurvey.writer import ResultWriter  # noqa: E402

COLS = ["run_id", "address", "port", "cookie", "rtt_ms"]
TYPES = ["int8", "inet", "int4", "bytea", "float8"]


def rows(n: int, binary: bool):
    base = int(ipaddress.ip_address("198.19.0.0"))
    for i in range(n):
        a = ipaddress.ip_address(base + (i & 0xFFFF))
        yield (1, a if binary else str(a), 443, (i & 0xFFFFFFFF).to_bytes(8, "big"), i * 0.001)


def rows_no_inet(n: int):
    for i in range(n):
        yield (1, 443, (i & 0xFFFFFFFF).to_bytes(8, "big"), i * 0.001, "h.test")


def rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


TFO_COLS = ["run_id", "round", "rank", "hostname", "address", "port", "status", "reply", "tfo_kind", "cookie",
            "cookie_len", "probed_at"]
TFO_TYPES = ["int8", "int4", "int4", "text", "inet", "int4", "text", "text", "text", "bytea", "int4", "timestamptz"]


def tfo_rows(run_id: int, n: int):
    import datetime as dt

    base = int(ipaddress.ip_address("198.19.0.0"))
    t0 = dt.datetime.now(dt.timezone.utc)
    for i in range(n):
        yield (run_id, 1, i + 1, f"h{i}.test", ipaddress.ip_address(base + (i & 0xFFFF)), 443, "success", "syn-ack",
               "rfc7413", (i & 0xFFFFFFFF).to_bytes(8, "big"), 8, t0 + dt.timedelta(microseconds=i))


def bench_tfo_probe(server: str, n: int) -> None:
    import shutil

    from netsurvey.db import migration_files

    results = []
    for _attempt in range(2):
        for label, upto in [("tfo_probe, plain table (migrations < 0150)", "0150"),
                            ("tfo_probe, partition per run (0150)", "9999")]:
            name = "bench_" + uuid.uuid4().hex[:8]
            with psycopg.connect(server, autocommit=True) as c:
                c.execute(f"CREATE DATABASE {name}")
            db = Database(make_conninfo(server, dbname=name))
            sd = Path(tempfile.mkdtemp(prefix="ns-schema-"))
            for p in migration_files():
                if p.name < upto:
                    shutil.copy(p, sd)
            db.migrate(sd)
            with db.connect() as c:
                run_id = c.execute("INSERT INTO scan_run (kind) VALUES ('tfo-lb') RETURNING id").fetchone()[0]
                c.commit()
            t0 = time.perf_counter()
            with ResultWriter(db, "tfo_probe", TFO_COLS, types=TFO_TYPES, batch_rows=10_000) as w:
                for r in tfo_rows(run_id, n):
                    w.write(r)
            dt = time.perf_counter() - t0
            with db.connect() as c:
                assert c.execute("SELECT count(*) FROM tfo_probe WHERE run_id = %s", (run_id,)).fetchone()[0] == n
            results.append((label, n, n / dt))
            shutil.rmtree(sd)
            with psycopg.connect(server, autocommit=True) as c:
                c.execute(f"DROP DATABASE {name}")
    print(f"{'into':44} {'rows':>9} {'rows/s':>11}")
    for label, n, rate in results:
        print(f"{label:44} {n:9d} {rate:11,.0f}")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--dsn", default=None)
    ap.add_argument("--tfo-probe", action="store_true",
                    help="rows/s into tfo_probe without and with the run partitions (0150)")
    a = ap.parse_args()
    tmp = None
    if a.dsn:
        server = a.dsn
    else:
        tmp = Path(tempfile.mkdtemp(prefix="ns-bench-"))
        tmp.chmod(0o755)  # the embedded server's own user (root runs it as another) must enter it
        tmp = tmp / "pgdata"
        server = Database.resolve(None, tmp).dsn
    if a.tfo_probe:
        bench_tfo_probe(server, a.rows)
        if tmp:
            stop_embedded(tmp)
        return
    name = "bench_" + uuid.uuid4().hex[:8]
    with psycopg.connect(server, autocommit=True) as c:
        c.execute(f"CREATE DATABASE {name}")
    db = Database(make_conninfo(server, dbname=name))
    with db.connect(autocommit=True) as c:
        c.execute("CREATE UNLOGGED TABLE b (run_id bigint, address inet, port int, cookie bytea, rtt_ms float8)")
        c.execute("CREATE UNLOGGED TABLE b2 (run_id bigint, port int, cookie bytea, rtt_ms float8, host text)")
    results = []
    for label, binary, n in [("ResultWriter COPY binary", True, a.rows), ("ResultWriter COPY text", False, a.rows),
                             ("ResultWriter binary, no inet", True, a.rows),
                             ("psycopg executemany", False, min(a.rows, 100_000))]:
        with db.connect(autocommit=True) as c:
            c.execute("TRUNCATE b; TRUNCATE b2")
        before = rss_mib()
        t0 = time.perf_counter()
        if "no inet" in label:
            with ResultWriter(db, "b2", ["run_id", "port", "cookie", "rtt_ms", "host"],
                              types=["int8", "int4", "bytea", "float8", "text"], batch_rows=50_000) as w:
                for r in rows_no_inet(n):
                    w.write(r)
        elif label.startswith("ResultWriter"):
            with ResultWriter(db, "b", COLS, types=TYPES if binary else None, batch_rows=50_000) as w:
                for r in rows(n, binary):
                    w.write(r)
        else:
            with db.connect() as c:
                c.cursor().executemany("INSERT INTO b VALUES (%s,%s,%s,%s,%s)", list(rows(n, False)))
        dt = time.perf_counter() - t0
        with db.connect() as c:
            assert c.execute("SELECT (SELECT count(*) FROM b) + (SELECT count(*) FROM b2)").fetchone()[0] == n
        results.append((label, n, n / dt, rss_mib() - before))
    base = results[-1][2]
    print(f"{'method':28} {'rows':>9} {'rows/s':>11} {'x executemany':>14} {'peak RSS +MiB':>14}")
    for label, n, rate, mem in results:
        print(f"{label:28} {n:9d} {rate:11,.0f} {rate / base:14.1f} {mem:14.1f}")
    if tmp:
        stop_embedded(tmp)


if __name__ == "__main__":
    main()
