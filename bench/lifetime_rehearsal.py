"""Dress rehearsal of ``scan tls-lifetime`` (issue 26): the thesis's schedule (24 h / 5 min)
compressed in time over many testbed hosts, with peak RSS at several sizes (flat memory)
and the per-destination limit counted from the server side.

    python3 bench/lifetime_rehearsal.py --hosts 200,1000 [--factor 1440] [--lifetime-s 20]
        [--names-per-address 4] [--hosts-in-flight 200] [--pdp 20] [--out out/lifetime]

What it does, for each size N:
- a temporary nginx (1 worker) in the testbed's ``nstb-scale`` namespace, listening on port
  8443 of every address of 198.19.0.0/16 (the namespace answers the whole /16), with
  ``ssl_session_timeout`` = --lifetime-s (cache, ticket lifetime): the ground truth. It and
  the sniffer are stopped at the end; nothing in the namespace is changed otherwise.
- N targets NAME=ADDRESS, ``--names-per-address`` names on each address (as on a CDN:
  the per-destination limit is shared by them), given with --target.
- ``scan tls-lifetime --max-age 24h/F --step 5m/F`` (F = --factor) under /usr/bin/time -v
  (peak RSS, CPU), inside the testbed's vantage, with a config whose per-destination rate
  is --pdp.
- tests/support/sniffer.py in ``nstb-scale`` records every SYN-ACK the server sends: the largest
  number of connections one address accepted within any one second is reported next to the
  limit (not the scanner's counters).
Prints one JSON line per size and writes ``rehearsal.json`` / ``rehearsal.md`` to --out.
Only testbed addresses are contacted.
"""
from __future__ import annotations

import argparse
import ipaddress
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SNIFFER = REPO / "tests" / "support" / "sniffer.py"
PORT = 8443
NS = "nstb-scale"
NET = ipaddress.ip_network("198.19.0.0/16")


def start_nginx(work: Path, lifetime_s: float) -> subprocess.Popen:
    pki = Path(os.environ.get("NETSURVEY_TESTBED_DIR", "/run/netsurvey/testbed")) / "pki"
    cert = sorted(pki.glob("short.example.test-*.pem"))[0]
    (work / "logs").mkdir(parents=True, exist_ok=True)
    conf = work / "nginx.conf"
    conf.write_text(f"""daemon off;
master_process on;
worker_processes 1;
worker_rlimit_nofile 20000;
pid {work / 'nginx.pid'};
error_log {work / 'logs' / 'error.log'} warn;
events {{ worker_connections 16000; }}
http {{
    access_log off;
    client_body_temp_path {work}; proxy_temp_path {work}; fastcgi_temp_path {work};
    uwsgi_temp_path {work}; scgi_temp_path {work};
    server {{
        listen {PORT} ssl backlog=4096;
        ssl_certificate {cert};
        ssl_certificate_key {cert.with_suffix('.key')};
        ssl_protocols TLSv1.2 TLSv1.3;
        ssl_session_timeout {int(lifetime_s)}s;
        ssl_session_cache shared:rehearsal:64m;
        ssl_session_tickets on;
        location / {{ return 204; }}
    }}
}}
""")
    p = subprocess.Popen(["ip", "netns", "exec", NS, "nginx", "-c", str(conf), "-p", str(work)],
                         start_new_session=True)
    for _ in range(100):
        r = subprocess.run(["ip", "netns", "exec", NS, "ss", "-ltn", f"sport = :{PORT}"], capture_output=True, text=True)
        if f":{PORT}" in r.stdout:
            return p
        time.sleep(0.1)
    p.kill()
    raise SystemExit(f"nginx did not listen on :{PORT} in {NS}: {(work / 'logs' / 'error.log').read_text()[-500:]}")


def stop(p: subprocess.Popen, sig=signal.SIGTERM) -> None:
    try:
        os.killpg(p.pid, sig)
    except ProcessLookupError:
        return
    try:
        p.wait(timeout=20)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        p.wait()


def targets(n: int, per_address: int) -> list[tuple[str, str]]:
    base = int(NET.network_address) + 256          # skip 198.19.0.x
    return [(f"h{i}.lt{i // per_address}.rehearsal.test", str(ipaddress.ip_address(base + i // per_address)))
            for i in range(n)]


def time_v(stderr: str) -> dict:
    def get(label):
        m = re.search(rf"{re.escape(label)}: (.+)", stderr)
        return m.group(1).strip() if m else None
    wall = get("Elapsed (wall clock) time (h:mm:ss or m:ss)")
    parts = [float(x) for x in wall.split(":")] if wall else [0]
    secs = sum(v * 60 ** i for i, v in enumerate(reversed(parts)))
    if get("Maximum resident set size (kbytes)") is None:     # time(1) itself was killed
        return {"peak_rss_mb": None, "wall_s": None, "cpu_s": None}
    return {"peak_rss_mb": round(int(get("Maximum resident set size (kbytes)")) / 1024, 1),
            "wall_s": round(secs, 1), "cpu_s": round(float(get("User time (seconds)")) + float(get("System time (seconds)")), 1)}


def _descendants(pid: int) -> list[int]:
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        try:
            kids = Path(f"/proc/{p}/task/{p}/children").read_text().split()
        except OSError:
            continue
        out += [int(k) for k in kids]
        todo += [int(k) for k in kids]
    return out


def sample_rss(proc: subprocess.Popen, series: list, live: Path | None = None) -> None:
    """Every second: VmRSS (MiB) of the scanning python process below ``proc``; appended to
    ``live`` as it comes too (a run cut short still shows its memory over time)."""
    t0 = time.monotonic()
    f = live.open("w") if live else None
    while proc.poll() is None:
        for pid in _descendants(proc.pid):
            try:
                cmd = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
                status = Path(f"/proc/{pid}/status").read_text()
            except OSError:
                continue
            if b"tls-lifetime" in cmd and b"/usr/bin/time" not in cmd[0] and b"ip" != cmd[0]:
                m = re.search(r"VmRSS:\s+(\d+) kB", status)
                if m:
                    series.append((round(time.monotonic() - t0, 1), round(int(m.group(1)) / 1024, 1)))
                    if f:
                        f.write(json.dumps(series[-1]) + "\n")
                        f.flush()
                break
        time.sleep(1.0)


def run_size(n: int, a, work: Path) -> dict:
    cfg = work / "survey.toml"
    cfg.write_text(f'[etiquette]\nallow = ["198.18.0.0/15", "2001:2::/48"]\nrate_pps = {a.rate}\n'
                   f"per_destination_pps = {a.pdp}\n")
    tg = targets(n, a.names_per_address)
    pkts = work / f"synack-{n}.jsonl"
    sniff = subprocess.Popen(["ip", "netns", "exec", NS, sys.executable, str(SNIFFER), "--out", str(pkts), "--iface",
                              "eth0", "--seconds", "7200"], stdout=subprocess.PIPE, text=True, start_new_session=True)
    assert sniff.stdout.readline().strip() == "ready"
    max_age, step = 86400 / a.factor, 300 / a.factor
    argv = ["ip", "netns", "exec", "nstb-vantage", "/usr/bin/time", "-v", sys.executable,
            "-m", "netsurvey.cli", "--config", str(cfg), *(["--dsn", a.dsn] if a.dsn else []), "scan",
            "tls-lifetime", "--port", str(PORT), "--no-verify", "--no-ipv6", "--tls", a.tls, "--mechanism",
            a.mechanism, "--max-age", f"{max_age:g}", "--step", f"{step:g}", "--hosts-in-flight",
            str(a.hosts_in_flight), "--concurrency", str(a.concurrency), "--json"]
    if a.sessions:
        argv += ["--sessions", str(a.sessions)]
    for h, addr in tg:
        argv += ["--target", f"{h}={addr}"]
    import threading

    t0 = time.monotonic()
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO,
                            env=dict(os.environ, NETSURVEY_IN_TESTBED="1", PYTHONPATH=str(REPO)))
    series: list = []
    sampler = threading.Thread(target=sample_rss, args=(proc, series, a.out / f"rss-{n}.live.jsonl"), daemon=True)
    sampler.start()
    cut = False
    try:
        stdout, stderr = proc.communicate(timeout=a.time_limit_s or None)
    except subprocess.TimeoutExpired:
        # stopped like an operator would (SIGINT to the scanning process: the run ends
        # 'failed' and can be continued with --resume); what it did so far is analysed
        cut = True
        for pid in _descendants(proc.pid):
            try:
                if b"tls-lifetime" in Path(f"/proc/{pid}/cmdline").read_bytes() and \
                        not Path(f"/proc/{pid}/cmdline").read_bytes().startswith(b"/usr/bin/time"):
                    os.kill(pid, signal.SIGINT)
            except OSError:
                pass
        try:
            stdout, stderr = proc.communicate(timeout=120)
        except subprocess.TimeoutExpired:
            for pid in _descendants(proc.pid) + [proc.pid]:   # the scanner holds the pipes, not time(1)
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass
            stdout, stderr = proc.communicate()
    sampler.join()
    p = subprocess.CompletedProcess(argv, proc.returncode, stdout, stderr)
    wall = time.monotonic() - t0
    stop(sniff)
    tail = [l for l in sniff.stdout.read().splitlines() if l.startswith("{")]
    sniffed = json.loads(tail[-1]) if tail else {}     # {"packets", "kernel_drops"}: 0 drops = complete
    if p.returncode != 0 and not cut:
        raise SystemExit(f"scan failed ({p.returncode}): {p.stderr[-1500:]}")
    if cut:
        summary = run_counts(a)
    else:
        summary = json.loads(p.stdout.strip().splitlines()[-1])
    per = defaultdict(list)
    for line in pkts.read_text().splitlines():
        r = json.loads(line)
        if r.get("synack") and r.get("sport") == PORT:
            per[r["src"]].append(r["t"])
    worst, worst_addr, min_gap = 0, None, None
    for addr, ts in per.items():
        ts.sort()
        gaps = [b - a for a, b in zip(ts, ts[1:])]
        if gaps and (min_gap is None or min(gaps) < min_gap):
            min_gap = min(gaps)
        j = 0
        for i, t in enumerate(ts):        # sliding one-second window
            while ts[j] <= t - 1.0:
                j += 1
            if i - j + 1 > worst:
                worst, worst_addr = i - j + 1, addr
    if a.keep_packets:
        pkts.replace(a.out / pkts.name)
    else:
        pkts.unlink()
    return {"hosts": n, "cut_at_s": a.time_limit_s if cut else None, "addresses": len({x for _, x in tg}), "names_per_address": a.names_per_address,
            "factor": a.factor, "max_age_s": max_age, "step_s": step, "server_lifetime_s": a.lifetime_s,
            "thesis_equivalent_lifetime_h": round(a.lifetime_s * a.factor / 3600, 2),
            "run_id": summary["run_id"], "attempts": summary["attempts"], "slots": summary.get("slots"),
            "rounds_max": summary.get("rounds_max"), "sessions_peak": summary.get("sessions_peak"),
            "sessions_peak_per_target": summary.get("sessions_peak_per_target"),
            "server_connections": sum(len(v) for v in per.values()),
            "server_max_conn_per_address_per_s": worst,
            "server_min_gap_ms": round(min_gap * 1000, 2) if min_gap is not None else None, "sniffer_kernel_drops": sniffed.get("kernel_drops"), "worst_address": worst_addr, "pdp_limit": a.pdp,
            "command_wall_s": round(wall, 1), **time_v(p.stderr),
            "sampled_peak_rss_mb": max((r for _, r in series), default=None),
            "rss_mb_at_quarters": [series[min(len(series) - 1, int(len(series) * q))][1] for q in (0.25, 0.5, 0.75, 1.0)]
            if series else [], "rss_series": series}


def run_counts(a) -> dict:
    """The newest tls-lifetime run's id and attempts, from the database (a run cut short
    printed no summary); hosts whose chains all finished are counted as ``hosts_done``."""
    q = ("SELECT r.id, (SELECT count(*) FROM tls_resumption x WHERE x.run_id = r.id), "
         "(SELECT count(DISTINCT host) FROM tls_resumption x WHERE x.run_id = r.id) "
         "FROM scan_run r WHERE r.kind = 'tls-lifetime' ORDER BY r.id DESC LIMIT 1")
    p = subprocess.run([sys.executable, "-m", "netsurvey.cli", *(["--dsn", a.dsn] if a.dsn else []), "sql", q,
                        "--format", "csv"], capture_output=True, text=True, cwd=REPO)
    rid, attempts, hosts = (int(x) for x in p.stdout.strip().splitlines()[-1].split(","))
    return {"run_id": rid, "attempts": attempts, "hosts_attempted": hosts}


def measured(run_ids: list[int], a) -> dict:
    """Chains whose measured bracket is at most one step wide and lies within the server's
    lifetime +- 1 s (nginx and OpenSSL count session expiry in whole seconds)."""
    ids = ",".join(str(i) for i in run_ids)
    step = 300 / a.factor
    q = (f"SELECT run_id, count(*), count(*) FILTER (WHERE max_resumed_age_s >= {a.lifetime_s} - 1 "
         f"AND min_failed_age_s <= {a.lifetime_s} + 1 + {step} "
         f"AND min_failed_age_s - max_resumed_age_s <= {step} + 0.1) "
         f"FROM tls_lifetime_measured_v WHERE run_id IN ({ids}) GROUP BY 1")
    p = subprocess.run([sys.executable, "-m", "netsurvey.cli", *(["--dsn", a.dsn] if a.dsn else []), "sql", q,
                        "--format", "csv"], capture_output=True, text=True, cwd=REPO)
    out = {}
    for line in p.stdout.strip().splitlines()[1:]:
        rid, total, ok = (int(x) for x in line.split(","))
        out[rid] = (total, ok)
    return out


def main() -> int:
    global PORT
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hosts", default="200,1000", help="sizes (comma-separated)")
    ap.add_argument("--keep-packets", action="store_true", help="keep the server-side sniff (synack-N.jsonl) in --out")
    ap.add_argument("--factor", type=float, default=1440, help="time compression: 24 h / F, 5 min / F")
    ap.add_argument("--lifetime-s", type=float, default=20, help="the server's ssl_session_timeout")
    ap.add_argument("--names-per-address", type=int, default=4)
    ap.add_argument("--hosts-in-flight", type=int, default=200)
    ap.add_argument("--concurrency", type=int, default=100)
    ap.add_argument("--sessions", type=int, default=0, help="--sessions of the scan (0 = its default)")
    ap.add_argument("--tls", default="1.2")
    ap.add_argument("--mechanism", default="ticket")
    ap.add_argument("--pdp", type=float, default=20, help="per-destination limit, connections/s")
    ap.add_argument("--rate", type=float, default=10000, help="global limit, connections/s")
    ap.add_argument("--dsn", default=os.environ.get("NETSURVEY_DSN"))
    ap.add_argument("--out", type=Path, default=REPO / "out" / "lifetime")
    ap.add_argument("--time-limit-s", type=float, default=0, help="stop each size's scan after this long "
                    "(SIGINT: resumable with scan tls-lifetime --resume) and analyse what it did (0 = none)")
    ap.add_argument("--port", type=int, default=PORT, help="the temporary nginx's TCP port in nstb-scale "
                    "(bench/scale.py's TLS server uses 8443: give another to run both at once)")
    a = ap.parse_args()
    PORT = a.port
    a.out.mkdir(parents=True, exist_ok=True)
    results = []
    with tempfile.TemporaryDirectory(prefix="lt-rehearsal-") as d:
        work = Path(d)
        work.chmod(0o755)
        nginx = start_nginx(work, a.lifetime_s)
        try:
            for n in (int(x) for x in a.hosts.split(",")):
                r = run_size(n, a, work)
                results.append(r)
                print(json.dumps({k: v for k, v in r.items() if k != "rss_series"}), flush=True)
        finally:
            stop(nginx, signal.SIGQUIT)
    ok = measured([r["run_id"] for r in results], a)
    for r in results:
        (a.out / f"rss-{r['hosts']}.json").write_text(json.dumps(r.pop("rss_series")))
        total, good = ok.get(r["run_id"], (0, 0))
        r["chains"], r["chains_bracketing_lifetime"] = total, good
    (a.out / "rehearsal.json").write_text(json.dumps(results, indent=1))
    cols = ["hosts", "cut_at_s", "addresses", "attempts", "server_connections", "sessions_peak", "sessions_peak_per_target",
            "rounds_max", "server_max_conn_per_address_per_s", "server_min_gap_ms", "sniffer_kernel_drops", "pdp_limit", "chains", "chains_bracketing_lifetime",
            "wall_s", "cpu_s", "peak_rss_mb", "sampled_peak_rss_mb", "rss_mb_at_quarters"]
    md = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    md += ["| " + " | ".join(str(r.get(c)) for c in cols) + " |" for r in results]
    (a.out / "rehearsal.md").write_text("\n".join(md) + "\n")
    print("\n".join(md))
    return 0


if __name__ == "__main__":
    sys.exit(main())
