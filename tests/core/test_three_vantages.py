"""Issue 26 item 5: a campaign split across three vantages, one of them SIGKILLed mid-way,
finishes with every target exactly once per round, and each row is attributed to the
vantage that really measured it - checked against the server's own log of the source
address of every connection it accepted, not only against the database.

Topology (all the test's own, nothing shared is touched; removed at the end):

- ``nstv-srv``: a bridge ``nstvbr0`` (198.18.160.1/24, 2001:2:0:160::1/64) and a logging
  TCP server on port 80 answering every address of 198.18.162.0/24 and 2001:2:0:162::/64
  (local routes on lo); it writes one JSON line per accepted connection: time, peer
  (source) address, local (destination) address.
- ``nstv-a``, ``nstv-b``, ``nstv-c``: vantages on the bridge with sources 198.18.160.1X and
  2001:2:0:160::1X (X = 1, 2, 3), each running ``netsurvey --vantage vX worker`` against
  the test's one database (the embedded PostgreSQL of tests/conftest.py, over its unix
  socket).

The campaign: ``schedule start`` of a 2 rounds x 1 s entry of ``scan vantage-probe``
(tests/support/plugins/vantage_probe_scan.py: one TCP connect per target, odd ranks IPv4, even
ranks IPv6) in 4 shards. The rows' round and vantage come from their ``shard_id``
(schema/0115_row_vantage.sql)."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import REPO, needs_root, run_cli
from support.campaign import progress, q, schedule_file, start
from support.jobs import wait_for

pytestmark = needs_root()
PLUGIN = {"NETSURVEY_PLUGINS": "tests.support.plugins.vantage_probe_scan", "PYTHONPATH": str(REPO)}
SRV, BR = "nstv-srv", "nstvbr0"
VANTAGES = {x: {"ns": f"nstv-{x}", "name": f"v{x}", "src4": f"198.18.160.1{i}", "src6": f"2001:2:0:160::1{i}",
                "veth": (f"nstv{x}0", f"nstv{x}b"), "mac": f"02:16:00:00:00:1{i}"}
            for i, x in enumerate("abc", 1)}
N, SHARDS, ROUNDS = 30, 4, 2

SERVER = r"""
import json, socket, sys, time, threading
out = open(sys.argv[1], "a", buffering=1)
s = socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
s.bind(("::", 80)); s.listen(512)
print("ready", flush=True)
norm = lambda a: a[7:] if a.startswith("::ffff:") else a

def serve(c):   # answers a request (handshake-timing's GET) with a small response; a bare connect is closed
    try:
        c.settimeout(3)
        if c.recv(4096):
            c.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok")
    except OSError:
        pass
    finally:
        c.close()

while True:
    c, peer = s.accept()
    out.write(json.dumps({"t": time.time(), "src": norm(peer[0]), "dst": norm(c.getsockname()[0])}) + "\n")
    threading.Thread(target=serve, args=(c,), daemon=True).start()
"""


def sh(*a: str) -> None:
    p = subprocess.run(a, capture_output=True, text=True)
    assert p.returncode == 0, f"{' '.join(a)}: {p.stderr}"


def ns_pids(ns: str) -> list[int]:
    out = subprocess.run(["ip", "netns", "pids", ns], capture_output=True, text=True).stdout
    return [int(x) for x in out.split()]


def kill_ns(ns: str) -> None:
    for pid in ns_pids(ns):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def down() -> None:
    for ns in [v["ns"] for v in VANTAGES.values()] + [SRV]:
        kill_ns(ns)
        subprocess.run(["ip", "netns", "del", ns], capture_output=True)   # takes its veth ends along


def up() -> None:
    down()
    sh("ip", "netns", "add", SRV)
    sh("ip", "-n", SRV, "link", "set", "lo", "up")
    sh("ip", "-n", SRV, "link", "add", BR, "type", "bridge")
    sh("ip", "-n", SRV, "link", "set", BR, "up")
    sh("ip", "-n", SRV, "addr", "add", "198.18.160.1/24", "dev", BR)
    sh("ip", "-n", SRV, "-6", "addr", "add", "2001:2:0:160::1/64", "dev", BR, "nodad")
    # every address of the two target ranges is local: the wildcard-bound server answers them all
    sh("ip", "-n", SRV, "route", "add", "local", "198.18.162.0/24", "dev", "lo")
    sh("ip", "-n", SRV, "-6", "route", "add", "local", "2001:2:0:162::/64", "dev", "lo")
    for v in VANTAGES.values():
        ns, (vn, vb) = v["ns"], v["veth"]
        sh("ip", "netns", "add", ns)
        sh("ip", "-n", ns, "link", "set", "lo", "up")
        sh("ip", "-n", ns, "link", "add", vn, "address", v["mac"], "type", "veth", "peer", "name", vb,
           "netns", SRV)
        sh("ip", "-n", SRV, "link", "set", vb, "master", BR, "up")
        sh("ip", "-n", ns, "link", "set", vn, "up")
        sh("ip", "-n", ns, "addr", "add", v["src4"] + "/24", "dev", vn)
        sh("ip", "-n", ns, "-6", "addr", "add", v["src6"] + "/64", "dev", vn, "nodad")
        sh("ip", "-n", ns, "route", "add", "198.18.162.0/24", "via", "198.18.160.1")
        sh("ip", "-n", ns, "-6", "route", "add", "2001:2:0:162::/64", "via", "2001:2:0:160::1")


@pytest.fixture
def three_vantages(tmp_path):
    up()
    log = tmp_path / "server.jsonl"
    srv = subprocess.Popen(["ip", "netns", "exec", SRV, sys.executable, "-c", SERVER, str(log)],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert srv.stdout.readline().strip() == "ready", srv.stderr.read()
        yield log
    finally:
        srv.kill()
        srv.wait(10)
        down()


def worker(db, v: dict) -> subprocess.Popen:
    env = dict(os.environ, **PLUGIN)
    env.pop("NETSURVEY_DSN", None)
    env.pop("NETSURVEY_VANTAGE", None)
    return subprocess.Popen(["ip", "netns", "exec", v["ns"], sys.executable, "-m", "netsurvey.cli", "--dsn", db.dsn,
                             "--vantage", v["name"], "worker", "--heartbeat", "1", "--stalled-after", "4"],
                            cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)


def server_log(path: Path) -> list[dict]:
    return [json.loads(ln) for ln in path.read_text().splitlines() if ln.strip()] if path.exists() else []


def rows(db, run_id: int) -> list[tuple]:
    """(round, hostname, address, vantage name, v4 sources, v6 sources, probed_at epoch, status, shard_id)."""
    return q(db, """SELECT o.round, p.hostname, host(p.address), v->>'name',
                           ARRAY(SELECT jsonb_array_elements_text(v->'sources'->'ipv4')),
                           ARRAY(SELECT jsonb_array_elements_text(v->'sources'->'ipv6')),
                           extract(epoch FROM p.probed_at)::float8, p.status, p.shard_id
                    FROM test_vantage_probe p LEFT JOIN shard_origin o USING (shard_id),
                         LATERAL row_vantage(p.run_id, p.shard_id) v
                    WHERE p.run_id = %s""", run_id)


def test_three_vantage_campaign_survives_a_killed_vantage(db, tmp_path, three_vantages):
    log = three_vantages
    from netsurvey.shard import shard_of
    from tests.support.plugins.vantage_probe_scan import address_of

    sizes = {}
    for i in range(1, N + 1):
        k = shard_of(f"h{i}.vantage.test", SHARDS)
        sizes[k] = sizes.get(k, 0) + 1
    assert len(sizes) == SHARDS and min(sizes.values()) >= 4, sizes   # the kill's timing below relies on it
    f = tmp_path / "tv.csv"
    f.write_text("".join(f"{i},h{i}.vantage.test\n" for i in range(1, N + 1)))
    assert run_cli("targets", "import", str(f), "--list", "tv", dsn=db.dsn).returncode == 0
    sched = schedule_file(tmp_path, "tv3", ROUNDS, "1s", SHARDS,
                          ["scan", "vantage-probe", "--list", "tv", "--delay", "0.3", "--concurrency", "1"])
    t0 = time.time()
    run_id = start(db, sched, "tv3", env=PLUGIN)
    by_src = {v[k]: x for x, v in VANTAGES.items() for k in ("src4", "src6")}
    c = VANTAGES["c"]
    # vc starts first (so it surely commits a shard before the others could take them all),
    # va and vb once vc is probing
    ws = {"c": worker(db, c)}
    assert wait_for(lambda: any(by_src.get(e["src"]) == "c" for e in server_log(log)), 90), ws["c"].poll()
    ws.update({x: worker(db, VANTAGES[x]) for x in "ab"})

    def c_mid_shard():
        """vc committed a shard and has just begun another: the server saw one or two
        connections from vc's sources more than vc's committed rows account for (every shard
        has >= 4 targets, 0.3 s apart: the shard is >= 0.6 s from its end). The log is read
        before the database, so a commit in between cannot make vc look busier than it is."""
        seen = sum(by_src.get(e["src"]) == "c" for e in server_log(log))
        committed = q(db, "SELECT count(*) FROM test_vantage_probe p JOIN shard_origin o USING (shard_id)"
                          " WHERE o.vantage_name = 'vc'")[0][0] if q(
            db, "SELECT to_regclass('test_vantage_probe') IS NOT NULL")[0][0] else 0
        return committed > 0 and 1 <= seen - committed <= 2

    try:
        assert wait_for(c_mid_shard, 120, every=0.05), (progress(db, run_id), [w.poll() for w in ws.values()])
        kill_ns(c["ns"])                      # SIGKILL: the worker and its shard process, mid-shard
        killed_at = time.time()
        ws["c"].wait(10)
        assert wait_for(lambda: progress(db, run_id)["status"] not in ("queued", "running"), 120), \
            progress(db, run_id)
    finally:
        for w in ws.values():
            if w.poll() is None:
                w.send_signal(signal.SIGTERM)
        for w in ws.values():
            try:
                w.wait(30)
            except subprocess.TimeoutExpired:
                w.kill()
    elapsed = time.time() - t0
    done = progress(db, run_id)
    assert (done["status"], done["rounds_done"], done["shards_remaining"]) == ("finished", ROUNDS, 0), done
    assert sorted(done["vantages"]) == ["va", "vb", "vc"], done

    # every target exactly once per round; the round from the row's shard
    got = rows(db, run_id)
    assert all(r[8] is not None for r in got), "a row without shard_id"
    per = {}
    for rnd, h, *_ in got:
        per[(rnd, h)] = per.get((rnd, h), 0) + 1
    assert per == {(rnd, f"h{i}.vantage.test"): 1 for rnd in range(1, ROUNDS + 1) for i in range(1, N + 1)}
    assert {r[7] for r in got} == {"success"}

    # the database's attribution: the source of the row's family is the named vantage's own
    for _rnd, h, addr, name, s4, s6, *_ in got:
        v = VANTAGES[name[1]]
        assert addr == address_of(int(h[1:].split(".")[0]))
        assert (s4 if ":" not in addr else s6) == [v["src4"] if ":" not in addr else v["src6"]], (h, name, s4, s6)

    # from outside: each row is one connection the server accepted from that vantage's
    # source, to that address, at that time (one-to-one, nearest time within 2 s)
    entries = server_log(log)
    unused = {}
    for e in entries:
        unused.setdefault((e["src"], e["dst"]), []).append(e["t"])
    for rnd, h, addr, name, s4, s6, at, *_ in got:
        src = (s6 if ":" in addr else s4)[0]
        ts = unused.get((src, addr), [])
        assert ts, f"{h} round {rnd}: the server saw no connection from {name} ({src}) to {addr}"
        best = min(ts, key=lambda t: abs(t - at))
        assert abs(best - at) < 2, (h, rnd, name, best, at)
        ts.remove(best)
    left = {k: ts for k, ts in unused.items() if ts}
    # the surviving vantages' connections are all accounted for; the killed one's last shard
    # connected but never committed (rolled back, measured again by another vantage)
    assert all(by_src[s] == "c" for s, _ in left), left
    lost = {dst for (s, dst), ts in left.items()}
    assert lost and all(t <= killed_at + 0.5 for ts in left.values() for t in ts), left
    # the shard vc died in was committed by another vantage, as a retry (attempt >= 2)
    hosts = {f"h{i}.vantage.test": address_of(i) for i in range(1, N + 1)}
    dead_shards = {shard_of(h, SHARDS) for h, a in hosts.items() if a in lost}
    retried = q(db, "SELECT shard, round, vantage_name, attempt FROM shard_origin WHERE run_id = %s AND attempt >= 2",
                run_id)
    assert any(s in dead_shards and name != "vc" for s, _, name, _ in retried), (dead_shards, retried)
    # each vantage used both families' sources (seen by the server)
    for x in "ab":
        seen = {e["src"] for e in entries}
        assert {VANTAGES[x]["src4"], VANTAGES[x]["src6"]} <= seen
    by_vantage = {}
    for r in got:
        by_vantage[r[3]] = by_vantage.get(r[3], 0) + 1
    print(f"three vantages, {ROUNDS} rounds x {SHARDS} shards x {N} targets, vc SIGKILLed: {elapsed:.1f} s; "
          f"rows per vantage {dict(sorted(by_vantage.items()))}; vc's uncommitted connections {sum(map(len, left.values()))};"
          f" retried shards {retried}")


def test_every_result_table_has_shard_id(db):
    """Every table with rows of a run (a foreign key to scan_run) but the run bookkeeping
    carries shard_id, so its rows know their round and vantage (schema/0115)."""
    missing = q(db, """SELECT DISTINCT c.conrelid::regclass::text FROM pg_constraint c
                       WHERE c.confrelid = 'scan_run'::regclass AND c.contype = 'f'
                         AND c.conrelid NOT IN ('job_shard'::regclass, 'run_round'::regclass)
                         AND NOT EXISTS (SELECT 1 FROM pg_attribute a WHERE a.attrelid = c.conrelid
                                         AND a.attname = 'shard_id' AND NOT a.attisdropped)""")
    assert missing == [], missing


RTT_MS = {"a": 0, "b": 20, "c": 60}   # the delay line's added round-trip time per vantage (ground truth)
HT4, HT6 = "198.18.167.101", "2001:2:0:167::102"   # handshake-timing targets: the same two from every vantage


def delay_links(tmp_path) -> dict:
    """Each vantage gets a second link to the server: a TUN pair joined by the testbed's
    userspace delay line (testbed/delayline.py; this kernel has no netem), adding RTT_MS[x].
    Vantage i's link is 198.18.16{3+i}.0/24 and 2001:2:0:16{3+i}::/64 (.2 / ::2 the vantage,
    .1 / ::1 the server); 198.18.167.0/24 and 2001:2:0:167::/64 are local to the server and
    routed over it. Returns {x: (src4, src6, applied profile, process)}."""
    out = {}
    sh("ip", "-n", SRV, "route", "add", "local", "198.18.167.0/24", "dev", "lo")
    sh("ip", "-n", SRV, "-6", "route", "add", "local", "2001:2:0:167::/64", "dev", "lo")
    for i, (x, v) in enumerate(VANTAGES.items(), 1):
        net = 163 + i
        vt, st = f"nstv{x}t", f"nstvs{x}"
        for ns, dev, me in ((v["ns"], vt, 2), (SRV, st, 1)):
            sh("ip", "-n", ns, "tuntap", "add", "dev", dev, "mode", "tun")
            sh("ip", "-n", ns, "addr", "add", f"198.18.{net}.{me}/24", "dev", dev)
            sh("ip", "-n", ns, "-6", "addr", "add", f"2001:2:0:{net}::{me}/64", "dev", dev, "nodad")
            sh("ip", "-n", ns, "link", "set", dev, "mtu", "1500", "up")
        sh("ip", "-n", v["ns"], "route", "add", "198.18.167.0/24", "dev", vt, "src", f"198.18.{net}.2")
        sh("ip", "-n", v["ns"], "-6", "route", "add", "2001:2:0:167::/64", "dev", vt, "src", f"2001:2:0:{net}::2")
        prof, applied = tmp_path / f"profile-{x}.json", tmp_path / f"applied-{x}.json"
        prof.write_text(json.dumps({"name": f"v{x}", "rtt_ms": RTT_MS[x]}))
        p = subprocess.Popen([sys.executable, "-m", "testbed.delayline", "--a", f"{v['ns']}:{vt}", "--b", f"{SRV}:{st}",
                              "--profile", str(prof), "--applied", str(applied)], cwd=REPO,
                             env=dict(os.environ, PYTHONPATH=str(REPO)), stderr=subprocess.PIPE, text=True)
        assert wait_for(applied.exists, 10), p.stderr.read() if p.poll() is not None else "no applied file"
        out[x] = (f"198.18.{net}.2", f"2001:2:0:{net}::2", json.loads(applied.read_text()), p)
    return out


@pytest.mark.slow   # ~45 s (three delay lines, three scans); the campaign test above stays in CI
def test_vantages_compare_handshake_timing(db, tmp_path, three_vantages):
    """Issue 26 item 5's comparison: the thesis's handshake times (Tables 3.5/5.1) depend on
    the path, i.e. on where one stands. Each vantage reaches the same two targets (IPv4,
    IPv6) over its own delay line (ground truth: the profile the delay line says it applied)
    and times TCP connections with scan handshake-timing; the figure
    vantage-compare-handshake-timing shows per vantage n and the medians, with the runs."""
    import csv

    log = three_vantages
    links = delay_links(tmp_path)
    try:
        runs = {}
        env = dict(os.environ, PYTHONPATH=str(REPO))
        env.pop("NETSURVEY_DSN", None)
        env.pop("NETSURVEY_VANTAGE", None)
        for x, v in VANTAGES.items():
            r = subprocess.run(["ip", "netns", "exec", v["ns"], sys.executable, "-m", "netsurvey.cli", "--dsn", db.dsn,
                                "--vantage", v["name"], "scan", "handshake-timing", "--target", HT4, "--target", HT6,
                                "--methods", "tcp", "--samples", "3", "--tcp-port", "80"],
                               cwd=REPO, env=env, capture_output=True, text=True, timeout=120)
            assert r.returncode == 0, r.stderr[-2000:]
            runs[x] = q(db, "SELECT max(id) FROM scan_run WHERE kind = 'handshake-timing'")[0][0]
    finally:
        for *_, p in links.values():
            p.terminate()
            p.wait(10)
    out = tmp_path / "fig"
    r = run_cli("plot", "vantage-compare-handshake-timing", *[a for i in runs.values() for a in ("--run", str(i))],
                "--out", str(out), dsn=db.dsn)
    assert r.returncode == 0, r.stderr
    with open(out / "vantage-compare-handshake-timing.csv") as fh:
        table = {x["vantage"]: x for x in csv.DictReader(fh)}
    assert sorted(table) == ["va", "vb", "vc"], table
    for x, v in VANTAGES.items():
        row, (s4, s6, applied, _) = table[v["name"]], links[x]
        assert applied["rtt_ms"] == RTT_MS[x]
        assert (row["method"], row["targets"], row["samples"], row["runs"]) == ("tcp", "2", "6", str(runs[x]))
        assert row["sources"].split() == [s4, s6]
        # connect = one RTT, first byte = two: the delay line's plus the (loaded) machine's own
        assert RTT_MS[x] <= float(row["connect_median_ms"]) < RTT_MS[x] + 25, row
        assert 2 * RTT_MS[x] <= float(row["ttfb_median_ms"]) < 2 * RTT_MS[x] + 50, row
    # from outside: the server accepted 3 connections per target from each vantage's own sources
    seen = {}
    for e in server_log(log):
        seen[(e["src"], e["dst"])] = seen.get((e["src"], e["dst"]), 0) + 1
    for s4, s6, *_ in links.values():
        assert (seen.get((s4, HT4)), seen.get((s6, HT6))) == (3, 3), seen
    assert list(out.glob("vantage-compare-handshake-timing.*"))
    print("vantage-compare-handshake-timing:", {k: (x["sources"], x["samples"], x["connect_median_ms"],
                                                   x["ttfb_median_ms"]) for k, x in table.items()})


def test_row_vantage_without_shard_id(db):
    """row_vantage(run_id, NULL) (a row not stamped: a run without shards, or written
    outside ResultWriter) is the run's vantage only when the run and its shards recorded
    one; a run measured from two vantages gives NULL, never the first shard's. With a
    shard_id it is that shard's, whatever scan_run.vantage says."""
    va = {"name": "va", "sources": {"ipv4": ["198.18.160.11"], "ipv6": []}}
    vb = {"name": "vb", "sources": {"ipv4": ["198.18.160.12"], "ipv6": []}}
    with db.connect() as conn:
        def run(v, shards=None):
            return conn.execute("INSERT INTO scan_run (kind, vantage, shards) VALUES ('t', %s, %s) RETURNING id",
                                (json.dumps(dict(v, sources_towards="targets")), shards)).fetchone()[0]

        def shard(r, i, v):
            return conn.execute("INSERT INTO job_shard (run_id, shard, status, vantage) VALUES (%s, %s, 'finished', %s)"
                                " RETURNING id", (r, i, json.dumps(v))).fetchone()[0]

        inline = run(va)
        one = run(va, 2)
        shard(one, 0, dict(va, sources_towards="targets"))
        shard(one, 1, dict(va, sources_towards="options"))   # same vantage, other lookup basis: still one
        two = run(va, 2)
        s0 = shard(two, 0, va)
        s1 = shard(two, 1, vb)
        got = conn.execute("SELECT row_vantage(%s, NULL), row_vantage(%s, NULL), row_vantage(%s, NULL),"
                           " row_vantage(%s, %s), row_vantage(%s, %s)",
                           (inline, one, two, two, s0, two, s1)).fetchone()
    assert got[0] == va and got[1] == va and got[2] is None
    assert got[3] == va and got[4] == vb
