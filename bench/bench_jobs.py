"""Queue throughput and sharding overhead, in one run (needs root and the testbed).

1. Trivial tasks through procrastinate: defer N no-op tasks in bulk, run them with one
   in-process worker (concurrency 10); tasks/s.
2. Sharding overhead (workers already running, as in production; their start-up and
   shut-down are not counted): the same scan (default `scan dns-ttl`, CPU-bound Python, over K
   names of the testbed's wildcard *.bench.example.test; any scan argv with --scan, e.g.
   the test plugin "scan tcp-connect --list {list}") run (a) inline, (b) as 4 shards
   with one worker, (c) as 4 shards with two workers; wall seconds and ratios.

Usage: python bench/bench_jobs.py [--tasks 2000] [--targets 10000]
       [--scan "scan tls --list {list} --no-verify --tls 1.2" --zone tlsbench.example.test]
"""
from __future__ import annotations

import argparse
import asyncio
import os
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

import procrastinate  # noqa: E402
import psycopg  # noqa: E402
from psycopg.conninfo import make_conninfo  # noqa: E402

from netsurvey.db import Database, stop_embedded  # noqa: E402
from netsurvey.jobs import ensure_queue_schema  # noqa: E402

ENV = dict(os.environ, NETSURVEY_PLUGINS="tests.support.plugins.tcp_connect_scan", PYTHONPATH=str(REPO))
ENV.pop("NETSURVEY_DSN", None)


def cli(db, *args, inside=True, wait=True):
    argv = [sys.executable, "-m", "netsurvey.cli"]
    if inside:
        argv += ["testbed", "exec", "--", sys.executable, "-m", "netsurvey.cli"]
    argv += ["--dsn", db.dsn, *args]
    if wait:
        return subprocess.run(argv, cwd=REPO, env=ENV, capture_output=True, text=True, check=True)
    return subprocess.Popen(argv, cwd=REPO, env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def bench_trivial(db, n: int) -> float:
    app = procrastinate.App(connector=procrastinate.PsycopgConnector(conninfo=db.dsn))

    @app.task(name="noop", queue="bench")
    def noop(i: int) -> None:
        return None

    ensure_queue_schema(db, app)

    async def go():
        async with app.open_async():
            await noop.batch_defer_async(*({"i": i} for i in range(n)))
            t0 = time.perf_counter()
            await app.run_worker_async(queues=["bench"], concurrency=10, wait=False, install_signal_handlers=False)
            return time.perf_counter() - t0

    return n / asyncio.run(go())


def cpu_seconds() -> tuple[float, float]:
    """(CPU seconds used by the whole machine, by nginx processes) so far, from /proc."""
    hz = os.sysconf("SC_CLK_TCK")
    with open("/proc/stat") as f:
        fields = [int(x) for x in f.readline().split()[1:]]
    busy = sum(fields) - fields[3] - fields[4]          # minus idle and iowait
    nginx = 0
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/stat") as f:
                st = f.read()
        except OSError:
            continue
        if "(nginx)" in st:
            rest = st.rsplit(")", 1)[1].split()
            nginx += int(rest[11]) + int(rest[12])      # utime + stime
    return busy / hz, nginx / hz


CPU: dict[str, tuple[float, float]] = {}


def wait_time_wait_drained(limit: int = 100, timeout: float = 90.0) -> None:
    """Wait until the vantage namespace holds fewer than ``limit`` TIME_WAIT sockets: a scan
    of 10,000 names (one testbed address) leaves 10,000 of them for 60 s, and the next
    run's connect() then spends its time searching the ephemeral range for a free port
    (this made whichever run came second ~1.8x slower)."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        out = subprocess.run(["ip", "netns", "exec", "nstb-vantage", "ss", "-Htan", "state", "time-wait"],
                             capture_output=True, text=True).stdout
        if out.count("\n") < limit:
            return
        time.sleep(1.0)


def timed_scan(db, scan_argv: list[str], shards: int | None, workers: int) -> float:
    """Wall seconds from starting the scan (or queueing its shards, with ``workers``
    long-running workers already waiting) until the run is finished. Also records the CPU
    seconds the machine and nginx used meanwhile in ``CPU``. Every run starts with the
    vantage's TIME_WAIT sockets of the previous run gone."""
    wait_time_wait_drained()
    if shards is None:
        c0 = cpu_seconds()
        t0 = time.perf_counter()
        cli(db, *scan_argv)
        el = time.perf_counter() - t0
        c1 = cpu_seconds()
        CPU["inline"] = (c1[0] - c0[0], c1[1] - c0[1])
        return el
    ps = [cli(db, "worker", wait=False) for _ in range(workers)]
    time.sleep(3)  # workers started and listening (not part of the measured time)
    try:
        c0 = cpu_seconds()
        t0 = time.perf_counter()
        out = cli(db, *scan_argv, "--shards", str(shards), inside=False).stdout
        run_id = int(out.split("queued run ")[1].split(":")[0])
        with psycopg.connect(db.dsn, autocommit=True) as c:
            while c.execute("SELECT status FROM scan_run WHERE id = %s", (run_id,)).fetchone()[0] != "finished":
                time.sleep(0.05)
        el = time.perf_counter() - t0
        c1 = cpu_seconds()
        CPU[f"{shards}x{workers}"] = (c1[0] - c0[0], c1[1] - c0[1])
        return el
    finally:
        for p in ps:
            p.terminate()
            p.wait()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tasks", type=int, default=2000)
    ap.add_argument("--targets", type=int, default=10000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--scan", default="scan dns-ttl --list {list}")
    ap.add_argument("--zone", default="bench.example.test",
                    help="names are h<i>.<zone>; tlsbench.example.test is served by nginx (TLS scans)")
    a = ap.parse_args()
    subprocess.run([sys.executable, "-m", "netsurvey.cli", "testbed", "up"], cwd=REPO, check=True,
                   capture_output=True)
    tmp = Path(tempfile.mkdtemp(prefix="ns-bench-jobs-"))
    os.chmod(tmp, 0o755)
    server = Database.resolve(None, tmp / "pgdata").dsn
    name = "bench_" + uuid.uuid4().hex[:8]
    with psycopg.connect(server, autocommit=True) as c:
        c.execute(f"CREATE DATABASE {name}")
    db = Database(make_conninfo(server, dbname=name))
    db.migrate()
    rate = bench_trivial(db, a.tasks)
    # CPU-bound comparison: lift the etiquette limits (all names share one testbed address)
    cfg = tmp / "survey.toml"
    cfg.write_text("[etiquette]\nrate_pps = 1000000\nper_destination_pps = 1000000\n")
    ENV["NETSURVEY_CONFIG"] = str(cfg)
    lst = tmp / "list.csv"
    lst.write_text("".join(f"{i},h{i}.{a.zone}\n" for i in range(1, a.targets + 1)))
    cli(db, "targets", "import", str(lst), "--list", "bench", inside=False)
    scan = shlex.split(a.scan.format(list="bench"))
    # alternating rounds: this machine's speed drifts by tens of percent over minutes, so each
    # round's ratio compares runs made back to back; medians over rounds
    rounds = {"inline": [], "4x1": [], "4x2": []}
    cpu: dict[str, list] = {k: [] for k in rounds}
    for r in range(a.rounds):
        rounds["inline"].append(timed_scan(db, scan, None, 0))
        rounds["4x1"].append(timed_scan(db, scan, 4, 1))
        rounds["4x2"].append(timed_scan(db, scan, 4, 2))
        for k in rounds:
            cpu[k].append(CPU[k])
        print(f"round {r + 1}: inline {rounds['inline'][-1]:.2f} s, 4 shards/1 worker {rounds['4x1'][-1]:.2f} s, "
              f"4 shards/2 workers {rounds['4x2'][-1]:.2f} s", flush=True)
    med = statistics.median
    inline, one, two = med(rounds["inline"]), med(rounds["4x1"]), med(rounds["4x2"])
    r1 = med(o / i for o, i in zip(rounds["4x1"], rounds["inline"]))
    r2 = med(i / t for i, t in zip(rounds["inline"], rounds["4x2"]))
    print(f"trivial tasks: {a.tasks} in-process, concurrency 10: {rate:,.0f} tasks/s")
    print(f"scan: {' '.join(scan)} over {a.targets} targets, {a.rounds} alternating rounds, medians")
    print(f"  inline          {inline:7.2f} s   1.00x")
    print(f"  4 shards, 1 wkr {one:7.2f} s   {one / inline:.2f}x time (overhead {100 * (one / inline - 1):+.0f}%; "
          f"median per-round {100 * (r1 - 1):+.0f}%)")
    print(f"  4 shards, 2 wkr {two:7.2f} s   {two / inline:.2f}x time (speed-up {inline / two:.2f}x; "
          f"median per-round {r2:.2f}x)")
    ncpu = os.cpu_count() or 1
    for k, vals in cpu.items():
        busy, ngx = med(v[0] for v in vals), med(v[1] for v in vals)
        print(f"  CPU during {k:7s}: machine {busy:6.1f} s (nginx {ngx:5.1f} s), median")
    busy = med(v[0] for v in cpu["inline"])
    print(f"  bound with {ncpu} cores: the inline run's CPU {busy:.1f} s / {ncpu} = {busy / ncpu:.1f} s wall, "
          f"i.e. at most {inline / max(busy / ncpu, 1e-9):.2f}x faster than inline")
    stop_embedded(tmp / "pgdata")


if __name__ == "__main__":
    main()
