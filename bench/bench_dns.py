"""DNS query throughput against the testbed's knot, side by side in one run:
netsurvey's query engine (adaptive window) in one process and in one process per core
(what ``scan dns-ttl --procs N`` runs: N shards split by the same stable hash, each with
its own engine) vs zdns v2.0.5 (pinned, tools/go; goroutines on every core) vs sequential
dnspython, over the same N names (default 10,000; the testbed zone has a wildcard
*.bench.example.test, so every name has an A record). Rounds alternate between the tools;
medians are reported with the ratios to zdns, CPU per query and answers lost.

    python3 bench/bench_dns.py [--names 10000] [--rounds 3] [--procs 2] [--e2e-names 100000] [--json]

Then the same comparison for whole commands over --e2e-names names: ``netsurvey scan
dns-ttl --types A`` (start-up, PostgreSQL writes, the run committed; inline and with
--procs) vs the zdns command writing its JSON file.

Run as root with the testbed up (`netsurvey testbed up`); the measuring part re-runs
itself inside the vantage namespace through `netsurvey testbed exec`. Sends traffic only to
the testbed's authoritative server.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
ZONE = "bench.example.test"
EXPECTED = "198.18.2.250"


def _names(n: int, rnd: int) -> list[str]:
    return [f"r{rnd}n{i}.{ZONE}" for i in range(n)]  # fresh names per round: no caching anywhere


def run_netsurvey(server: str, names: list[str], fixed_window: int | None = None, workers: int = 1000,
                  ready=None, shards: int = 1) -> dict:
    """Query building, the engine and ``classify`` (reply -> TtlProbe), as the TTL scanner
    does them; no database writes. ``workers`` coroutines each take the next name (like zdns's threads); the
    per-server window inside the engine bounds the queries in flight."""
    from scanners.dns.engine import EngineOptions, QueryEngine
    from scanners.dns.ttl import classify
    from scanners.dns.wire import A, build_query

    opts = EngineOptions(retries=4).shared_by(shards)  # the scanner defaults, more retries; a shard's share
    if fixed_window:
        opts = EngineOptions(window_initial=fixed_window, window_min=fixed_window, window_max=fixed_window, retries=4)

    async def main():
        eng = QueryEngine(opts)
        await eng.start()
        if ready is not None:
            ready()  # e.g. a barrier: every process starts its clock together
        ok = 0
        todo = iter(names)

        async def worker():
            nonlocal ok
            for name in todo:
                # built on the clock, once per name, as the scanner does (zdns does too)
                ex = await eng.query(server, 53, build_query(name, A))
                p = classify("A", name, ex, ZONE)
                if p.outcome == "answer" and p.answers == (EXPECTED,):
                    ok += 1

        c0, t0 = time.process_time(), time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(workers)))
        t1, c1 = time.perf_counter(), time.process_time()
        eng.close()
        return {"seconds": t1 - t0, "cpu_s": c1 - c0, "answers": ok, "stats": eng.stats}

    from netsurvey import aio

    return aio.run(main())  # the scanner's loop (uvloop when installed)


def run_netsurvey_procs(server: str, names: list[str], procs: int) -> dict:
    """``procs`` processes, each running :func:`run_netsurvey` over its shard of the names
    (``netsurvey.shard.shard_of``, as ``scan ... --procs`` splits them, each engine with a
    shard's share of the per-server window: ``EngineOptions.shared_by``); the clock runs from
    the moment every process has opened its sockets until the last one is done. CPU is
    the sum over the processes (seconds)."""
    import multiprocessing as mp

    from netsurvey.shard import shard_of

    ctx = mp.get_context("fork")
    barrier, results = ctx.Barrier(procs + 1), ctx.Queue()
    parts = [[] for _ in range(procs)]
    for n in names:
        parts[shard_of(n, procs)].append(n)

    def child(part: list[str]) -> None:
        r = run_netsurvey(server, part, ready=barrier.wait, shards=procs)
        results.put({"end": time.perf_counter(), "cpu_s": r["cpu_s"], "answers": r["answers"], "stats": r["stats"]})

    ps = [ctx.Process(target=child, args=(part,)) for part in parts]
    for p in ps:
        p.start()
    barrier.wait(timeout=120)
    t0 = time.perf_counter()
    rs = [results.get(timeout=300) for _ in ps]
    for p in ps:
        p.join()
    stats = {k: sum(r["stats"][k] for r in rs) for k in ("retransmits", "timeouts", "window_cuts")}
    stats["window_peak"] = max(r["stats"]["window_peak"] for r in rs)
    return {"seconds": max(r["end"] for r in rs) - t0, "cpu_s": sum(r["cpu_s"] for r in rs),
            "answers": sum(r["answers"] for r in rs), "stats": stats}


def run_zdns(server: str, names: list[str], threads: int) -> dict:
    zdns = REPO / "tools" / "go" / "bin" / "zdns"
    with tempfile.TemporaryDirectory() as d:
        inp, outp = Path(d) / "in.txt", Path(d) / "out.json"
        inp.write_text("\n".join(names) + "\n")
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.perf_counter()
        subprocess.run([str(zdns), "A", "--name-servers", f"{server}:53", "--threads", str(threads), "-f", str(inp),
                        "-o", str(outp), "-q", "--udp-only", "--timeout", "10", "--network-timeout", "1"],
                       check=True, capture_output=True, timeout=180)
        t1 = time.perf_counter()
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        ok = 0
        for line in outp.read_text().splitlines():
            r = json.loads(line)
            res = r.get("results", {}).get("A", r)
            data = res.get("data", {})
            ans = [a.get("answer") for a in data.get("answers", []) if a.get("type") == "A"]
            if res.get("status") == "NOERROR" and ans == [EXPECTED]:
                ok += 1
    cpu = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    return {"seconds": t1 - t0, "cpu_s": cpu, "answers": ok, "maxrss_mib": after.ru_maxrss / 1024}


def run_dnspython(server: str, names: list[str]) -> dict:
    import dns.message
    import dns.query

    ok = 0
    c0, t0 = time.process_time(), time.perf_counter()
    for n in names:
        try:
            r = dns.query.udp(dns.message.make_query(n, "A"), server, timeout=2)
        except Exception:
            continue
        if r.rcode() == 0 and [x.to_text() for rr in r.answer for x in rr] == [EXPECTED]:
            ok += 1
    t1, c1 = time.perf_counter(), time.process_time()
    return {"seconds": t1 - t0, "cpu_s": c1 - c0, "answers": ok}


def run_scan_command(server: str, listname: str, n: int, procs: int, config: Path) -> dict:
    """The whole ``netsurvey scan dns-ttl --types A`` command as a researcher runs it:
    Python start-up, target selection, the scan, every row written to PostgreSQL (the
    default database), the run committed. Wall seconds of the process."""
    argv = [sys.executable, "-m", "netsurvey.cli", "--config", str(config), "scan", "dns-ttl", "--types", "A",
            "--list", listname, "--nameserver", server, "--json"] + (["--procs", str(procs)] if procs > 1 else [])
    t0 = time.perf_counter()
    p = subprocess.run(argv, capture_output=True, text=True, cwd=REPO, timeout=900)
    seconds = time.perf_counter() - t0
    if p.returncode != 0:
        raise SystemExit(f"scan dns-ttl failed: {p.stderr[-1000:]}")
    run = json.loads(p.stdout.strip().splitlines()[-1])  # with --procs: the run's line, after the shards'
    return {"seconds": seconds, "answers": int(run["counts"].get("success", 0))}


def end_to_end(args, server: str) -> dict:
    """Whole commands over ``--e2e-names`` names, alternating: netsurvey's scanner (one
    process, and ``--procs``) storing in PostgreSQL vs zdns writing its JSON file. The
    etiquette limits are lifted for this comparison (a temporary config)."""
    n = args.e2e_names
    listname = f"bench-dns-e2e-{n}"
    with tempfile.TemporaryDirectory() as d:
        cfg = Path(d) / "survey.toml"
        cfg.write_text("[etiquette]\nrate_pps = 10000000\nper_destination_pps = 10000000\n")
        csv = Path(d) / "list.csv"
        csv.write_text("".join(f"{i},e{i}.{ZONE}\n" for i in range(1, n + 1)))
        subprocess.run([sys.executable, "-m", "netsurvey.cli", "--config", str(cfg), "targets", "import", str(csv), "--replace",
                        "--list", listname], check=True, capture_output=True, cwd=REPO)
        rows: dict[str, list[dict]] = {"scan dns-ttl": [], f"scan dns-ttl --procs {args.procs}": [], "zdns": []}
        for rnd in range(args.rounds):
            rows["zdns"].append(run_zdns(server, [f"e{rnd}z{i}.{ZONE}" for i in range(n)], args.zdns_threads))
            rows[f"scan dns-ttl --procs {args.procs}"].append(run_scan_command(server, listname, n, args.procs, cfg))
            rows["scan dns-ttl"].append(run_scan_command(server, listname, n, 1, cfg))
    out = {"names": n, "tools": {}}
    for tool, rs in rows.items():
        out["tools"][tool] = {"seconds_median": statistics.median(r["seconds"] for r in rs),
                              "qps_median": statistics.median(n / r["seconds"] for r in rs),
                              "seconds_all": [round(r["seconds"], 2) for r in rs],
                              "lost_max": n - min(r["answers"] for r in rs)}
    z = out["tools"]["zdns"]["qps_median"]
    for tool in rows:
        out["tools"][tool]["ratio_vs_zdns"] = out["tools"][tool]["qps_median"] / z
    return out


def inner(args) -> dict:
    server = args.server
    procs = f"netsurvey-procs{args.procs}"
    rows: dict[str, list[dict]] = {procs: [], "netsurvey": [], "netsurvey-fixed200": [], "zdns": [],
                                   "dnspython-seq": []}
    for rnd in range(args.rounds):
        names = _names(args.names, rnd)
        rows["zdns"].append(run_zdns(server, [n.replace("n", "z", 1) for n in names], args.zdns_threads))
        rows[procs].append(run_netsurvey_procs(server, [n.replace("n", "p", 1) for n in names], args.procs))
        rows["netsurvey"].append(run_netsurvey(server, names))
        rows["netsurvey-fixed200"].append(run_netsurvey(server, [n.replace("n", "f", 1) for n in names], 200))
        if rnd == 0 or not args.quick_seq:
            rows["dnspython-seq"].append(run_dnspython(server, [n.replace("n", "s", 1) for n in names]))
    from netsurvey.aio import loop_name

    out = {"names": args.names, "rounds": args.rounds, "server": server, "event_loop": loop_name(), "tools": {}}
    for tool, rs in rows.items():
        qps = [args.names / r["seconds"] for r in rs]
        out["tools"][tool] = {
            "qps_median": statistics.median(qps), "qps_all": [round(q) for q in qps],
            "cpu_us_per_query": statistics.median(r["cpu_s"] / args.names * 1e6 for r in rs),
            "answers_min": min(r["answers"] for r in rs), "lost_max": args.names - min(r["answers"] for r in rs),
        }
        if "stats" in rs[0]:
            for k in ("retransmits", "timeouts", "window_cuts", "window_peak"):
                out["tools"][tool][k + "_median"] = statistics.median(r["stats"][k] for r in rs)
    out["maxrss_mib_netsurvey_process"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    out["maxrss_mib_zdns"] = max(r.get("maxrss_mib", 0) for r in rows["zdns"])
    z = out["tools"]["zdns"]["qps_median"]
    out["procs"] = args.procs
    out["ratio_netsurvey_procs_vs_zdns"] = out["tools"][procs]["qps_median"] / z
    out["ratio_netsurvey_procs_vs_zdns_per_round"] = [
        round(a["seconds"] and b["seconds"] / a["seconds"], 2) for a, b in zip(rows[procs], rows["zdns"])]
    out["ratio_netsurvey_vs_zdns"] = out["tools"]["netsurvey"]["qps_median"] / z
    out["ratio_dnspython_vs_zdns"] = out["tools"]["dnspython-seq"]["qps_median"] / z
    # On a shared, loaded machine wall-clock rates follow the CPU share each tool gets;
    # CPU time per query is the steadier comparison.
    out["cpu_ratio_zdns_vs_netsurvey"] = (out["tools"]["zdns"]["cpu_us_per_query"]
                                          / out["tools"]["netsurvey"]["cpu_us_per_query"])
    out["loadavg_1min"] = os.getloadavg()[0]
    if args.e2e_names:
        out["end_to_end"] = end_to_end(args, server)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--names", type=int, default=10_000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--zdns-threads", type=int, default=100)
    ap.add_argument("--e2e-names", type=int, default=100_000,
                    help="names of the whole-command comparison (scan dns-ttl with PostgreSQL vs zdns); 0 = skip")
    ap.add_argument("--procs", type=int, default=os.cpu_count() or 2,
                    help="engine processes of the multi-process row (default: one per core)")
    ap.add_argument("--server", default=None, help="authoritative address (default: the testbed's knot)")
    ap.add_argument("--quick-seq", action="store_true", help="run sequential dnspython in the first round only")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--inner", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.inner:
        print(json.dumps(inner(args)))
        return
    if not (REPO / "tools" / "go" / "bin" / "zdns").exists():
        subprocess.run(["bash", str(REPO / "scripts" / "build_go_tools.sh"), "zdns"], check=True)
    from testbed.model import DEFAULT_TESTBED_CONFIG, load_testbed_config

    server = args.server or load_testbed_config(DEFAULT_TESTBED_CONFIG).dns.authoritative_v4
    argv = [sys.executable, "-m", "netsurvey.cli", "testbed", "exec", "--", sys.executable, str(Path(__file__).resolve()),
            "--inner", "--names", str(args.names), "--rounds", str(args.rounds), "--server", server,
            "--zdns-threads", str(args.zdns_threads), "--procs", str(args.procs), "--e2e-names", str(args.e2e_names)] + (["--quick-seq"] if args.quick_seq else [])
    p = subprocess.run(argv, capture_output=True, text=True, cwd=REPO)
    if p.returncode != 0:
        sys.exit(f"bench failed: {p.stderr[-2000:]}")
    res = json.loads(p.stdout.strip().splitlines()[-1])
    if args.json:
        print(json.dumps(res, indent=1))
        return
    print(f"{res['names']} A queries at {res['server']} (knot), {res['rounds']} alternating rounds, medians; "
          f"zdns --threads {args.zdns_threads}; netsurvey on the {res['event_loop']} event loop")
    print(f"{'tool':22} {'queries/s':>10} {'CPU us/query':>13} {'lost':>6} {'retx':>6} {'cuts':>5} {'peak':>5}"
          "  per round")
    for tool, r in res["tools"].items():
        retx, cuts, peak = (r.get(k + "_median", "-") for k in ("retransmits", "window_cuts", "window_peak"))
        print(f"{tool:22} {r['qps_median']:10.0f} {r['cpu_us_per_query']:13.1f} {r['lost_max']:6d} {retx:>6} {cuts:>5} "
              f"{peak:>5}  {r['qps_all']}")
    print(f"ratio netsurvey --procs {res['procs']} / zdns: {res['ratio_netsurvey_procs_vs_zdns']:.2f}x queries/s "
          f"(per round {res['ratio_netsurvey_procs_vs_zdns_per_round']})")
    print(f"ratio netsurvey (one process) / zdns: {res['ratio_netsurvey_vs_zdns']:.2f}x queries/s, "
          f"{res['cpu_ratio_zdns_vs_netsurvey']:.2f}x less CPU per query (load average {res['loadavg_1min']:.1f}); "
          f"max RSS netsurvey process {res['maxrss_mib_netsurvey_process']:.0f} MiB, zdns {res['maxrss_mib_zdns']:.0f} MiB")
    e2e = res.get("end_to_end")
    if e2e:
        print(f"\nwhole commands over {e2e['names']} names (start-up and storage included: PostgreSQL for netsurvey, "
              "a JSON file for zdns), medians")
        print(f"{'command':28} {'seconds':>8} {'names/s':>8} {'lost':>6} {'vs zdns':>8}  per round")
        for tool, r in e2e["tools"].items():
            print(f"{tool:28} {r['seconds_median']:8.2f} {r['qps_median']:8.0f} {r['lost_max']:6d} "
                  f"{r['ratio_vs_zdns']:7.2f}x  {r['seconds_all']}")


if __name__ == "__main__":
    main()
