"""QUIC handshake throughput against the testbed's aioquic server (www.example.test).

Run (as root, testbed up):  python3 bench/bench_quic.py [--n 600] [--inflight 50] [--rounds 3]

By default it starts its own instance of ``testbed.quic_server`` from this working tree with
www.example.test's configuration (certificate, policy) on port 4433 of the same address in the
web namespace, logging to a temporary file, and stops it at the end: so server-side changes
are measured, and neither other users' traffic to the testbed process nor that process's
accumulated state is. ``--testbed-server`` measures the running testbed process (port 443).

It re-executes itself in the vantage namespace and, in alternating rounds, measures:

* ``scanner-full``: netsurvey's ``quic_connect`` (recording connection, transport
  parameters, certificate), handshake only, closed at once;
* ``peer-full``: the bare client of the same library (``QuicConnection`` on aioquic's
  asyncio protocol, aioquic's default key shares), handshake only, closed the same way (no
  closing period); no QUIC scanner exists here to compare with (zgrab2 has no QUIC module
  and Debian's curl no HTTP/3);
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
import signal
import ssl
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

HOST, ADDRESS, TESTBED_PORT, OWN_PORT = "www.example.test", "198.18.2.10", 443, 4433
PORT = TESTBED_PORT  # set by --port in the inner process


def _testbed_status() -> dict:
    return json.loads(subprocess.run([sys.executable, "-m", "netsurvey.cli", "testbed", "status", "--json"],
                                     capture_output=True, text=True, cwd=REPO, check=True).stdout)


def _server_pid() -> int:
    return next(p["pid"] for p in _testbed_status()["processes"] if p["name"] == f"quic-{HOST}")


def _start_own_server(tmp: Path) -> subprocess.Popen:
    """testbed.quic_server from this tree with www.example.test's config on OWN_PORT."""
    pid = _server_pid()
    argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    conf = json.loads(Path(argv[argv.index(b"--config") + 1].decode()).read_text())
    conf.update(addresses=[ADDRESS], port=OWN_PORT, log=str(tmp / "server.log"))
    (tmp / "server.json").write_text(json.dumps(conf))
    ns = next(p["namespace"] for p in _testbed_status()["processes"] if p["pid"] == pid)
    p = subprocess.Popen(["ip", "netns", "exec", f"nstb-{ns}", sys.executable, "-m", "testbed.quic_server",
                          "--config", str(tmp / "server.json")], cwd=REPO)
    log, deadline = tmp / "server.log", time.monotonic() + 10
    while not (log.exists() and b'"started"' in log.read_bytes()):
        if p.poll() is not None or time.monotonic() > deadline:
            p.kill()
            raise SystemExit("bench_quic: own server did not start")
        time.sleep(0.05)
    return p


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
    from aioquic.asyncio.protocol import QuicConnectionProtocol
    from aioquic.quic.configuration import QuicConfiguration
    from aioquic.quic.connection import QuicConnection

    from scanners.quic.handshake import quic_connect
    from scanners.quic.records import ConnectOptions

    full = ConnectOptions(timeout_s=5, request=False)
    zero = ConnectOptions(timeout_s=5, state_wait_s=0)

    async def scanner_full():
        h, _ = await quic_connect(HOST, ADDRESS, PORT, full)
        return h.handshake_ms is not None

    async def peer_full():
        cfg = QuicConfiguration(is_client=True, alpn_protocols=["h3"], server_name=HOST, verify_mode=ssl.CERT_NONE)
        loop = asyncio.get_running_loop()
        transport, p = await loop.create_datagram_endpoint(
            lambda: QuicConnectionProtocol(QuicConnection(configuration=cfg)), remote_addr=(ADDRESS, PORT))
        try:
            p.connect((ADDRESS, PORT))
            await asyncio.wait_for(p.wait_connected(), 5)
            p.close()
            return True
        finally:
            if p._timer is not None:
                p._timer.cancel()
            transport.close()

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

    global PORT
    PORT = args.port

    logging.getLogger("quic").setLevel(logging.CRITICAL)
    from scanners.quic.handshake import settle_gc

    modes, prime = _modes()
    settle_gc()  # as `netsurvey scan quic` does before its connections
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
    ap.add_argument("--testbed-server", action="store_true",
                    help="measure the running testbed process (port 443) instead of an own instance")
    ap.add_argument("--server-pid", type=int, default=0, help=argparse.SUPPRESS)
    ap.add_argument("--port", type=int, default=TESTBED_PORT, help=argparse.SUPPRESS)
    ap.add_argument("--inner", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.inner:
        inner(args)
        return 0
    with tempfile.TemporaryDirectory(prefix="bench_quic.") as tmp:
        own = None if args.testbed_server else _start_own_server(Path(tmp))
        try:
            pid, port = (_server_pid(), TESTBED_PORT) if own is None else (own.pid, OWN_PORT)
            print(f"server: {'testbed process' if own is None else 'own instance'} pid {pid}, "
                  f"{ADDRESS}:{port}", file=sys.stderr)
            return subprocess.call(["ip", "netns", "exec", "nstb-vantage", sys.executable, __file__, "--inner",
                                    "--server-pid", str(pid), "--port", str(port), "--n", str(args.n),
                                    "--inflight", str(args.inflight), "--rounds", str(args.rounds)], cwd=REPO)
        finally:
            if own is not None:
                own.send_signal(signal.SIGTERM)
                own.wait(10)


if __name__ == "__main__":
    sys.exit(main())
