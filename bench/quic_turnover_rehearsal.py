"""Dress rehearsal of ``scan quic-turnover`` as a scheduler (issues 24 and 26 item 3): the
thesis's schedule (48 h of 10-min samples, ages 10 min .. 48 h) compressed in time over many
testbed addresses, peak RSS at several sizes with a fixed window of hosts in flight (flat
memory), the per-destination limit counted from the server side, and the lifetimes found.

    python3 bench/quic_turnover_rehearsal.py --hosts 50,200 [--factor 1440] [--hosts-in-flight 50]
        [--token-max-age-s 30] [--ticket-lifetime-s 60] [--pdp 20] [--out out/quic-turnover]

For each size N:
- a temporary testbed/quic_server.py (aioquic; Retry forced, NEW_TOKEN tokens of
  --token-max-age-s, tickets of --ticket-lifetime-s, no key rotation: the ground truth) in the
  testbed's ``nstb-scale`` namespace on UDP --port of N addresses of 198.19.0.0/16;
- ``scan quic-turnover --every 600/F --for 172800/F`` (F = --factor) over them under
  /usr/bin/time -v, inside the testbed's vantage, with a config whose per-destination rate is
  --pdp and no own_servers (the limit applies to these servers);
- tests/support/sniffer.py in ``nstb-scale`` records the packets that reach the server (``--incoming``):
  the first Initial from each client port is one connection; the largest number of connections
  one address received within any one second is reported next to the limit (not the
  scanner's counters). (The server's own Initials are no measure of this: a loaded aioquic
  server answers queued Initials in bursts - up to 27 within one second at a limit of 20,
  while the client sent at most 20.)
Prints one JSON line per size and writes ``rehearsal.json`` / ``rehearsal.md`` to --out.
Only testbed addresses are contacted.
"""
from __future__ import annotations

import argparse
import ipaddress
import json
import os
import resource
import subprocess
import sys
import tempfile
import threading
import time
from collections import defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "bench"))
from lifetime_rehearsal import _descendants, stop, time_v  # noqa: E402

SNIFFER = REPO / "tests" / "support" / "sniffer.py"
NS = "nstb-scale"
NET = ipaddress.ip_network("198.19.0.0/16")


def addresses(n: int) -> list[str]:
    base = int(NET.network_address) + 512          # 198.19.2.0 on
    return [str(ipaddress.ip_address(base + i)) for i in range(n)]


def start_server(work: Path, addrs: list[str], a) -> subprocess.Popen:
    pki = Path(os.environ.get("NETSURVEY_TESTBED_DIR", "/run/netsurvey/testbed")) / "pki"
    cert = sorted(pki.glob("www.example.test-*.pem"))[0]
    cfgp = work / "quic.json"
    cfgp.write_text(json.dumps({
        "hostname": "www.example.test", "addresses": addrs, "port": a.port, "retry": True,
        "issue_tokens": True, "token_max_age": a.token_max_age_s, "token_key_rotation": 0,
        "ticket_lifetime": a.ticket_lifetime_s, "ticket_key_rotation": 0, "early_data": False,
        "certfile": str(cert), "keyfile": str(cert.with_suffix(".key")), "secret": os.urandom(16).hex(),
        "log": "/dev/null"}))
    need = len(addrs) + 1000

    def nofile():
        resource.setrlimit(resource.RLIMIT_NOFILE, (need, max(need, resource.getrlimit(resource.RLIMIT_NOFILE)[1])))

    p = subprocess.Popen(["ip", "netns", "exec", NS, sys.executable, "-m", "testbed.quic_server", "--config",
                          str(cfgp)], cwd=REPO, start_new_session=True, preexec_fn=nofile,
                         stdout=subprocess.DEVNULL, stderr=open(work / "quic.err", "w"))
    for _ in range(600):
        if p.poll() is not None:
            raise SystemExit(f"quic server exited: {(work / 'quic.err').read_text()[-500:]}")
        r = subprocess.run(["ip", "netns", "exec", NS, "ss", "-lun", f"sport = :{a.port}"], capture_output=True,
                           text=True)
        if f"{addrs[-1]}:{a.port}" in r.stdout:
            return p
        time.sleep(0.2)
    stop(p)
    raise SystemExit("quic server did not bind its addresses")


def sample_rss(proc: subprocess.Popen, series: list) -> None:
    t0 = time.monotonic()
    while proc.poll() is None:
        for pid in _descendants(proc.pid):
            try:
                cmd = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
                status = Path(f"/proc/{pid}/status").read_text()
            except OSError:
                continue
            if b"quic-turnover" in cmd and b"/usr/bin/time" not in cmd[0] and cmd[0] != b"ip":
                for line in status.splitlines():
                    if line.startswith("VmRSS:"):
                        series.append((round(time.monotonic() - t0, 1), round(int(line.split()[1]) / 1024, 1)))
                break
        time.sleep(1.0)


def sql(a, q: str) -> list[list[str]]:
    p = subprocess.run([sys.executable, "-m", "netsurvey.cli", *(["--dsn", a.dsn] if a.dsn else []), "sql", q,
                        "--format", "csv"], capture_output=True, text=True, cwd=REPO)
    return [line.split(",") for line in p.stdout.strip().splitlines()[1:]]


def run_size(n: int, a, work: Path) -> dict:
    addrs = addresses(n)
    server = start_server(work, addrs, a)
    cfg = work / "survey.toml"
    cfg.write_text(f'[etiquette]\nallow = ["198.18.0.0/15", "2001:2::/48"]\nrate_pps = {a.rate}\n'
                   f"per_destination_pps = {a.pdp}\n")
    pkts = work / f"server-{n}.jsonl"
    sniff = subprocess.Popen(["ip", "netns", "exec", NS, sys.executable, str(SNIFFER), "--out", str(pkts), "--iface",
                              "eth0", "--seconds", "7200", "--incoming"], stdout=subprocess.PIPE, text=True,
                             start_new_session=True)
    assert sniff.stdout.readline().strip() == "ready"
    every, span = 600 / a.factor, 172800 / a.factor
    argv = ["ip", "netns", "exec", "nstb-vantage", "/usr/bin/time", "-v", sys.executable, "-m", "netsurvey.cli",
            "--config", str(cfg), *(["--dsn", a.dsn] if a.dsn else []), "scan", "quic-turnover",
            "--every", f"{every:g}s", "--for", f"{span:g}s", "--timeout", "1s",
            "--hosts-in-flight", str(a.hosts_in_flight), "--concurrency", str(a.concurrency), "--json"]
    argv += [f"--target=www.example.test@{x}:{a.port}" for x in addrs]
    t0 = time.monotonic()
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO,
                            env=dict(os.environ, NETSURVEY_IN_TESTBED="1", PYTHONPATH=str(REPO)))
    series: list = []
    th = threading.Thread(target=sample_rss, args=(proc, series), daemon=True)
    th.start()
    stdout, stderr = proc.communicate()
    th.join()
    wall = time.monotonic() - t0
    stop(sniff)
    stop(server)
    if proc.returncode != 0:
        raise SystemExit(f"scan failed ({proc.returncode}): {stderr[-1500:]}")
    res = json.loads(stdout.strip().splitlines()[-1])
    first: dict = {}
    for line in pkts.read_text().splitlines():
        r = json.loads(line)
        if r.get("quic_initial") and r.get("dport") == a.port:
            first.setdefault((r["dst"], r["src"], r["sport"]), r["t"])
    pkts.unlink()
    per = defaultdict(list)
    for (src, _, _), t in first.items():
        per[src].append(t)
    worst = 0
    for ts in per.values():
        ts.sort()
        j = 0
        for i, t in enumerate(ts):
            while ts[j] <= t - 1.0:
                j += 1
            worst = max(worst, i - j + 1)
    rid = res["run_id"]
    step = every
    life = sql(a, f"""SELECT count(*),
        count(*) FILTER (WHERE ticket_accept_max_age_s >= {a.ticket_lifetime_s} - {step} - 0.5
                         AND ticket_reject_min_age_s <= {a.ticket_lifetime_s} + {step} + 0.5),
        count(*) FILTER (WHERE token_accept_max_age_s >= {a.token_max_age_s} - {step} - 0.5
                         AND token_reject_min_age_s <= {a.token_max_age_s} + {step} + 0.5),
        count(*) FILTER (WHERE rounds = {int(span / every + 1e-9) + 1}),
        count(*) FILTER (WHERE ticket_reuse_accepted AND token_reuse_accepted),
        round(percentile_cont(0.5) WITHIN GROUP (ORDER BY ticket_accept_max_age_s)::numeric, 2),
        round(percentile_cont(0.5) WITHIN GROUP (ORDER BY ticket_reject_min_age_s)::numeric, 2),
        round(percentile_cont(0.5) WITHIN GROUP (ORDER BY token_accept_max_age_s)::numeric, 2),
        round(percentile_cont(0.5) WITHIN GROUP (ORDER BY token_reject_min_age_s)::numeric, 2)
        FROM quic_turnover_host WHERE run_id = {rid}""")[0]
    # a state presented twice for an age (never: each age gets its own; the reuse check is apart)
    twice = sql(a, f"""SELECT count(*) FROM (SELECT address, coalesce(presented_ticket_conn_id, presented_token_conn_id)
        FROM quic_connection WHERE run_id = {rid} AND purpose = 'represent' GROUP BY 1, 2 HAVING count(*) > 1) x""")[0][0]
    # grid indices tried again: only after a presentation that came more than half a step late
    # (decided-as: it decided the index of its real age, not its own)
    again = sql(a, f"""SELECT count(*), count(*) FILTER (WHERE late) FROM (
        SELECT address, kind, grid_index, bool_or(detail LIKE 'decided-as:%%') AS late FROM quic_turnover_event
        WHERE run_id = {rid} AND event IN ('accepted', 'refused') GROUP BY 1, 2, 3 HAVING count(*) > 1) x""")[0]
    c = res["counts"]
    return {"addresses": n, "factor": a.factor, "every_s": every, "for_s": span, "ages": int(span / every + 1e-9),
            "hosts_in_flight": a.hosts_in_flight, "run_id": rid, "connections": sum(
                v for k, v in c.items() if k in ("success", "connection-timeout", "protocol-error")),
            "timeouts": c.get("connection-timeout", 0), "slots": c.get("slots"),
            "search_rounds_max": c.get("search_rounds_max"), "states_peak": c.get("states_peak"),
            "states_peak_per_target": c.get("states_peak_per_target"),
            "server_connections": len(first), "server_max_conn_per_address_per_s": worst, "pdp_limit": a.pdp,
            "hosts": int(life[0]), "ticket_bracketed": int(life[1]), "token_bracketed": int(life[2]),
            "all_rounds": int(life[3]), "reuse_accepted_both": int(life[4]),
            "median_ticket_acc_rej_s": [life[5], life[6]], "median_token_acc_rej_s": [life[7], life[8]],
            "states_presented_twice": int(twice), "ages_tried_again": int(again[0]),
            "ages_tried_again_after_late": int(again[1]), "command_wall_s": round(wall, 1), **time_v(stderr),
            "sampled_peak_rss_mb": max((r for _, r in series), default=None),
            "rss_mb_at_quarters": [series[min(len(series) - 1, int(len(series) * q))][1] for q in (0.25, 0.5, 0.75, 1.0)]
            if series else []}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hosts", default="50,200", help="sizes: addresses (comma-separated)")
    ap.add_argument("--factor", type=float, default=1440, help="time compression: 10 min / F, 48 h / F")
    ap.add_argument("--token-max-age-s", type=float, default=30)
    ap.add_argument("--ticket-lifetime-s", type=int, default=60)
    ap.add_argument("--hosts-in-flight", type=int, default=50)
    ap.add_argument("--concurrency", type=int, default=100)
    ap.add_argument("--pdp", type=float, default=20, help="per-destination limit, connections/s")
    ap.add_argument("--rate", type=float, default=10000, help="global limit, connections/s")
    ap.add_argument("--port", type=int, default=4443, help="UDP port of the temporary server in nstb-scale")
    ap.add_argument("--dsn", default=os.environ.get("NETSURVEY_DSN"))
    ap.add_argument("--out", type=Path, default=REPO / "out" / "quic-turnover")
    a = ap.parse_args()
    a.out.mkdir(parents=True, exist_ok=True)
    results = []
    with tempfile.TemporaryDirectory(prefix="qt-rehearsal-") as d:
        work = Path(d)
        work.chmod(0o755)
        for n in (int(x) for x in a.hosts.split(",")):
            r = run_size(n, a, work)
            results.append(r)
            print(json.dumps(r), flush=True)
    (a.out / "rehearsal.json").write_text(json.dumps(results, indent=1))
    cols = ["addresses", "ages", "every_s", "hosts_in_flight", "connections", "server_connections", "timeouts",
            "server_max_conn_per_address_per_s", "pdp_limit", "states_peak", "states_peak_per_target",
            "search_rounds_max", "ticket_bracketed", "token_bracketed", "states_presented_twice", "ages_tried_again",
            "ages_tried_again_after_late", "wall_s", "cpu_s",
            "peak_rss_mb", "rss_mb_at_quarters"]
    md = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    md += ["| " + " | ".join(str(r.get(c)) for c in cols) + " |" for r in results]
    (a.out / "rehearsal.md").write_text("\n".join(md) + "\n")
    print("\n".join(md))
    return 0


if __name__ == "__main__":
    sys.exit(main())
