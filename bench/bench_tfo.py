"""TFO probe rate vs Debian zmap 2.1.1's plain SYN scan over the testbed's 198.19.0.0/16,
side by side in one run (alternating rounds, medians), plus cookie recovery and memory
(max RSS) of the engine at 64K and 1M targets.

Like with like: both get the etiquette policy of config/survey.toml (the engine as
``EngineOptions.policy``, zmap as ``-b`` from netsurvey.zmap.check_discoverable), zmap
``-r 300000`` (well above what it reaches here, so the cap does not limit it) and a 1 s
cooldown that neither rate counts. The engine runs ``--senders`` sending processes (default:
one per CPU; on a veth the kernel's work for each probe runs on the sending CPU, and that,
not Python, bounds one sender). zmap runs with its default ``-T 1`` (the issue's baseline)
and, each round too, with ``-T`` equal to the engine's senders, so both are shown. The
engine's rate is probes / send phase [s]; zmap's is the higher of its own "send ... done
(X p/s avg)" figure and probes / (wall time - cooldown), so zmap gets the benefit of the doubt.

Run as root with the testbed up:  python3 bench/bench_tfo.py [--rounds 3] [--no-memory]
Only testbed addresses are contacted (198.19.0.0/16 inside the namespaces)."""
from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
NET = "198.19.0.0/16"
VANTAGE = ["ip", "netns", "exec", "nstb-vantage"]

ENGINE = r"""
import json, resource, sys, time
sys.path.insert(0, sys.argv[1])
from netsurvey.config import load_config
from netsurvey.etiquette import TargetPolicy
from scanners.tfo.engine import AddressRange, EngineOptions, RawEngine
from scanners.tfo.packets import parse_options
targets = AddressRange(sys.argv[2], 443, repeat=int(sys.argv[3]))
senders = int(sys.argv[4])
policy = TargetPolicy.from_config(load_config().etiquette)
e = RawEngine(EngineOptions(rate=0, cooldown=1.0, seed=int(time.time()), policy=policy, senders=senders))
cookies = synack = 0
for i, r, err in e.probe(targets):
    if r is not None and r.is_synack:
        synack += 1
        cookies += bool(parse_options(r.options).cookie)
print(json.dumps(dict(sent=e.sent, send_seconds=e.send_seconds, synack=synack, cookies=cookies,
                      maxrss_kib=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)))
"""


def run_engine(repeat: int = 1, senders: int = 1) -> dict:
    r = subprocess.run(VANTAGE + [sys.executable, "-c", ENGINE, str(REPO), NET, str(repeat), str(senders)],
                       capture_output=True, text=True, check=True)
    d = json.loads(r.stdout)
    d["rate"] = d["sent"] / d["send_seconds"]
    return d


ZMAP_ARGS = ["-p", "443", "-r", "300000", "-c", "1"]


def run_zmap(threads: int = 1) -> dict:
    sys.path.insert(0, str(REPO))
    from netsurvey.config import load_config
    from netsurvey.etiquette import TargetPolicy
    from netsurvey.zmap import check_discoverable

    blocked = check_discoverable(NET, TargetPolicy.from_config(load_config().etiquette))
    mac = subprocess.run(["ip", "netns", "exec", "nstb-scale", "cat", "/sys/class/net/eth0/address"],
                         capture_output=True, text=True, check=True).stdout.strip()
    with tempfile.TemporaryDirectory() as d:
        bl, meta, outf = Path(d) / "blocklist", Path(d) / "meta.json", Path(d) / "out.csv"
        bl.write_text("".join(f"{n}\n" for n in blocked if n.version == 4))
        t = time.monotonic()
        r = subprocess.run(VANTAGE + ["zmap", "-i", "tbbr0", "-G", mac, "-S", "198.18.0.1", *ZMAP_ARGS, "-T", str(threads), "-b", str(bl),
                                      "-o", str(outf), "--metadata-file", str(meta), NET],
                           capture_output=True, text=True, check=True)
        wall = time.monotonic() - t
        m = json.loads(meta.read_text())
    send = max(wall - 1.0, 1e-3)     # minus the 1 s cooldown; startup is counted against zmap
    own = re.findall(r"send: \d+ done \(([\d.]+) ([KM]?)p/s avg\)", r.stderr)
    own_rate = float(own[-1][0]) * {"": 1, "K": 1e3, "M": 1e6}[own[-1][1]] if own else 0.0
    return dict(sent=m["total_sent"], send_seconds=send, rate=max(m["total_sent"] / send, own_rate),
                wall_rate=m["total_sent"] / send, own_rate=own_rate,
                replies=m["success_unique"], pcap_drop=m["pcap_drop"])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--senders", type=int, default=os.cpu_count() or 1, help="engine sending processes")
    ap.add_argument("--no-memory", action="store_true")
    a = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("needs root and the testbed (netsurvey testbed up)")
    ours, zm, zmt = [], [], []
    for i in range(a.rounds):
        ours.append(run_engine(senders=a.senders))
        time.sleep(2)
        zm.append(run_zmap(1))
        time.sleep(2)
        zmt.append(run_zmap(a.senders))
        time.sleep(2)
        print(f"round {i + 1}: netsurvey ({a.senders} senders) {ours[-1]['rate']:,.0f}/s ({ours[-1]['cookies']} cookies), "
              f"zmap -T 1 {zm[-1]['rate']:,.0f}/s (own figure {zm[-1]['own_rate']:,.0f}, by wall time "
              f"{zm[-1]['wall_rate']:,.0f}; {zm[-1]['replies']} replies), zmap -T {a.senders} {zmt[-1]['rate']:,.0f}/s "
              f"({zmt[-1]['replies']} replies)")
    print(f"zmap was asked: zmap {' '.join(ZMAP_ARGS)} -T 1|{a.senders} -i tbbr0 -G <scale MAC> -S 198.18.0.1 -b <policy> {NET}")
    med = lambda xs: statistics.median(r["rate"] for r in xs)   # noqa: E731
    o, z, zt = med(ours), med(zm), med(zmt)
    per_round = statistics.median(a_["rate"] / b_["rate"] for a_, b_ in zip(ours, zm))
    per_round_t = statistics.median(a_["rate"] / b_["rate"] for a_, b_ in zip(ours, zmt))
    print(f"median probes/s over {NET}: netsurvey tfo ({a.senders} senders) {o:,.0f}; zmap 2.1.1 -T 1 {z:,.0f} "
          f"(ratio of medians {o / z:.2f}x, median of per-round ratios {per_round:.2f}x); zmap -T {a.senders} {zt:,.0f} "
          f"({o / zt:.2f}x, per round {per_round_t:.2f}x)")
    print(f"cookies recovered: {[r['cookies'] for r in ours]} of 65536 each; zmap replies {[r['replies'] for r in zm]} "
          f"(-T 1), {[r['replies'] for r in zmt]} (-T {a.senders})")
    if not a.no_memory:
        for repeat in (1, 16):
            d = run_engine(repeat, a.senders)
            print(f"memory: {d['sent']:,} targets -> max RSS {d['maxrss_kib'] / 1024:.1f} MiB "
                  f"({d['rate']:,.0f}/s, {d['cookies']:,} cookies)")


if __name__ == "__main__":
    main()
