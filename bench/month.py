"""A month of data (issue 26, item 6): load N observation rows into the run-partitioned
``tfo_probe`` and draw the TFO load-balancing figures from all of them with the project's own
``netsurvey plot``, measuring wall time and peak memory of the plot process and of the
database server, temp bytes the server spilled, and the database's size.

The month: ``--runs`` daily campaigns (30), each a ``tfo-lb`` survey (kind of Figs 3.2 and
3.3) of ``--hosts`` hostnames (1M, Tranco-like ranks), rows spread evenly over the runs, so
each run probes every hostname ``rows / (runs x hosts)`` times (rounds 1, 2, ... ; the last
round covers the first hosts only). Per hostname, fixed over the month (a hash of the rank):
5 % NXDOMAIN, 10 % silent, 3 % RST, 2 % TFO at every connection and 0.5 % at every other;
addresses per hostname 70 % one, 25 % 2-4 (load balancers), 5 % 8 (CDNs), TFO hostnames more
often several (20/60/20 %), each connection going to one of them at random; 1 % probe loss;
SYN-ACK options as a Linux server's; each run's rows are timestamped over its day in order
(what the writer's appends give).

Loading: server side with ``generate_series`` into the parent table (INSERT ... SELECT, one
statement per run; rows are routed to the run's partition like the writer's COPY, through the
same indexes). The writer (binary COPY, bench/bench_writer.py) does ~150K rows/s here, so
100M rows through it would take ~11 min of Python per vantage; the server-side load measures
the database, which is what this bench is about.

Usage (not part of make test; needs rows x ~200 bytes of disk):

    python bench/month.py --rows 10000000                # 10M rows, embedded server in a temp dir
    python bench/month.py --rows 100000000 --keep        # keep the database (prints its DSN)
    python bench/month.py --dsn postgresql://...         # a server of yours (a new database in it)

The bench database (or the temporary embedded cluster) is deleted at the end unless --keep.
"""
from __future__ import annotations

import argparse
import datetime as dt
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import psutil  # noqa: E402
import psycopg  # noqa: E402
from psycopg.conninfo import make_conninfo  # noqa: E402

from netsurvey.db import Database, stop_embedded  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
FIGURES = ["tfo-lb-failure-rate", "tfo-addresses-per-host"]

# One run (a day's tfo-lb campaign): row i of the run probes hostname h = 1 + i % hosts in
# round k = 1 + i / hosts. Per hostname (hash of h, fixed over the month): hh per mille: < 50
# NXDOMAIN, < 150 silent (timeout), < 180 RST, < 200 TFO at every connection, < 205 TFO at
# every other, else no TFO; addresses: TFO hostnames (CDNs) 20 % one, 60 % 2-4, 20 % 8; others
# 70 % one, 25 % 2-4, 5 % 8; each connection picks one of them at random. 1 % of the probes to
# answering hostnames time out (loss).
LOAD = """
INSERT INTO tfo_probe (run_id, round, rank, hostname, address, port, status, reply, tfo_kind, cookie,
                       cookie_len, options, rcv_window, error, probed_at)
SELECT %(run)s, k, h, 'h' || h || '.example.test',
       CASE WHEN o <> 'resolution-failed'
            THEN '198.18.0.0'::inet + ((h * 8 + (hashint8(h * 131 + k + %(run)s * 7) & 1023) %% nh) %% 131072) END,
       443, o,
       CASE o WHEN 'success' THEN 'syn-ack' WHEN 'connection-refused' THEN 'rst'
              WHEN 'connection-timeout' THEN 'timeout' END,
       CASE WHEN o = 'success' AND tfo THEN 'rfc7413' END,
       CASE WHEN o = 'success' AND tfo THEN int8send(hashint8(h)::bigint) END,
       CASE WHEN o = 'success' AND tfo THEN 8 END,
       CASE WHEN o = 'success' THEN ARRAY['mss=1460', 'sackok', 'ts', 'ws=7'] END,
       CASE WHEN o = 'success' THEN 65160 WHEN o = 'connection-refused' THEN 0 END,
       CASE o WHEN 'resolution-failed' THEN 'NXDOMAIN' END,
       %(day)s::timestamptz + make_interval(secs => i * 86400.0 / %(per_run)s)
FROM (SELECT i, h, k,
             CASE WHEN hh < 200 THEN (CASE WHEN ha < 20 THEN 1 WHEN ha < 80 THEN 2 + ha %% 3 ELSE 8 END)
                  ELSE (CASE WHEN ha < 70 THEN 1 WHEN ha < 95 THEN 2 + ha %% 3 ELSE 8 END) END AS nh,
             (hh >= 180 AND hh < 200) OR (hh >= 200 AND hh < 205 AND k %% 2 = 0) AS tfo,
             CASE WHEN hh < 50 THEN 'resolution-failed' WHEN hh < 150 THEN 'connection-timeout'
                  WHEN hh < 180 THEN 'connection-refused'
                  WHEN abs(hashint8(h * 7919 + k + %(run)s * 104729)) %% 100 = 0 THEN 'connection-timeout'
                  ELSE 'success' END AS o
      FROM (SELECT i, 1 + i %% %(hosts)s AS h, 1 + i / %(hosts)s AS k
            FROM generate_series(0::bigint, %(per_run)s - 1) i) a,
           LATERAL (SELECT abs(hashint8(a.h)) %% 1000 AS hh, abs(hashint8(a.h + 1000003)) %% 100 AS ha) x) b
"""


def server_sampler(dsn: str, stop: threading.Event, out: dict) -> None:
    """Peak over the server's processes (postmaster and its children) every 0.2 s: the sum of
    private anonymous memory (RssAnon: work_mem, hash tables, sorts) and the largest VmRSS."""
    with psycopg.connect(dsn) as c:   # a local server: the postmaster is our backend's parent
        root = psutil.Process(c.execute("SELECT pg_backend_pid()").fetchone()[0]).parent()
    peak_anon = peak_rss = 0
    while not stop.is_set():
        anon = 0
        for p in [root, *root.children(recursive=True)]:
            try:
                st = Path(f"/proc/{p.pid}/status").read_text()
            except OSError:
                continue
            f = {k: int(v.split()[0]) for k, v in (ln.split(":", 1) for ln in st.splitlines())
                 if k in ("VmRSS", "RssAnon")}
            anon += f.get("RssAnon", 0)
            peak_rss = max(peak_rss, f.get("VmRSS", 0))
        peak_anon = max(peak_anon, anon)
        stop.wait(0.2)
    out.update(server_anon_kib=peak_anon, server_proc_rss_kib=peak_rss)


def plot(dsn: str, figure: str, runs: list[int], out_dir: Path) -> dict:
    """Run `netsurvey plot FIGURE --run ...` as a child; its wall time and peak RSS (wait4)."""
    with psycopg.connect(dsn) as c:
        temp0 = c.execute("SELECT temp_bytes FROM pg_stat_database WHERE datname = current_database()").fetchone()[0]
    stop, srv = threading.Event(), {}
    th = threading.Thread(target=server_sampler, args=(dsn, stop, srv))
    th.start()
    env = {**os.environ, "NETSURVEY_DSN": dsn, "PYTHONPATH": str(REPO)}
    args = [sys.executable, "-m", "netsurvey.cli", "plot", figure, "--out", str(out_dir)]
    for r in runs:
        args += ["--run", str(r)]
    t0 = time.perf_counter()
    proc = subprocess.Popen(args, env=env, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    proc.returncode = os.waitstatus_to_exitcode(status)
    err = proc.stderr.read().decode()
    stop.set()
    th.join()
    if proc.returncode != 0:
        raise SystemExit(f"plot {figure} failed ({proc.returncode}): {err.strip()}")
    time.sleep(0.6)  # pg_stat_database is updated by the backend when it goes idle
    with psycopg.connect(dsn) as c:
        temp1 = c.execute("SELECT temp_bytes FROM pg_stat_database WHERE datname = current_database()").fetchone()[0]
    return {"figure": figure, "wall_s": wall, "plot_rss_mib": usage.ru_maxrss / 1024,
            "server_anon_mib": srv["server_anon_kib"] / 1024, "server_proc_rss_mib": srv["server_proc_rss_kib"] / 1024,
            "temp_mib": (temp1 - temp0) / 2**20}


def report(rows: int, results: list[dict], out_dir: Path) -> None:
    print("| figure | rows | plot wall s | plot peak RSS MiB | server peak anon MiB (all processes) "
          "| server largest process RSS MiB | server temp MiB |")
    print("|---|---|---|---|---|---|---|")
    for r in results:
        print(f"| {r['figure']} | {rows:,} | {r['wall_s']:.1f} | {r['plot_rss_mib']:.0f} | {r['server_anon_mib']:.0f} "
              f"| {r['server_proc_rss_mib']:.0f} | {r['temp_mib']:.0f} |")
    for f in sorted(out_dir.glob("*.csv")):
        print(f"\n{f.name}:\n{f.read_text().strip()}")
    shutil.rmtree(out_dir, ignore_errors=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=100_000_000)
    ap.add_argument("--runs", type=int, default=30, help="daily campaigns (runs)")
    ap.add_argument("--hosts", type=int, default=1_000_000, help="hostnames per campaign")
    ap.add_argument("--dsn", default=None, help="server to create the bench database in (default: embedded)")
    ap.add_argument("--figures", default=",".join(FIGURES))
    ap.add_argument("--jobs", type=int, default=2, help="runs loaded in parallel (connections)")
    ap.add_argument("--existing", default=None, metavar="DSN",
                    help="only draw the figures from a database loaded earlier with --keep")
    ap.add_argument("--keep", action="store_true", help="keep the bench database")
    a = ap.parse_args()
    if a.rows < a.runs or a.runs < 1 or a.hosts < 1:
        print("month.py: --rows must be at least --runs, both and --hosts positive", file=sys.stderr)
        raise SystemExit(2)
    if a.existing:  # a database this bench loaded earlier (--keep): measure the figures again
        db = Database(a.existing)
        with db.connect() as c:
            runs = [r[0] for r in c.execute("SELECT id FROM scan_run WHERE kind = 'tfo-lb' ORDER BY id")]
            rows = c.execute("SELECT count(*) FROM tfo_probe").fetchone()[0]
            version = c.execute("SHOW server_version").fetchone()[0]
        out_dir = Path(tempfile.mkdtemp(prefix="ns-month-figs-"))
        print(f"PostgreSQL {version}; {rows:,} tfo_probe rows in {len(runs)} runs (existing database)")
        report(rows, [plot(db.dsn, f, runs, out_dir) for f in a.figures.split(",") if f], out_dir)
        return
    tmp = None
    if a.dsn:
        server = a.dsn
    else:
        tmp = Path(tempfile.mkdtemp(prefix="ns-month-", dir="/var/tmp"))
        tmp.chmod(0o755)  # the embedded server's user (root runs it as another) must enter it
        server = Database.resolve(None, tmp / "pgdata").dsn
    name = "month_" + uuid.uuid4().hex[:8]
    with psycopg.connect(server, autocommit=True) as c:
        c.execute(f"CREATE DATABASE {name}")
        version = c.execute("SHOW server_version").fetchone()[0]
    db = Database(make_conninfo(server, dbname=name))
    db.migrate()
    per_run = a.rows // a.runs
    runs = []
    days = {}
    with db.connect(autocommit=True) as c:
        for d in range(a.runs):
            day = (dt.datetime(2026, 10, 1, tzinfo=dt.timezone.utc) + dt.timedelta(days=d)).isoformat()
            run = c.execute("INSERT INTO scan_run (kind, status, started_at, finished_at, parameters) VALUES"
                            " ('tfo-lb', 'finished', %s::timestamptz, %s::timestamptz + interval '1 day',"
                            " '{\"bench\": \"month\"}') RETURNING id", (day, day)).fetchone()[0]
            runs.append(run)
            days[run] = day
    todo = list(runs)
    lock = threading.Lock()

    def loader() -> None:
        with db.connect(autocommit=True) as c:
            while True:
                with lock:
                    if not todo:
                        return
                    run = todo.pop(0)
                t0 = time.perf_counter()
                c.execute(LOAD, {"run": run, "hosts": a.hosts, "per_run": per_run, "day": days[run]})
                print(f"run {run}: {per_run} rows in {time.perf_counter() - t0:.1f} s", file=sys.stderr, flush=True)

    t_load = time.perf_counter()
    threads = [threading.Thread(target=loader) for _ in range(a.jobs)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    with db.connect(autocommit=True) as c:
        load_s = time.perf_counter() - t_load
        t0 = time.perf_counter()
        c.execute("ANALYZE tfo_probe")
        analyze_s = time.perf_counter() - t0
        size = c.execute("SELECT pg_database_size(current_database())").fetchone()[0]
        table = c.execute("SELECT pg_total_relation_size(c.oid) FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid"
                          " WHERE i.inhparent = 'tfo_probe'::regclass").fetchall()
        brin = c.execute("SELECT sum(pg_relation_size(i.indexrelid)) FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid"
                         " WHERE c.relname LIKE 'tfo_probe_r%%_probed_at_idx' OR c.relname LIKE 'tfo_probe%%brin%%'"
                         ).fetchone()[0]
        rows = c.execute("SELECT count(*) FROM tfo_probe").fetchone()[0]
        if rows != per_run * a.runs:
            raise SystemExit(f"month.py: loaded {rows} rows, expected {per_run * a.runs} (a loader failed)")
    out_dir = Path(tempfile.mkdtemp(prefix="ns-month-figs-"))
    results = [plot(db.dsn, f, runs, out_dir) for f in a.figures.split(",") if f]
    print(f"\nPostgreSQL {version}; {rows:,} tfo_probe rows in {a.runs} runs ({per_run:,} per run) over "
          f"{a.hosts:,} hostnames; loaded server-side (generate_series, {a.jobs} connections) in {load_s:.0f} s "
          f"({rows / load_s:,.0f} rows/s), ANALYZE {analyze_s:.0f} s")
    print(f"database {size / 2**30:.2f} GiB (tfo_probe partitions {sum(t[0] for t in table) / 2**30:.2f} GiB, "
          f"BRIN on probed_at {(brin or 0) / 2**20:.2f} MiB)\n")
    report(rows, results, out_dir)
    if a.keep:
        print(f"\nkept: {db.dsn}")
        return
    with psycopg.connect(server, autocommit=True) as c:
        c.execute(f"DROP DATABASE {name}")
    if tmp:
        stop_embedded(tmp / "pgdata")
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
