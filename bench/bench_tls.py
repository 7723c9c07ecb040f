"""Full TLS handshakes per second: netsurvey's engine vs zgrab2 v1.0.0, side by side.

Run inside the testbed (root):  netsurvey testbed exec -- python3 bench/bench_tls.py [--n 5000] [--rounds 2]

Targets: the testbed's nginx TLS hosts (address + SNI), cycled to --n targets (the testbed
has no TLS /16; every target is a real handshake with nginx). Rounds alternate
zgrab2 / netsurvey TLS 1.2 / netsurvey TLS 1.3. netsurvey records session IDs, tickets and
key_names (TLS 1.3 tickets via a HEAD request and key-log decryption); zgrab2 records TLS
1.2 tickets only. CPU = user+sys of the client process(es) per handshake.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from netsurvey.gotools import find_tool  # noqa: E402
from scanners.tls.engine import handshake, make_context  # noqa: E402
from scanners.tls.tls13 import KeyLog  # noqa: E402
from scanners.tls.zgrab import zgrab_argv  # noqa: E402


def targets(n: int) -> list[tuple[str, str]]:
    out = subprocess.run([sys.executable, "-m", "netsurvey.cli", "testbed", "status", "--json"], capture_output=True,
                         text=True, check=True, cwd=REPO).stdout
    hosts = json.loads(out)["ground_truth"]["tls_hosts"]
    base = [(h["addresses"][0], h["hostname"]) for h in hosts if "1.2" in h["versions"] and "1.3" in h["versions"]]
    return [base[i % len(base)] for i in range(n)]


def cpu(who) -> float:
    r = resource.getrusage(who)
    return r.ru_utime + r.ru_stime


def run_zgrab(ts, senders: int) -> tuple[float, float, int]:
    with tempfile.TemporaryDirectory() as d:
        bl = Path(d) / "bl"
        bl.write_text("")
        inp = "".join(f"{a}, {h}\n" for a, h in ts)
        c0, t0 = cpu(resource.RUSAGE_CHILDREN), time.perf_counter()
        p = subprocess.run(zgrab_argv(senders, bl), input=inp, capture_output=True, text=True)
        wall, c = time.perf_counter() - t0, cpu(resource.RUSAGE_CHILDREN) - c0
    ok = sum(1 for line in p.stdout.splitlines() if '"status":"success"' in line)
    return wall, c, ok


def run_ours(ts, version: str, inflight: int) -> tuple[float, float, int]:
    kl = KeyLog()
    ctx = make_context(version, verify=False, keylog=kl)
    sem = asyncio.Semaphore(inflight)

    async def one(a, h):
        async with sem:
            r = await handshake(a, 443, h, ctx, timeout=10, keylog=kl)
            return r.ok and bool(r.tickets) and r.tickets[0].key_name is not None

    async def main():
        return sum(await asyncio.gather(*(one(a, h) for a, h in ts)))

    c0, t0 = cpu(resource.RUSAGE_SELF), time.perf_counter()
    ok = asyncio.run(main())
    wall, c = time.perf_counter() - t0, cpu(resource.RUSAGE_SELF) - c0
    kl.close()
    return wall, c, ok


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=5000)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--senders", type=int, default=50)
    ap.add_argument("--inflight", type=int, default=200)
    a = ap.parse_args()
    if find_tool("zgrab2") is None:
        sys.exit("zgrab2 missing (PATH, tools/go/bin): scripts/build_go_tools.sh zgrab2")
    ts = targets(a.n)
    res: dict[str, list[tuple[float, float, int]]] = {"zgrab2 tls1.2": [], "netsurvey tls1.2": [], "netsurvey tls1.3": []}
    for _ in range(a.rounds):
        res["zgrab2 tls1.2"].append(run_zgrab(ts, a.senders))
        res["netsurvey tls1.2"].append(run_ours(ts, "1.2", a.inflight))
        res["netsurvey tls1.3"].append(run_ours(ts, "1.3", a.inflight))
    print(f"{a.n} handshakes per run, {a.rounds} alternating rounds, medians")
    rates = {}
    for k, v in res.items():
        rate = statistics.median(a.n / w for w, _, _ in v)
        ms = statistics.median(1000 * c / a.n for _, c, _ in v)
        ok = min(o for _, _, o in v)
        rates[k] = rate
        what = "successes" if k.startswith("zgrab") else "with ticket+key_name"
        print(f"  {k:18s} {rate:8.0f}/s  client CPU {ms:.2f} ms/handshake  {what}: {ok}/{a.n}")
    print(f"  ratio netsurvey/zgrab2 (TLS 1.2): {rates['netsurvey tls1.2'] / rates['zgrab2 tls1.2']:.2f}x; "
          f"TLS 1.3 with tickets vs zgrab2 1.2: {rates['netsurvey tls1.3'] / rates['zgrab2 tls1.2']:.2f}x")


if __name__ == "__main__":
    main()
