"""Whole-command scale bench (issue 26): import a Tranco-format list, scan, store, draw the
thesis figure, for ``scan dns-ttl`` (Fig 2.5), ``scan tfo`` (Table 3.1), ``scan tls``
(Fig 4.5) and ``scan quic`` (quic-state table) at several list sizes, with wall time,
CPU, peak RSS, database growth, cost per target and the slope between sizes; writes a
markdown table, a CSV and a log-log plot.

    python3 bench/scale.py            # dns, tfo at 10K, 100K, 1M; tls, quic at 10K, 100K
    python3 bench/scale.py --sizes 10000,100000 --measurements tls,quic [--tls-args '--tls 1.3']
    python3 bench/scale.py --sizes 1000000 --measurements dns --nice 5 --append
    python3 bench/scale.py --list-only 1000000 > tranco-scale.csv   # just the list
    python3 bench/scale.py --from-csv a/scale.csv,b/scale.csv       # one table from several runs

Outputs (``--out``, default ``out/scale/`` of the checkout; ``out/`` is not versioned):
``scale.md`` (the table), ``scale.csv`` (the same, plus the scan's counts) and
``scale.png`` (log-log: seconds, and peak RSS of the whole command and of the scan alone,
over targets), rewritten after every
measured point; ``--append`` merges into an existing ``scale.csv`` (a size measured again
replaces its row), so the points can be taken in several invocations. Columns:
``cpu_s`` / ``wall_s`` / ``peak_rss_mb`` of import + scan + figure, ``scan_cpu_s`` and
``scan_rss_mb`` of the scan alone, ``cpu_us_per_target`` (whole command: at 10K the
fixed start-up of three commands and matplotlib weigh in), ``scan_cpu_us_per_target``, ``db_bytes_per_target``,
``slope_*`` (log-log slope from the previous size: 1 = linear) and the issue's bounds
against the smallest size: ``cpu_per_target_ratio`` (within 0.8 - 1.2) and
``scan_rss_ratio`` (flat). CPU seconds are the primary figure on a shared machine: wall
time there depends on the other users' load.

The testbed Internet it runs against (root, testbed up; nothing leaves the namespaces):
- names ``n<i>.b<j>.scale.test`` in a Tranco-format list (``rank,domain``) from
  :func:`tranco_lines` (a generator, no shipped file); ``--names-per-address`` names share
  one bucket j, and every bucket is one address of 198.19.0.0/16 (the ``nstb-scale``
  namespace answers the whole /16; its TFO server listens on ports 80/443 of every
  address), as on a CDN. Every 50th bucket has no record (NXDOMAIN), TTLs vary per bucket
  (60 ... 86400 s).
- a temporary knot (authoritative for ``scale.test``, wildcards ``*.b<j>.scale.test``) on
  ``--dns-addr`` (198.19.255.53) inside ``nstb-scale``, started and stopped by this script;
  ``scan dns-ttl`` / ``scan tfo`` ask it directly (``--nameserver``); ``scan tls`` / ``scan
  quic`` resolve through the system resolver, so they run in a private mount namespace of
  the vantage whose /etc/resolv.conf names the knot. Nothing of the shared testbed changes.
  The knot stands for the Internet's many authoritative servers, so it is listed in
  ``own_servers`` (exempt from the per-destination limit; one real nameserver would not
  get a whole list's queries).
- ``scan tls``: a temporary nginx (1 worker; bench/lifetime_rehearsal.py's) on TCP :8443 of
  every address of the /16, certificate of short.example.test (every scale.test name fails
  verification: recorded, as the default scan does), tickets and a session cache.
- ``scan quic``: a temporary testbed/quic_server.py (aioquic; NEW_TOKEN tokens, tickets) on
  UDP :443 of every bucket address of the largest QUIC size, one socket each (a wildcard
  UDP socket would answer from another source address), log to /dev/null.
- the campaign etiquette of docs/campaign.md: a config allowing everything
  (``0.0.0.0/0``, ``::/0``: the reserved ranges stay blocked, the testbed's benchmarking
  range is explicitly allowed) with a blocklist file (one bucket blocked) and
  ``per_destination_pps`` (default 2, the guide's value). It bites here:
  ``--names-per-address`` names share each address (run_scan interleaves targets by
  address, netsurvey/spread.py, so the workers do not queue behind one address).

Per size and measurement, each step runs under ``/usr/bin/time -v`` (scans inside the
testbed's vantage): ``targets import``, ``scan ...``, ``plot ...``; the database size
(pg_database_size) is read before and after. Every temporary server is stopped at the end
(also on Ctrl-C or SIGTERM). Numbers taken on a shared machine are noisy: say so when
quoting them.
"""
from __future__ import annotations

import argparse
import csv
import json
import math
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
NS = "nstb-scale"
TLS_PORT = 8443            # the temporary nginx (lifetime_rehearsal's); 80/443 TCP are the TFO server's
QUIC_PORT = 443            # UDP: free in nstb-scale
DNS_ADDR = "198.19.255.53"
ZONE = "scale.test"
TTLS = (60, 300, 300, 3600, 600, 86400, 20, 1800)


def bucket_address(j: int) -> str:
    j += 256                                # 198.19.1.0 upwards; 198.19.255.x stays free
    return f"198.19.{(j >> 8) & 255}.{j & 255}"


def buckets(n: int, per_address: int) -> int:
    return -(-n // per_address)


def tranco_lines(n: int, per_address: int):
    """Tranco-format lines 'rank,domain' of the testbed Internet (a generator)."""
    for i in range(n):
        yield f"{i + 1},n{i}.b{i // per_address}.{ZONE}\n"


def write_zone(path: Path, nb: int) -> None:
    if nb > 65000 - 256:
        raise SystemExit(f"{nb} buckets do not fit 198.19.1.0 - 198.19.254.255: raise --names-per-address")
    with path.open("w") as f:
        f.write(f"$ORIGIN {ZONE}.\n$TTL 300\n@ SOA ns.{ZONE}. admin.{ZONE}. 1 3600 600 86400 60\n"
                f"@ NS ns.{ZONE}.\nns A {DNS_ADDR}\n")
        for j in range(nb):
            if j % 50 == 49:
                continue                    # NXDOMAIN bucket
            f.write(f"*.b{j} {TTLS[j % len(TTLS)]} A {bucket_address(j)}\n")


def start_knot(work: Path, nb: int) -> subprocess.Popen:
    for d in ("zones", "run", "db"):
        (work / d).mkdir(parents=True, exist_ok=True)
    write_zone(work / "zones" / f"{ZONE}.zone", nb)
    conf = work / "knot.conf"
    conf.write_text(f"""server:
    rundir: "{work / 'run'}"
    pidfile: "{work / 'knot.pid'}"
    listen: [ {DNS_ADDR}@53 ]
    udp-workers: 1
    tcp-workers: 1
    background-workers: 1
log:
  - target: "{work / 'knot.log'}"
    any: warning
database:
    storage: "{work / 'db'}"
control:
    listen: "{work / 'run' / 'knot.sock'}"
template:
  - id: default
    storage: "{work / 'zones'}"
    file: "%s.zone"
    zonefile-sync: -1
    zonefile-load: whole
    journal-content: none
zone:
  - domain: {ZONE}.
""")
    p = subprocess.Popen(["ip", "netns", "exec", NS, "knotd", "-c", str(conf)], start_new_session=True,
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(300):
        r = subprocess.run(["ip", "netns", "exec", NS, "python3", "-c",
                            "import dns.resolver,sys; r=dns.resolver.Resolver(configure=False); "
                            f"r.nameservers=['{DNS_ADDR}']; r.lifetime=0.5; "
                            f"print(r.resolve('n0.b0.{ZONE}','A')[0])"], capture_output=True, text=True)
        if r.returncode == 0:
            return p
        time.sleep(0.2)
    stop(p)
    raise SystemExit(f"knot did not answer on {DNS_ADDR}: {(work / 'knot.log').read_text()[-500:] if (work / 'knot.log').exists() else ''}")


def stop(p: subprocess.Popen) -> None:
    try:
        os.killpg(p.pid, signal.SIGTERM)
        p.wait(timeout=20)
    except ProcessLookupError:
        pass
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        p.wait()


def start_nginx(work: Path) -> subprocess.Popen:
    """Temporary nginx on TCP :8443 of every address of 198.19.0.0/16 in nstb-scale (wildcard
    listen; the /16 is local there), the testbed CA's certificate of short.example.test (so
    every scale.test name fails verification: the 'bad certificate' share), tickets and a
    session cache; bench/lifetime_rehearsal.py's server with a 300 s session lifetime."""
    sys.path.insert(0, str(REPO / "bench"))
    import lifetime_rehearsal
    from lifetime_rehearsal import start_nginx as _start

    lifetime_rehearsal.PORT = TLS_PORT
    (work / "nginx").mkdir(exist_ok=True)
    return _start(work / "nginx", 300)


def start_quic(work: Path, addresses: list[str]) -> subprocess.Popen:
    """Temporary testbed/quic_server.py (aioquic, NEW_TOKEN tokens, tickets) on UDP :443 of
    ``addresses`` (one socket each: a wildcard UDP socket would answer from the namespace's
    own address, which a client's connected socket drops), log to /dev/null."""
    import resource

    pki = Path(os.environ.get("NETSURVEY_TESTBED_DIR", "/run/netsurvey/testbed")) / "pki"
    cert = sorted(pki.glob("www.example.test-*.pem"))[0]
    cfgp = work / "quic.json"
    cfgp.write_text(json.dumps({
        "hostname": "www.example.test", "addresses": addresses, "port": QUIC_PORT, "retry": False,
        "issue_tokens": True, "token_max_age": 600, "token_key_rotation": 0, "ticket_lifetime": 3600,
        "ticket_key_rotation": 0, "early_data": False, "certfile": str(cert),
        "keyfile": str(cert.with_suffix(".key")), "secret": os.urandom(16).hex(), "log": "/dev/null"}))
    need = len(addresses) + 1000

    def nofile():
        resource.setrlimit(resource.RLIMIT_NOFILE, (need, max(need, resource.getrlimit(resource.RLIMIT_NOFILE)[1])))

    p = subprocess.Popen(["ip", "netns", "exec", NS, sys.executable, "-m", "testbed.quic_server", "--config",
                          str(cfgp)], cwd=REPO, start_new_session=True, preexec_fn=nofile,
                         stdout=subprocess.DEVNULL, stderr=open(work / "quic.err", "w"))
    last = addresses[-1]
    for _ in range(600):
        if p.poll() is not None:
            raise SystemExit(f"quic server exited: {(work / 'quic.err').read_text()[-500:]}")
        r = subprocess.run(["ip", "netns", "exec", NS, "ss", "-lun", f"sport = :{QUIC_PORT}"], capture_output=True,
                           text=True)
        if f"{last}:{QUIC_PORT}" in r.stdout:
            return p
        time.sleep(0.2)
    stop(p)
    raise SystemExit("quic server did not bind its addresses")


def time_v(stderr: str) -> dict:
    def get(label):
        m = re.search(rf"{re.escape(label)}: (.+)", stderr)
        return m.group(1).strip() if m else "0"
    parts = [float(x) for x in get("Elapsed (wall clock) time (h:mm:ss or m:ss)").split(":")]
    return {"wall_s": sum(v * 60 ** i for i, v in enumerate(reversed(parts))),
            "cpu_s": float(get("User time (seconds)")) + float(get("System time (seconds)")),
            "peak_rss_mb": int(get("Maximum resident set size (kbytes)")) / 1024}


class Bench:
    def __init__(self, a, work: Path):
        self.a, self.work = a, work
        self.cfg = work / "survey.toml"
        # tls and quic resolve through the system resolver: inside the vantage, a private mount
        # namespace sees this resolv.conf (the temporary knot) instead of the testbed's
        self.resolv = work / "resolv.conf"
        self.resolv.write_text(f"nameserver {DNS_ADDR}\noptions timeout:2 attempts:2\n")
        block = work / "blocklist.conf"
        block.write_text(f"# one bucket opted out\n{bucket_address(7)}/32\n")
        self.cfg.write_text(
            "[database]\n" + (f'dsn = "{a.dsn}"\n' if a.dsn else "") +
            "[etiquette]\n"
            'allow = ["0.0.0.0/0", "::/0", "198.18.0.0/15"]\n'
            f'block = []\nblocklist_files = ["{block}"]\n'
            f"rate_pps = {a.rate}\nper_destination_pps = {a.pdp}\n"
            f'own_servers = ["{DNS_ADDR}/32"]\n'
            'contact = "netsurvey scale bench (testbed only)"\n')

    def cli(self, *args, vantage=False, resolv=False) -> tuple[dict, str]:
        inner = ["/usr/bin/time", "-v", sys.executable, "-m", "netsurvey.cli", "--config", str(self.cfg),
                 *(["--dsn", self.a.dsn] if self.a.dsn else []), *args]
        # the vantage namespace directly (as `testbed exec` does; the CA is not needed here), so a
        # testbed configured by another checkout does not matter
        if resolv:
            inner = ["unshare", "--mount", "--propagation", "private", "sh", "-c",
                     f'mount --bind {self.resolv} /etc/resolv.conf && exec "$@"', "sh", *inner]
        argv = ["ip", "netns", "exec", "nstb-vantage", *inner] if vantage else inner
        if self.a.nice:
            argv = ["nice", "-n", str(self.a.nice), *argv]
        env = dict(os.environ, NETSURVEY_IN_TESTBED="1", PYTHONPATH=str(REPO))
        p = subprocess.run(argv, capture_output=True, text=True, cwd=REPO, env=env)
        if p.returncode != 0:
            raise SystemExit(f"{' '.join(args[:3])} failed ({p.returncode}): {p.stderr[-1500:]}")
        return time_v(p.stderr), p.stdout

    def db_bytes(self) -> int:
        _, out = self.cli("sql", "SELECT pg_database_size(current_database())", "--format", "csv")
        return int(out.strip().splitlines()[-1])

    def table_bytes(self) -> dict[str, int]:
        """Bytes per table (heap, indexes, TOAST; a partitioned table's partitions summed under
        its own name), to say where the database growth goes."""
        _, out = self.cli("sql", "SELECT coalesce(p.relname, c.relname), sum(pg_total_relation_size(c.oid))::int8 "
                          "FROM pg_class c LEFT JOIN pg_inherits i ON i.inhrelid = c.oid "
                          "LEFT JOIN pg_class p ON p.oid = i.inhparent WHERE c.relkind IN ('r', 'm') GROUP BY 1",
                          "--format", "csv")
        rows = list(csv.reader(out.strip().splitlines()))[1:]
        return {r[0]: int(r[1]) for r in rows if len(r) == 2 and r[1].isdigit()}

    def one(self, measurement: str, n: int) -> dict:
        lst = self.work / f"tranco-{n}.csv"
        if not lst.exists():
            with lst.open("w") as f:
                f.writelines(tranco_lines(n, self.a.names_per_address))
        name = f"scale{n}_{measurement}_{int(time.time())}"
        size0, tables0 = self.db_bytes(), self.table_bytes()
        steps = {}
        steps["import"], _ = self.cli("targets", "import", str(lst), "--list", name)
        if measurement == "dns":
            steps["scan"], out = self.cli("scan", "dns-ttl", "--list", name, "--nameserver", DNS_ADDR, "--types", "A",
                                          "--json", vantage=True)
            fig = "dns-ttl-cdf"
        elif measurement == "tfo":
            steps["scan"], out = self.cli("scan", "tfo", "--list", name, "--nameserver", DNS_ADDR, "--rate",
                                          str(self.a.rate), "--json", vantage=True)
            fig = "tfo-support-table"
        elif measurement == "tls":
            steps["scan"], out = self.cli("scan", "tls", "--list", name, "--port", str(TLS_PORT), "--no-ipv6",
                                          "--concurrency", str(self.a.concurrency), "--json", *self.a.tls_args.split(),
                                          vantage=True, resolv=True)
            fig = "tls-support"
        elif measurement == "quic":
            steps["scan"], out = self.cli("scan", "quic", "--list", name, "--port", str(QUIC_PORT),
                                          "--concurrency", str(self.a.concurrency), "--json",
                                          *self.a.quic_args.split(), vantage=True, resolv=True)
            fig = "quic-state"
        else:
            raise SystemExit(f"--measurements: unknown {measurement!r} (dns, tfo, tls, quic)")
        summary = json.loads(out.strip().splitlines()[-1])
        run_id = summary.get("run_id") or summary.get("run", {}).get("id")
        steps["plot"], _ = self.cli("plot", fig, "--run", str(run_id), "--out", str(self.work / f"fig-{name}"))
        size1 = self.db_bytes()
        wall = sum(s["wall_s"] for s in steps.values())
        cpu = sum(s["cpu_s"] for s in steps.values())
        row = {"measurement": measurement, "targets": n, "addresses": buckets(n, self.a.names_per_address),
               "run_id": run_id, "wall_s": round(wall, 2), "cpu_s": round(cpu, 2),
               "peak_rss_mb": round(max(s["peak_rss_mb"] for s in steps.values()), 1),
               "db_growth_mb": round((size1 - size0) / 2**20, 1),
               "wall_us_per_target": round(wall / n * 1e6, 1), "cpu_us_per_target": round(cpu / n * 1e6, 1),
               "db_bytes_per_target": round((size1 - size0) / n, 1)}
        for k, s in steps.items():
            row[f"{k}_wall_s"] = round(s["wall_s"], 2)
            row[f"{k}_rss_mb"] = round(s["peak_rss_mb"], 1)
            row[f"{k}_cpu_s"] = round(s["cpu_s"], 2)
        row["counts"] = json.dumps(summary.get("counts", summary), sort_keys=True)[:300]
        # where the growth went: the five tables that grew most, bytes per target (JSON line only)
        tables1 = self.table_bytes()
        grew = sorted(((t, b - tables0.get(t, 0)) for t, b in tables1.items()), key=lambda x: -x[1])[:5]
        row["db_growth_bytes_per_target_by_table"] = {t: round(d / n, 1) for t, d in grew if d > 0}
        return row


def slopes(rows: list[dict]) -> None:
    """Slope of log(wall) over log(targets) from the previous size of the same measurement
    (1 = linear, cost per target flat)."""
    prev, first = {}, {}
    for r in rows:
        p = prev.get(r["measurement"])
        f0 = first.setdefault(r["measurement"], r)
        # the bounds, against the smallest size: cost per target within 20 %, RSS flat
        r["cpu_per_target_ratio"] = round(r["cpu_us_per_target"] / f0["cpu_us_per_target"], 3)
        r["scan_rss_ratio"] = round(r["scan_rss_mb"] / f0["scan_rss_mb"], 3)
        r["scan_cpu_us_per_target"] = round(r["scan_cpu_s"] / r["targets"] * 1e6, 1)
        r["scan_cpu_per_target_ratio"] = round(r["scan_cpu_s"] / r["targets"] / (f0["scan_cpu_s"] / f0["targets"]), 3)
        r["slope_wall"] = r["slope_cpu"] = ""
        if p is not None:
            f = math.log(r["targets"] / p["targets"])
            r["slope_wall"] = round(math.log(r["wall_s"] / p["wall_s"]) / f, 3)
            r["slope_cpu"] = round(math.log(r["cpu_s"] / p["cpu_s"]) / f, 3)
        prev[r["measurement"]] = r


def write_outputs(rows: list[dict], out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    cols = ["measurement", "targets", "addresses", "wall_s", "cpu_s", "peak_rss_mb", "db_growth_mb",
            "wall_us_per_target", "cpu_us_per_target", "db_bytes_per_target", "slope_wall", "slope_cpu",
            "cpu_per_target_ratio", "scan_cpu_s", "scan_cpu_us_per_target", "scan_cpu_per_target_ratio",
            "scan_rss_ratio",
            "import_wall_s", "scan_wall_s", "plot_wall_s", "scan_rss_mb", "run_id"]
    with (out / "scale.csv").open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=cols + ["counts"], extrasaction="ignore")
        w.writeheader()
        w.writerows(rows)
    md = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    md += ["| " + " | ".join(str(r.get(c, "")) for c in cols) + " |" for r in rows]
    (out / "scale.md").write_text("\n".join(md) + "\n")
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(1, 2, figsize=(10, 4))
    for m in sorted({r["measurement"] for r in rows}):
        rs = [r for r in rows if r["measurement"] == m]
        ax[0].loglog([r["targets"] for r in rs], [r["wall_s"] for r in rs], "o-", label=f"{m} wall")
        ax[0].loglog([r["targets"] for r in rs], [r["cpu_s"] for r in rs], "s--", label=f"{m} CPU")
        ax[1].loglog([r["targets"] for r in rs], [r["peak_rss_mb"] for r in rs], "o-", label=f"{m} peak RSS")
        if all(r.get("scan_rss_mb") not in (None, "") for r in rs):   # the scan alone (issue 26: flat)
            ax[1].loglog([r["targets"] for r in rs], [float(r["scan_rss_mb"]) for r in rs], "s--",
                         label=f"{m} scan peak RSS")
    ax[0].set(xlabel="targets", ylabel="seconds (import + scan + figure)")
    ax[1].set(xlabel="targets", ylabel="MiB")
    for x in ax:
        x.legend()
        x.grid(True, which="both", alpha=0.3)
    fig.tight_layout()
    fig.savefig(out / "scale.png", dpi=120)


CAPS = {"tls": 100_000, "quic": 100_000}   # the sizes: TLS and QUIC to 100K, DNS and TFO to 1M


def load_rows(path: Path) -> list[dict]:
    if not path.exists():
        return []
    num = lambda v: float(v) if re.fullmatch(r"-?[0-9.]+(e-?[0-9]+)?", v or "") else v
    rows = [{k: num(v) for k, v in r.items()} for r in csv.DictReader(path.open())]
    for r in rows:
        r["targets"] = int(r["targets"])
    return rows


def merge(rows: list[dict], r: dict) -> list[dict]:
    rows = [x for x in rows if (x["measurement"], x["targets"]) != (r["measurement"], r["targets"])] + [r]
    order = {m: i for i, m in enumerate(("dns", "tfo", "tls", "quic"))}
    return sorted(rows, key=lambda x: (order.get(x["measurement"], 9), x["targets"]))


def main() -> int:
    global DNS_ADDR, TLS_PORT
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="10000,100000,1000000")
    ap.add_argument("--measurements", default="dns,tfo,tls,quic")
    ap.add_argument("--caps", default="tls=100000,quic=100000",
                    help="largest size per measurement (sizes above are skipped); '' for none")
    ap.add_argument("--names-per-address", type=int, default=16)
    ap.add_argument("--rate", type=float, default=10000, help="etiquette.rate_pps (and scan tfo --rate)")
    ap.add_argument("--pdp", type=float, default=2, help="etiquette.per_destination_pps (docs/campaign.md: 2)")
    ap.add_argument("--concurrency", type=int, default=500, help="scan tls / scan quic --concurrency")
    ap.add_argument("--tls-args", default="", help="extra arguments of scan tls (e.g. '--tls 1.3')")
    ap.add_argument("--quic-args", default="", help="extra arguments of scan quic")
    ap.add_argument("--nice", type=int, default=0, help="run every step under nice -n N")
    ap.add_argument("--tls-port", type=int, default=TLS_PORT, help="the temporary nginx's port (8443)")
    ap.add_argument("--dns-addr", default=DNS_ADDR, help="the temporary knot's address (198.19.255.x)")
    ap.add_argument("--append", action="store_true", help="merge into --out's scale.csv (same size replaced)")
    ap.add_argument("--dsn", default=os.environ.get("NETSURVEY_DSN"))
    ap.add_argument("--out", type=Path, default=REPO / "out" / "scale")
    ap.add_argument("--list-only", type=int, metavar="N", help="print the N-line Tranco-format list and exit")
    ap.add_argument("--from-csv", metavar="CSV,...", help="measure nothing: merge these scale.csv files (later "
                    "ones win) into --out's table and plot")
    a = ap.parse_args()
    if a.list_only:
        sys.stdout.writelines(tranco_lines(a.list_only, a.names_per_address))
        return 0
    if a.from_csv:
        rows = []
        for f in a.from_csv.split(","):
            for r in load_rows(Path(f)):
                rows = merge(rows, r)
        slopes(rows)
        write_outputs(rows, a.out)
        print((a.out / "scale.md").read_text())
        return 0
    if not a.dns_addr.startswith("198.19.255."):
        print("scale.py: --dns-addr must be in 198.19.255.0/24", file=sys.stderr)
        return 2
    DNS_ADDR, TLS_PORT = a.dns_addr, a.tls_port
    caps = dict(CAPS if a.caps == "tls=100000,quic=100000" else
                {k: int(v) for k, v in (x.split("=") for x in a.caps.split(",") if x)})
    sizes = [int(x) for x in a.sizes.split(",")]
    ms = a.measurements.split(",")
    plan = [(n, m) for n in sizes for m in ms if n <= caps.get(m, n)]
    rows = load_rows(a.out / "scale.csv") if a.append else []
    servers: list[subprocess.Popen] = []
    signal.signal(signal.SIGTERM, signal.default_int_handler)   # kill PID: servers stopped as with Ctrl-C
    with tempfile.TemporaryDirectory(prefix="scale-bench-") as d:
        work = Path(d)
        work.chmod(0o755)
        try:
            servers.append(start_knot(work, buckets(max(sizes), a.names_per_address)))
            if "tls" in ms:
                servers.append(start_nginx(work))
            quic_n = max([n for n, m in plan if m == "quic"], default=0)
            if quic_n:
                nb = buckets(quic_n, a.names_per_address)
                servers.append(start_quic(work, [bucket_address(j) for j in range(nb)]))
            b = Bench(a, work)
            for n, m in plan:
                r = b.one(m, n)
                print(json.dumps(r), flush=True)
                rows = merge(rows, r)
                slopes(rows)
                write_outputs(rows, a.out)
        finally:
            for p in reversed(servers):
                stop(p)
    print((a.out / "scale.md").read_text())
    return 0


if __name__ == "__main__":
    sys.exit(main())
