"""The promise matrix (issue 20): for every measurement that contacts the network, the
README's promises are checked from outside the code, on the testbed.

A sniffer (tests/support/sniffer.py: AF_PACKET, root) runs inside the vantage namespace and records
every IP packet the vantage sends on the testbed bridge while the command runs. Per
measurement:

- ``dry_run``: ``--dry-run`` sends no packet to any target address, exits 0 and records
  the run ``cancelled``. Allowed: DNS queries to the testbed resolver/authoritative server
  for name resolution (only for measurements whose targets are not DNS servers), IPv6
  neighbour discovery, and the database connection (a unix socket: never on the wire).
  Positive control: the same command without ``--dry-run`` is seen contacting its targets.
- ``blocked``: a ``--config`` whose ``etiquette.block`` holds one target's addresses; no
  packet goes to them, the other targets are contacted (positive control), and a row of the
  run mentions the blocked target and says ``blocked``. The run is given ``--dsn '...
  password=MARKER'``: MARKER must be in no table afterwards (the inline half of the secret
  promise).
- ``rate``: ``rate_pps = 5``, ``per_destination_pps = 2``: contact attempts (first SYN of a
  TCP connection, first datagram of a UDP flow, each distinct DNS query) to the targets in
  any 2-second window stay under ``rate * 2 + burst (one second's worth) + 1`` globally and
  ``per_destination * 2 + 2`` per address. The case must produce enough attempts that an
  unpaced scan would break the bound (else it fails as meaningless).
- ``sigterm``: SIGTERM after the first contacts: the process exits, its run is ``failed``
  (not ``running``), and the rows of what was probed before are in the database.
- ``worker_config``: ``scan ... --shards 2`` queued without a config, then
  ``netsurvey --config X worker --once`` in the vantage: X's blocklist holds in the shards.
- ``procs_secret``: ``--dsn '... password=MARKER' --config X scan ... --procs 2``: X's
  blocklist holds in the shards, MARKER is on no child's command line (/proc/*/cmdline,
  polled) and in no row of any table; for ``atlas`` the API key must not land in the DB.

The list of measurements comes from ``netsurvey.measure.registry()`` (those with
``contacts_network``), and so does each one's case: a ``netsurvey.measure.PromiseCase``
declared with the measurement (``@measurement(..., promise=...)``; the scanners keep theirs in
their package's ``promises`` module). A measurement that declares none FAILS
``test_every_measurement_has_a_case``, so a new measurement cannot escape the matrix, and
adding one needs no edit here. A promise that does not apply to a measurement is listed in
its case's ``na`` with the reason (shown as a skip).

The commands run in a namespace of their own, ``nsp20`` (address 198.18.0.250 and
2001:2:0:ff::250 on the testbed bridge, the vantage's routes and resolver), and the sniffer
watches its one interface: the testbed is shared machine-wide, and other sessions' scans
from the vantage itself would otherwise show up in the capture. The namespace is made by
the ``lab`` fixture and removed at the end of the session that made it.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Optional

import psycopg
import pytest
from psycopg.conninfo import make_conninfo

from conftest import REPO, hold_testbed, needs_root, run_cli
from netsurvey.measure import ALL_TLS_HOSTS, PromiseCase
from support.sniffing import SNIFFER

pytestmark = [pytest.mark.timeout(180)]


def on_testbed(test):
    """The promise tests run commands in a network namespace and sniff: root and iproute2
    (``test_every_measurement_has_a_case`` reads the registry only: it runs anywhere)."""
    return needs_root()(pytest.mark.root(test))

RATE_PPS, PER_DEST_PPS, WINDOW_S = 5, 2, 2.0
#: SIGTERM goes this long after the first contact; attempts older than the grace (longer
#: than every timeout the SIGTERM cases use) have an outcome that must be in the database
TERM_AFTER_S, TERM_GRACE_S = 4.5, 3.0

# ----------------------------------------------------------------------------- the cases (declared with each measurement)

def _measurements() -> tuple[list[str], dict[str, Optional[dict]], str]:
    """Names of the measurements that contact the network, each one's declared promise case
    (``netsurvey.measure.PromiseCase`` as JSON, or None), and where the list came from. Read
    in a fresh interpreter (importing the CLI registers every measurement)."""
    code = ("import json, os\n"
            "import netsurvey.cli  # registers the measurements\n"
            "import netsurvey.measure as nm\n"
            "if os.path.dirname(nm.__file__) != os.path.dirname(netsurvey.cli.__file__):\n"
            "    print('null'); raise SystemExit  # another checkout's module on the path\n"
            "print(json.dumps({n: m.promise.to_json() if m.promise else None\n"
            "                  for n, m in sorted(nm.registry().items()) if m.contacts_network}))\n")
    env = {k: v for k, v in os.environ.items() if k not in ("NETSURVEY_PLUGINS", "NETSURVEY_CONFIG")}
    p = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=60, env=env)
    if p.returncode != 0:
        return [f"<registry failed: {p.stderr.strip().splitlines()[-1] if p.stderr.strip() else p.returncode}>"], {}, "error"
    got = json.loads(p.stdout.strip().splitlines()[-1])
    if got is None:
        return ["<netsurvey.measure of another checkout on the path>"], {}, "error"
    if not got:
        return ["<the registry lists no measurement that contacts the network>"], {}, "registry"
    return sorted(got), got, "registry"


MEASUREMENTS, _DECLARED, SOURCE = _measurements()
#: each measurement's promise case, as declared with it (``@measurement(..., promise=...)``)
CASES: dict[str, PromiseCase] = {n: PromiseCase.from_json(d) for n, d in _DECLARED.items() if d is not None}


def test_every_measurement_has_a_case():
    """A measurement that contacts the network but declares no promise case escapes the matrix."""
    missing = [m for m in MEASUREMENTS if m not in CASES]
    assert not missing, (f"measurements without a promise case ({SOURCE}; declare one with "
                         f"@measurement(..., promise=PromiseCase(...))): {missing}")


def _params(promise: str):
    """One parameter per measurement; a known, still open defect is a strict xfail: the
    test still runs, and passes loudly (XPASS fails) the day the defect is fixed. A case
    declared ``slow`` runs only in `make test-slow` (kept out of `make test`'s time budget)."""
    out = []
    for m in MEASUREMENTS:
        if m not in CASES:
            continue
        why = KNOWN.get((m, promise))
        # strict unless the defect shows only with some timings (then an XPASS is not a failure)
        strict = (m, promise) not in TIMING_DEPENDENT
        marks = [pytest.mark.xfail(strict=strict, reason=f"known defect (issue 20 closing note): {why}")] if why else []
        if CASES[m].slow:
            marks.append(pytest.mark.slow)
        out.append(pytest.param(m, id=m, marks=marks))
    return out


#: Defects this matrix found that are not fixed yet, by (measurement, promise). Each is
#: named in issue 20's closing note; remove the entry with the fix.
#: known defects whose test outcome depends on timing (how many targets end before the signal)
TIMING_DEPENDENT: set[tuple[str, str]] = set()
#: None left: tls (targets in flight now get 'interrupted' rows), tls-lifetime (issue 26's
#: event log), tls-shared (the pair under way is recorded) and tls-zgrab (lines written as
#: zgrab2 prints them) were fixed in the session of 2026-11-24 and pass.
KNOWN: dict[tuple[str, str], str] = {}


# ----------------------------------------------------------------------------- helpers

LAB_NS, LAB_V4, LAB_V6 = "nsp20", "198.18.0.250", "2001:2:0:ff::250"
VANTAGE_NS = "nstb-vantage"


class Lab:
    """A namespace of our own on the testbed bridge, routed like the vantage."""
    iface = "p20n"

    def exec_argv(self, cmd: list[str]) -> list[str]:
        return ["ip", "netns", "exec", LAB_NS, *cmd]

    @staticmethod
    def healthy() -> bool:
        ok = subprocess.run(["ip", "-n", VANTAGE_NS, "link", "show", "p20v"], capture_output=True).returncode == 0
        return ok and subprocess.run(["ip", "-n", LAB_NS, "link", "show", "p20n"], capture_output=True).returncode == 0

    @staticmethod
    def up() -> None:
        def sh(*a):
            subprocess.run(a, check=True, capture_output=True)
        Lab.down()
        sh("ip", "netns", "add", LAB_NS)
        sh("ip", "link", "add", "p20v", "type", "veth", "peer", "name", "p20n")
        sh("ip", "link", "set", "p20v", "netns", VANTAGE_NS)
        sh("ip", "link", "set", "p20n", "netns", LAB_NS)
        sh("ip", "-n", VANTAGE_NS, "link", "set", "p20v", "master", "tbbr0", "up")
        sh("ip", "-n", LAB_NS, "link", "set", "lo", "up")
        sh("ip", "-n", LAB_NS, "link", "set", "p20n", "up")
        sh("ip", "-n", LAB_NS, "addr", "add", LAB_V4 + "/24", "dev", "p20n")
        sh("ip", "-n", LAB_NS, "-6", "addr", "add", LAB_V6 + "/64", "dev", "p20n", "nodad")
        for fam in ("-4", "-6"):
            routes = subprocess.run(["ip", "-n", VANTAGE_NS, fam, "route"], capture_output=True, text=True).stdout
            for ln in routes.splitlines():
                w = ln.split()
                if len(w) >= 3 and w[1] == "via":
                    sh("ip", "-n", LAB_NS, fam, "route", "add", w[0], "via", w[2], "dev", "p20n")
        etc = Path("/etc/netns") / LAB_NS
        etc.mkdir(parents=True, exist_ok=True)
        (etc / "resolv.conf").write_text((Path("/etc/netns") / VANTAGE_NS / "resolv.conf").read_text())
        sh("ip", "netns", "exec", LAB_NS, "sysctl", "-qw", "net.ipv4.tcp_fastopen=1")
        time.sleep(0.5)

    @staticmethod
    def down() -> None:
        subprocess.run(["ip", "netns", "del", LAB_NS], capture_output=True)   # takes the veth pair along
        subprocess.run(["ip", "-n", VANTAGE_NS, "link", "del", "p20v"], capture_output=True)
        (Path("/etc/netns") / LAB_NS / "resolv.conf").unlink(missing_ok=True)
        try:
            (Path("/etc/netns") / LAB_NS).rmdir()
        except OSError:
            pass


@pytest.fixture(scope="session")
def _lab_session(_testbed_session):
    with hold_testbed():   # session fixtures set up before a file takes its testbed lock
        _testbed_session.up(log=lambda *_: None)
        made = not Lab.healthy()
        if made:
            Lab.up()
    yield Lab()
    if made:
        with hold_testbed():
            Lab.down()


@pytest.fixture
def lab(testbed, _lab_session):
    """``nsp20``: where the commands run and the sniffer listens (re-made if the testbed
    was re-made under it)."""
    if not Lab.healthy():
        Lab.up()
    return _lab_session


class Sniffer:
    """tests/support/sniffer.py in the vantage namespace, for the duration of a ``with`` block."""

    def __init__(self, lab, path: Path):
        self.lab, self.path = lab, path
        self.packets: list[dict] = []
        self.stats: dict = {}

    def __enter__(self):
        self.proc = subprocess.Popen(self.lab.exec_argv([sys.executable, str(SNIFFER), "--out", str(self.path),
                                                         "--iface", self.lab.iface, "--seconds", "240"]),
                                     stdout=subprocess.PIPE, text=True)
        assert self.proc.stdout.readline().strip() == "ready"
        return self

    def current(self) -> list[dict]:
        """Packets recorded so far (the file is written as they come)."""
        try:
            lines = self.path.read_text().splitlines()
        except FileNotFoundError:
            return []
        out = []
        for ln in lines:
            try:
                out.append(json.loads(ln))
            except ValueError:
                pass    # a line being written
        return out

    def __exit__(self, *exc):
        time.sleep(0.3)   # let the last frames through
        self.proc.send_signal(signal.SIGTERM)
        out, _ = self.proc.communicate(timeout=20)
        self.stats = json.loads(out.strip().splitlines()[-1])
        self.packets = [json.loads(x) for x in self.path.read_text().splitlines()]
        return False


def gt_addresses(testbed, hosts) -> dict[str, set[str]]:
    names = testbed.status()["ground_truth"]["dns"]["names"]
    out = {}
    for h in hosts:
        t = names.get(h, {})
        out[h] = set(t.get("A", {}).get("values", [])) | {_norm6(a) for a in t.get("AAAA", {}).get("values", [])}
    return out


def _norm6(a: str) -> str:
    import ipaddress
    return str(ipaddress.ip_address(a))


def addresses_of(testbed, name: str) -> set[str]:
    """A hostname's testbed addresses, or the address itself."""
    if name[0].isdigit() or ":" in name:
        return {name}
    if name == "atlas.test":
        a = testbed.status()["ground_truth"]["atlas"]
        return {a["address"], _norm6(a["address_v6"])}
    return gt_addresses(testbed, [name])[name]


def case_targets(testbed, c: PromiseCase, hosts=None) -> set[str]:
    hosts = c.hosts if hosts is None else hosts
    if c.dns_targets:   # DNS measurements contact nameservers, not the names' addresses
        return set(c.targets)
    return set(c.targets) | {a for s in gt_addresses(testbed, hosts).values() for a in s}


def to(pkts, addrs) -> list[dict]:
    return [p for p in pkts if p["dst"] in addrs and not (p["proto"] == "icmp6" and p.get("icmp_type") in (133, 134, 135, 136, 143))]


def attempts(pkts, addrs) -> list[dict]:
    """Contact attempts: the first SYN of each TCP connection, the first datagram of each
    UDP flow (DNS: each distinct query), ICMP echo requests."""
    seen, out = set(), []
    for p in sorted(to(pkts, addrs), key=lambda p: p["t"]):
        if p["proto"] == "tcp":
            if not p.get("syn"):
                continue
            key = ("tcp", p["dst"], p.get("sport"), p.get("dport"))
        elif p["proto"] == "udp":
            key = ("udp", p["dst"], p.get("sport"), p.get("dport"), p.get("dns_id"))
        else:
            key = (p["proto"], p["dst"], p["t"])
        if key not in seen:
            seen.add(key)
            out.append(p)
    return out


def show(pkts, n=8) -> str:
    return "; ".join(f"{p['t'] % 100:.3f} {p['proto']} {p['src']}:{p.get('sport', '')} -> {p['dst']}:{p.get('dport', '')}"
                     for p in pkts[:n]) + (f" ... ({len(pkts)} packets)" if len(pkts) > n else "")


def import_list(db, tmp_path, hosts, name="p"):
    f = tmp_path / f"{name}.csv"
    f.write_text("".join(f"{i},{h}\n" for i, h in enumerate(hosts, 1)))
    r = run_cli("targets", "import", str(f), "--list", name, dsn=db.dsn)
    assert r.returncode == 0, r.stderr


def argv(c: PromiseCase, args, dsn: str, config: Optional[Path] = None, extra=()) -> list[str]:
    glob = ["--dsn", dsn] + (["--config", str(config)] if config else [])
    return [sys.executable, "-m", "netsurvey.cli", *glob, *c.cmd, *[a.replace("{list}", "p") for a in args], *extra]


def run_in_lab(lab, cmd, env=None, timeout=150) -> subprocess.CompletedProcess:
    e = {k: v for k, v in os.environ.items() if k not in ("NETSURVEY_DSN", "NETSURVEY_CONFIG", "NETSURVEY_PLUGINS")}
    e.update(env or {})
    return subprocess.run(lab.exec_argv(cmd), cwd=REPO, env=e, capture_output=True, text=True, timeout=timeout)


def write_config(tmp_path, name="survey.toml", block=(), rate=None, per_dest=None) -> Path:
    lines = ["[etiquette]", "block = [" + ", ".join(f'"{b}"' for b in block) + "]"]
    if rate:
        lines.append(f"rate_pps = {rate}")
    if per_dest:
        lines.append(f"per_destination_pps = {per_dest}")
    p = tmp_path / name
    p.write_text("\n".join(lines) + "\n")
    return p


def block_nets(addrs) -> list[str]:
    return [a + ("/128" if ":" in a else "/32") for a in sorted(addrs)]


def q(db, sql, *params):
    with psycopg.connect(db.dsn) as conn:
        return conn.execute(sql, params).fetchall()


def runs(db) -> list[tuple]:
    return q(db, "SELECT id, kind, status FROM scan_run ORDER BY id")


def result_tables(db) -> list[str]:
    return [t for (t,) in q(db, """SELECT c.table_name FROM information_schema.columns c
            JOIN information_schema.tables t USING (table_schema, table_name)
            WHERE c.table_schema = 'public' AND c.column_name = 'run_id' AND t.table_type = 'BASE TABLE'
              AND c.table_name NOT IN ('scan_run', 'job_shard') ORDER BY 1""")]


def result_rows(db) -> list[str]:
    """Every row of every per-run results table, as JSON text."""
    out = []
    for t in result_tables(db):
        out += [r[0] for r in q(db, f'SELECT to_jsonb(x)::text FROM "{t}" x')]
    return out


def blocked_rows(db, name: str, addrs: set[str]) -> list[str]:
    """Rows that record the blocked host as blocked; measurements that store only probed
    pairs record it in their run's counts instead (``scan_run.counts.blocked``)."""
    keys = {name, *addrs}
    rows = [r for r in result_rows(db) if "blocked" in r.lower() and any(f'"{k}"' in r or f'"{k}/' in r for k in keys)]
    if not rows:
        rows = [f"scan_run {i} counts blocked={n}" for i, n in q(
            db, "SELECT id, (counts->>'blocked')::int FROM scan_run WHERE (counts->>'blocked')::int > 0")]
    return rows


def ready(c: PromiseCase, promise: str, testbed):
    if promise in c.na:
        pytest.skip(c.na[promise])
    for path, why in c.requires.items():
        if not (REPO / path).exists():
            pytest.skip(why)


def case_env(c: PromiseCase) -> dict[str, str]:
    """The case's environment variables, read from the files it names (missing: unset)."""
    out = {}
    for var, path in c.env_from_files.items():
        f = Path(path)
        if f.exists():
            out[var] = f.read_text().strip()
    return out


# ----------------------------------------------------------------------------- promises

@on_testbed
@pytest.mark.parametrize("name", _params("dry_run"))
def test_dry_run_sends_nothing(name, db, testbed, lab, tmp_path):
    c = CASES[name]
    ready(c, "dry_run", testbed)
    import_list(db, tmp_path, c.hosts) if c.hosts else None
    targets = case_targets(testbed, c)
    with Sniffer(lab, tmp_path / "dry.jsonl") as dry:
        r = run_in_lab(lab, argv(c, c.args, db.dsn, extra=["--dry-run"]), env=case_env(c))
    sent = to(dry.packets, targets)
    assert dry.stats["kernel_drops"] == 0
    assert not sent, f"{name} --dry-run sent {len(sent)} packets to its targets: {show(sent)}"
    assert r.returncode == 0, f"--dry-run exit {r.returncode}: {r.stderr.strip()[-400:]}"
    st = runs(db)
    assert st and all(s == "cancelled" for _, _, s in st), f"dry run recorded {st} (want every run 'cancelled')"
    # positive control: without --dry-run the sniffer sees the command contact its targets
    with Sniffer(lab, tmp_path / "real.jsonl") as real:
        run_in_lab(lab, argv(c, c.args, db.dsn), env=case_env(c))
    assert to(real.packets, targets), f"control: {name} without --dry-run contacted none of {sorted(targets)}"


@on_testbed
@pytest.mark.parametrize("name", _params("blocked"))
def test_blocked_addresses_never_contacted(name, db, testbed, lab, tmp_path):
    c = CASES[name]
    ready(c, "blocked", testbed)
    import_list(db, tmp_path, c.hosts) if c.hosts else None
    blocked = addresses_of(testbed, c.block)
    others = case_targets(testbed, c) - blocked
    cfg = write_config(tmp_path, block=block_nets(blocked))
    marker = "Pw" + os.urandom(6).hex() + "Secret"   # inline run: the --dsn password stays out of the DB
    with Sniffer(lab, tmp_path / "bl.jsonl") as s:
        r = run_in_lab(lab, argv(c, c.args, make_conninfo(db.dsn, password=marker), config=cfg), env=case_env(c))
    problems = []
    bad = to(s.packets, blocked)
    if bad:
        problems.append(f"{len(bad)} packets to blocked {sorted(blocked)}: {show(bad, 4)}")
    leaked = secret_tables(db, [marker])
    if leaked:
        problems.append(f"the --dsn password of an inline run landed in the database: {leaked}")
    if c.refuse_ok and r.returncode == 2:
        if len(r.stderr.strip().splitlines()) != 1:
            problems.append(f"refusal is not one line: {r.stderr.strip()[-300:]}")
    elif r.returncode != 0:
        problems.append(f"exit {r.returncode}: {r.stderr.strip()[-300:]}")
    elif not to(s.packets, others):
        problems.append(f"control: contacted none of the allowed targets {sorted(others)}")
    elif not blocked_rows(db, c.block, blocked):
        problems.append(f"no row of run(s) {runs(db)} records {c.block} {sorted(blocked)} as blocked "
                        f"(tables with a run_id: {', '.join(t for t in result_tables(db) if _count(db, t))})")
    assert not problems, f"{name}: " + " | ".join(problems)


def _count(db, table: str) -> int:
    return q(db, f'SELECT count(*) FROM "{table}"')[0][0]


def secret_tables(db, secrets) -> list[tuple[str, str]]:
    """(table, secret prefix) for every table with a row whose text holds a secret."""
    found = []
    with psycopg.connect(db.dsn) as conn:
        tables = [t for (t,) in conn.execute(
            "SELECT format('%I.%I', table_schema, table_name) FROM information_schema.tables "
            "WHERE table_type = 'BASE TABLE' AND table_schema NOT IN ('pg_catalog', 'information_schema')")]
        for t in tables:
            for x in secrets:
                if x and conn.execute(f"SELECT count(*) FROM {t} r WHERE r::text LIKE %s", (f"%{x}%",)).fetchone()[0]:
                    found.append((t, x[:4] + "..."))
    return found


@on_testbed
@pytest.mark.parametrize("name", _params("rate"))
def test_rates_hold(name, db, testbed, lab, tmp_path):
    c = CASES[name]
    ready(c, "rate", testbed)
    hosts = _hosts(testbed, c.rate_hosts or c.hosts)
    import_list(db, tmp_path, hosts) if hosts else None
    targets = c.rate_targets if c.rate_targets is not None else case_targets(testbed, c, hosts)
    cfg = write_config(tmp_path, rate=RATE_PPS, per_dest=PER_DEST_PPS)
    with Sniffer(lab, tmp_path / "rate.jsonl") as s:
        errf = (tmp_path / "rate.err").open("w+")
        proc = subprocess.Popen(lab.exec_argv(argv(c, c.rate_args or c.args, db.dsn, config=cfg)), cwd=REPO,
                                env=_env(c), stdout=subprocess.DEVNULL, stderr=errf, start_new_session=True)
        try:
            proc.wait(timeout=8)   # long enough to see the pace; a paced scan may go on
        except subprocess.TimeoutExpired:
            _killpg(proc)
    att = attempts(s.packets, targets)
    glob_cap = RATE_PPS * WINDOW_S + max(1, RATE_PPS) + 1
    dest_cap = PER_DEST_PPS * WINDOW_S + 2
    most_to_one = max((sum(1 for p in att if p["dst"] == d) for d in {p["dst"] for p in att}), default=0)
    # enough attempts that an unpaced scan would break the global cap, or (a case with one
    # destination, e.g. dns-ecs's resolver) the per-destination cap
    assert len(att) >= min(glob_cap + 1, 12) or most_to_one > dest_cap, (
        f"control: only {len(att)} contact attempts seen; the case cannot show a rate (stderr: "
        f"{(tmp_path / 'rate.err').read_text().strip()[-300:]})")
    worst, at = _max_window(att)
    assert worst <= glob_cap, (f"{name}: {worst} attempts in {WINDOW_S:.0f} s from {at % 100:.3f} with rate_pps={RATE_PPS} "
                               f"(cap {glob_cap:.0f}): {show([p for p in att if at <= p['t'] < at + WINDOW_S])}")
    by_dest = defaultdict(list)
    for p in att:
        by_dest[p["dst"]].append(p)
    for d, ps in by_dest.items():
        w, at = _max_window(ps)
        assert w <= dest_cap, (f"{name}: {w} attempts to {d} in {WINDOW_S:.0f} s with per_destination_pps="
                               f"{PER_DEST_PPS} (cap {dest_cap:.0f}): {show([p for p in ps if at <= p['t'] < at + WINDOW_S])}")


def _max_window(ps) -> tuple[int, float]:
    ts = sorted(p["t"] for p in ps)
    best, at, j = 0, 0.0, 0
    for i, t in enumerate(ts):
        while ts[j] < t - WINDOW_S + 1e-9:
            j += 1
        if i - j + 1 > best:
            best, at = i - j + 1, ts[j]
    return best, at


def _hosts(testbed, hosts):
    if hosts == ALL_TLS_HOSTS:
        return [h["hostname"] for h in testbed.status()["ground_truth"]["tls_hosts"]]
    return hosts


def _killpg(proc) -> None:
    """SIGKILL the command and everything it started (its own session)."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait()


def _env(c: PromiseCase) -> dict:
    e = {k: v for k, v in os.environ.items() if k not in ("NETSURVEY_DSN", "NETSURVEY_CONFIG", "NETSURVEY_PLUGINS")}
    e.update(case_env(c))
    return e


def _pid_of_cli(popen) -> int:
    """The python process of ``ip netns exec ... python -m netsurvey.cli`` (ip execs it;
    should it fork, its child)."""
    for pid in (popen.pid, *_children(popen.pid)):
        try:
            if b"netsurvey.cli" in Path(f"/proc/{pid}/cmdline").read_bytes():
                return pid
        except OSError:
            pass
    return popen.pid


def _children(pid: int) -> list[int]:
    out = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                if int((d / "stat").read_text().rsplit(")", 1)[1].split()[1]) == pid:
                    out.append(int(d.name))
            except (OSError, IndexError, ValueError):
                pass
    return out


@on_testbed
@pytest.mark.parametrize("name", _params("sigterm"))
def test_sigterm_keeps_rows_and_fails_the_run(name, db, testbed, lab, tmp_path):
    c = CASES[name]
    ready(c, "sigterm", testbed)
    hosts = _hosts(testbed, c.term_hosts or c.hosts)
    import_list(db, tmp_path, hosts) if hosts else None
    args = c.term_args or c.rate_args or c.args
    targets = case_targets(testbed, c, hosts) | (c.rate_targets or set()) | {"198.19.0." + str(i) for i in range(256)}
    cfg = write_config(tmp_path, rate=2, per_dest=20)
    with Sniffer(lab, tmp_path / "term.jsonl") as s:
        errf = (tmp_path / "term.err").open("w+")
        proc = subprocess.Popen(lab.exec_argv(argv(c, args, db.dsn, config=cfg)), cwd=REPO, env=_env(c),
                                stdout=subprocess.DEVNULL, stderr=errf, start_new_session=True)
        t0 = time.time()
        while time.time() - t0 < 30 and proc.poll() is None:
            a = attempts(s.current(), targets)
            if len(a) >= 3 and time.time() - a[0]["t"] >= TERM_AFTER_S:
                break
            time.sleep(0.2)
        finished_early = proc.poll() is not None
        if not finished_early:
            os.kill(_pid_of_cli(proc), signal.SIGTERM)
            t_sig = time.time()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            _killpg(proc)
            pytest.fail(f"{name}: still running 30 s after SIGTERM (runs {runs(db)})")
        _killpg(proc)   # children it left behind
    err = (tmp_path / "term.err").read_text()
    contacted = attempts(s.packets, targets)
    assert contacted, f"control: {name} contacted nothing before SIGTERM (stderr {err.strip()[-300:]})"
    assert not finished_early, (f"{name}: finished (exit {proc.returncode}) before SIGTERM could be sent; the case "
                                f"did not run long with rate_pps=2 ({len(contacted)} attempts)")
    st = runs(db)
    problems = []
    if not st:
        problems.append("no run recorded")
    elif not all(s_ == "failed" for _, _, s_ in st):
        problems.append(f"after SIGTERM the run(s) are {st} (want 'failed')")
    before = [p for p in contacted if p["t"] < t_sig - TERM_GRACE_S]
    rows = result_rows(db)
    if before and not rows:
        problems.append(f"{len(before)} contact attempts more than {TERM_GRACE_S:.0f} s before SIGTERM (longer than "
                        f"any of the case's timeouts), but 0 result rows")
    assert not problems, f"{name} (exit {proc.returncode}): " + "; ".join(problems)


@on_testbed
@pytest.mark.parametrize("name", _params("worker_config"))
def test_worker_config_reaches_the_shards(name, db, testbed, lab, tmp_path):
    c = CASES[name]
    ready(c, "worker_config", testbed)
    import_list(db, tmp_path, c.hosts) if c.hosts else None
    blocked = addresses_of(testbed, c.block)
    others = case_targets(testbed, c) - blocked
    cfg = write_config(tmp_path, block=block_nets(blocked))
    r = run_in_lab(lab, argv(c, c.args, db.dsn, extra=["--shards", "2"]), env=case_env(c))
    assert r.returncode == 0, f"queueing --shards 2: exit {r.returncode}: {r.stderr.strip()[-400:]}"
    with Sniffer(lab, tmp_path / "w.jsonl") as s:
        w = run_in_lab(lab, [sys.executable, "-m", "netsurvey.cli", "--dsn", db.dsn, "--config", str(cfg),
                                     "worker", "--once"], env=case_env(c), timeout=150)
    bad = to(s.packets, blocked)
    assert not bad, f"{name}: the shards run by 'worker --config' sent {len(bad)} packets to blocked {sorted(blocked)}: {show(bad)}"
    assert w.returncode == 0, w.stderr[-400:]
    if c.refuse_ok and not others:  # every target blocked: the shards refuse, the run ends failed
        assert [s_ for _, _, s_ in runs(db)] == ["failed"], runs(db)
        return
    assert to(s.packets, others), f"control: the shards contacted none of {sorted(others)} (runs {runs(db)})"
    assert [s_ for _, _, s_ in runs(db)] == ["finished"], runs(db)
    assert blocked_rows(db, c.block, blocked), f"{name}: no row records {c.block} as blocked"


@on_testbed
@pytest.mark.parametrize("name", _params("procs_secret"))
def test_procs_config_and_no_secret(name, db, testbed, lab, tmp_path):
    c = CASES[name]
    ready(c, "procs_secret", testbed)
    import_list(db, tmp_path, c.hosts) if c.hosts else None
    marker = "Pw" + os.urandom(6).hex() + "Secret"
    dsn = make_conninfo(db.dsn, password=marker)
    secrets = [marker] + list(case_env(c).values())
    blocked = addresses_of(testbed, c.block)
    cfg = write_config(tmp_path, block=block_nets(blocked))
    procs = c.cmd[0] == "scan"
    with Sniffer(lab, tmp_path / "p.jsonl") as s:
        proc = subprocess.Popen(lab.exec_argv(argv(c, c.args, dsn, config=cfg, extra=["--procs", "2"] if procs else [])),
                                cwd=REPO, env=_env(c), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        top = None
        leaks: dict[int, str] = {}
        seen_children = set()
        while proc.poll() is None:
            top = top or _pid_of_cli(proc)
            top_cl = _cmdline(top)   # read each time: 'ip netns exec' becomes python in place
            for pid in _descendants(top):
                seen_children.add(pid)
                cl = _cmdline(pid)
                # a forked child shows the argv its parent was given (the user's own command
                # line); a secret on any other command line was put there by the code
                if cl and cl != top_cl and any(x and x in cl for x in secrets):
                    leaks[pid] = cl[:300]
            time.sleep(0.05)
        out, err = proc.communicate()
    problems = []
    if leaks:
        problems.append(f"a secret is on command lines the code started: {leaks}")
    refused = c.refuse_ok and proc.returncode == 2 and "block" in err
    if proc.returncode != 0 and not refused:
        problems.append(f"exit {proc.returncode}: {err.strip()[-300:]}")
    if procs and not seen_children and not refused:
        problems.append("control: no child process of --procs 2 was seen")
    bad = to(s.packets, blocked)
    if bad:
        problems.append(f"{'--procs 2 ' if procs else ''}--config: {len(bad)} packets to blocked {sorted(blocked)}: "
                        f"{show(bad, 3)}")
    found = secret_tables(db, secrets)
    if found:
        problems.append(f"a secret landed in the database: {found}")
    assert not problems, f"{name}: " + " | ".join(problems)


def _cmdline(pid: int) -> Optional[str]:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return None


def _descendants(pid: int) -> list[int]:
    out, todo = [], [pid]
    while todo:
        kids = _children(todo.pop())
        out += kids
        todo += kids
    return out
