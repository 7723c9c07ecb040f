"""QUIC handshake throughput against the testbed's aioquic server (www.example.test).

Run (as root, testbed up):  python3 bench/bench_quic.py [--n 600] [--inflight 50] [--rounds 3]

It re-executes itself in the vantage namespace and, in alternating rounds, measures:

* ``scanner-full``: netsurvey's ``quic_connect`` (recording connection, transport
  parameters, certificate), handshake only, closed at once;
* ``peer-full``: the bare client of the same library, ``aioquic.asyncio.connect`` (no QUIC
  scanner exists here to compare with: zgrab2 has no QUIC module and Debian's curl no
  HTTP/3), handshake only;
* ``scanner-0rtt``: resumption with a session ticket and the GET sent as 0-RTT, until the
  response.

Per mode: handshakes/s (wall), client CPU ms per handshake (this process), server CPU ms per
handshake (/proc of the server process) and the ratio scanner/peer. Medians over rounds.
Only testbed addresses are contacted.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import ssl
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

HOST, ADDRESS, PORT = "www.example.test", "198.18.2.10", 443


def _server_pid() -> int:
    st = json.loads(subprocess.run([sys.executable, "-m", "netsurvey.cli", "testbed", "status", "--json"],
                                   capture_output=True, text=True, cwd=REPO, check=True).stdout)
    return next(p["pid"] for p in st["processes"] if p["name"] == f"quic-{HOST}")


def _proc_cpu(pid: int) -> float:
    """CPU seconds (user+system) of a process."""
    f = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")


def _self_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


async def _many(n: int, inflight: int, one) -> int:
    sem = asyncio.Semaphore(inflight)
    ok = 0

    async def run():
        nonlocal ok
        async with sem:
            try:
                if await one():
                    ok += 1
            except Exception:
                pass

    await asyncio.gather(*(run() for _ in range(n)))
    return ok


def _modes():
    from aioquic.asyncio import connect
    from aioquic.quic.configuration import QuicConfiguration

    from scanners.quic.handshake import quic_connect
    from scanners.quic.records import ConnectOptions

    full = ConnectOptions(timeout_s=5, request=False)
    zero = ConnectOptions(timeout_s=5, state_wait_s=0)

    async def scanner_full():
        h, _ = await quic_connect(HOST, ADDRESS, PORT, full)
        return h.handshake_ms is not None

    async def peer_full():
        cfg = QuicConfiguration(is_client=True, alpn_protocols=["h3"], server_name=HOST, verify_mode=ssl.CERT_NONE)
        async with connect(ADDRESS, PORT, configuration=cfg) as p:
            p.close()
        return True

    tickets = []

    async def prime():
        _, raw = await quic_connect(HOST, ADDRESS, PORT, ConnectOptions(timeout_s=5))
        tickets.extend(raw)

    async def scanner_0rtt():
        h, _ = await quic_connect(HOST, ADDRESS, PORT, zero, ticket=tickets[0])
        return h.session_resumed and h.early_data_accepted

    return {"scanner-full": scanner_full, "peer-full": peer_full, "scanner-0rtt": scanner_0rtt}, prime


def inner(args) -> None:
    import logging

    logging.getLogger("quic").setLevel(logging.CRITICAL)
    modes, prime = _modes()
    asyncio.run(prime())
    res: dict[str, list[dict]] = {m: [] for m in modes}
    for _ in range(args.rounds):
        for name, one in modes.items():
            c0, s0, t0 = _self_cpu(), _proc_cpu(args.server_pid), time.perf_counter()
            ok = asyncio.run(_many(args.n, args.inflight, one))
            wall = time.perf_counter() - t0
            c1, s1 = _self_cpu(), _proc_cpu(args.server_pid)
            res[name].append({"ok": ok, "rate": ok / wall, "client_ms": 1000 * (c1 - c0) / max(ok, 1),
                              "server_ms": 1000 * (s1 - s0) / max(ok, 1)})
    out = {}
    for name, rs in res.items():
        out[name] = {k: round(statistics.median(r[k] for r in rs), 2) for k in ("ok", "rate", "client_ms", "server_ms")}
    out["ratio_scanner_vs_peer_rate"] = round(out["scanner-full"]["rate"] / out["peer-full"]["rate"], 3)
    out["ratio_scanner_vs_peer_client_cpu"] = round(out["scanner-full"]["client_ms"] / out["peer-full"]["client_ms"], 3)
    for name in modes:
        cpu = out[name]["client_ms"] + out[name]["server_ms"]
        out[name]["per_core_rate_cpu_bound"] = round(1000 / cpu, 1)   # handshakes/s per fully used core
        out[name]["two_core_rate_cpu_bound"] = round(2000 / cpu, 1)
    print(json.dumps(out, indent=1))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=600, help="handshakes per mode and round")
    ap.add_argument("--inflight", type=int, default=50)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--server-pid", type=int, default=0, help=argparse.SUPPRESS)
    ap.add_argument("--inner", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.inner:
        inner(args)
        return 0
    pid = _server_pid()
    return subprocess.call(["ip", "netns", "exec", "nstb-vantage", sys.executable, __file__, "--inner",
                            "--server-pid", str(pid), "--n", str(args.n), "--inflight", str(args.inflight),
                            "--rounds", str(args.rounds)], cwd=REPO)


if __name__ == "__main__":
    sys.exit(main())
