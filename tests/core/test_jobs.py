"""Sharded scans through procrastinate workers: exactly once, SIGKILL, database restart,
periodic tasks, cancel. Workers run the real CLI inside the testbed's vantage namespace and
a real scanner (tests/support/plugins/tcp_connect_scan.py) against the testbed's scale range."""
from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

from conftest import REPO, needs_root, run_cli
from support.jobs import PLUGIN, import_list, wait_for, worker

pytestmark = needs_root()


def queue(db, *scan_args: str, shards: int) -> int:
    r = run_cli("scan", "tcp-connect", *scan_args, "--shards", str(shards), dsn=db.dsn, env=PLUGIN)
    assert r.returncode == 0, r.stderr
    return int(r.stdout.split("queued run ")[1].split(":")[0])


def run_row(db, run_id):
    with db.connect() as conn:
        return conn.execute("SELECT status, shards, counts FROM scan_run WHERE id = %s", (run_id,)).fetchone()


def probe_rows(db, run_id):
    with db.connect() as conn:
        return conn.execute("SELECT hostname, count(*) FROM test_tcp_probe WHERE run_id = %s GROUP BY 1",
                            (run_id,)).fetchall()


def test_two_workers_probe_every_target_exactly_once(db, tmp_path, testbed):
    import_list(db, tmp_path, 200)
    run_id = queue(db, "--list", "jobs", "--delay", "0.01", shards=4)
    assert run_row(db, run_id)[0] == "queued"
    ws = [worker(db, "--once"), worker(db, "--once")]
    for w in ws:
        assert w.wait(120) == 0, w.stderr.read()
    status, shards, counts = run_row(db, run_id)
    assert (status, shards) == ("finished", 4)
    rows = probe_rows(db, run_id)
    assert len(rows) == 200 and all(n == 1 for _, n in rows)
    assert counts == {"success": 200}
    with db.connect() as conn:
        assert conn.execute("SELECT count(*) FROM job_shard WHERE run_id = %s", (run_id,)).fetchone()[0] == 4
    prog = json.loads(run_cli("runs", "--json", dsn=db.dsn).stdout)
    mine = next(r for r in prog if r["id"] == run_id)
    assert (mine["shards_done"], mine["shards_remaining"]) == (4, 0)


def test_sigkill_mid_shard_is_retried_without_duplicates(db, tmp_path, testbed):
    import_list(db, tmp_path, 120)
    run_id = queue(db, "--list", "jobs", "--delay", "0.1", "--concurrency", "2", shards=2)
    a = worker(db, "--concurrency", "2")
    with db.connect() as conn:   # both shards started and a few seconds into their work
        wait_for(lambda: conn.execute("SELECT count(*) FROM procrastinate_jobs WHERE status = 'doing'"
                                      " AND (args->>'run_id')::bigint = %s", (run_id,)).fetchone()[0] == 2, 60)
    # ... and the run marked running by a shard (a job is 'doing' before its shard opens the
    # run: on a loaded machine 2 s were not always enough, and the run was still 'queued')
    assert wait_for(lambda: run_row(db, run_id)[0] == "running", 60)
    time.sleep(2)
    a.send_signal(signal.SIGKILL)
    a.wait(10)
    assert run_row(db, run_id)[0] == "running"
    b = worker(db)
    try:
        assert wait_for(lambda: run_row(db, run_id)[0] == "finished", 120)
    finally:
        b.send_signal(signal.SIGTERM)
        b.wait(30)
    rows = probe_rows(db, run_id)
    assert len(rows) == 120 and all(n == 1 for _, n in rows)
    with db.connect() as conn:   # the killed worker's shard processes died with it: retries committed
        attempts = [a for (a,) in conn.execute("SELECT attempt FROM job_shard WHERE run_id = %s", (run_id,))]
    assert len(attempts) == 2 and min(attempts) >= 2, attempts


def test_cancel_stops_pending_shards(db, tmp_path, testbed):
    import_list(db, tmp_path, 30)
    run_id = queue(db, "--list", "jobs", shards=3)
    r = run_cli("runs", "cancel", str(run_id), dsn=db.dsn)
    assert r.returncode == 0 and "3 pending shards cancelled" in r.stdout
    w = worker(db, "--once")
    assert w.wait(60) == 0
    assert run_row(db, run_id)[0] == "cancelled"
    with db.connect() as conn:
        if conn.execute("SELECT to_regclass('test_tcp_probe') IS NOT NULL").fetchone()[0]:
            assert not conn.execute("SELECT 1 FROM test_tcp_probe WHERE run_id = %s", (run_id,)).fetchone()
    assert run_cli("runs", "cancel", str(run_id), dsn=db.dsn).returncode == 2


def test_periodic_task_fires_on_schedule(db, tmp_path, testbed):
    import_list(db, tmp_path, 5)
    sched = tmp_path / "schedule.toml"
    sched.write_text('[[schedule]]\nname = "every2s"\ncron = "* * * * * */2"\n'
                     'command = ["scan", "tcp-connect", "--list", "jobs"]\n')
    r = run_cli("schedule", "list", "--schedule", str(sched), "--json", dsn=db.dsn)
    assert json.loads(r.stdout)[0]["name"] == "every2s"
    w = worker(db, "--schedule", str(sched))
    try:
        def fired():
            with db.connect() as conn:
                return conn.execute("SELECT count(*) FROM scan_run WHERE kind = 'tcp-connect' AND status = 'finished'"
                                    " AND parameters->>'schedule' = 'every2s' AND shards = 1").fetchone()[0] >= 2
        assert wait_for(fired, 40)
    finally:
        w.send_signal(signal.SIGTERM)
        w.wait(30)


def test_database_restart_mid_scan_loses_nothing(testbed):
    """Inline scan; the embedded server is stopped and restarted while it writes."""
    import tempfile

    from netsurvey.db import Database, stop_embedded

    own = Path(tempfile.mkdtemp(prefix="netsurvey-test-restart-"))  # pytest's basetemp is 0700
    own.chmod(0o711)
    data = own / "pg"
    try:
        db = Database.resolve(None, data)
        db.migrate()
        import_list(db, own, 150, "restart")
        env = dict(os.environ, **PLUGIN)
        env.pop("NETSURVEY_DSN", None)
        p = subprocess.Popen([sys.executable, "-m", "netsurvey.cli", "testbed", "exec", "--", sys.executable, "-m",
                              "netsurvey.cli", "--dsn", db.dsn, "scan", "tcp-connect", "--list", "restart", "--delay",
                              "0.05", "--concurrency", "1"], cwd=REPO, env=env, stdout=subprocess.DEVNULL,
                             stderr=subprocess.PIPE, text=True)

        def scanning():  # the scan has started (its run row exists), however loaded the machine
            with db.connect() as conn:
                return conn.execute("SELECT count(*) FROM scan_run WHERE kind = 'tcp-connect'").fetchone()[0] > 0
        assert wait_for(scanning, 60)
        time.sleep(1.5)
        assert stop_embedded(data)
        time.sleep(2)
        Database.resolve(None, data)
        assert p.wait(120) == 0, p.stderr.read()
        with db.connect() as conn:
            run_id = conn.execute("SELECT max(id) FROM scan_run WHERE kind = 'tcp-connect'").fetchone()[0]
            n, distinct = conn.execute("SELECT count(*), count(DISTINCT hostname) FROM test_tcp_probe"
                                       " WHERE run_id = %s", (run_id,)).fetchone()
        assert (n, distinct) == (150, 150)
    finally:
        stop_embedded(data)
        shutil.rmtree(own, ignore_errors=True)


def test_dry_run_probes_nothing(db, tmp_path, testbed):
    import_list(db, tmp_path, 40)
    r = run_cli("testbed", "exec", "--", sys.executable, "-m", "netsurvey.cli", "--dsn", db.dsn, "scan",
                "tcp-connect", "--list", "jobs", "--dry-run", env=PLUGIN)
    assert r.returncode == 0, r.stderr
    assert "40 targets would be probed" in r.stdout and "rate <=" in r.stdout
    with db.connect() as conn:
        assert conn.execute("SELECT count(*) FROM test_tcp_probe").fetchone()[0] == 0
        assert conn.execute("SELECT status FROM scan_run ORDER BY id DESC LIMIT 1").fetchone()[0] == "cancelled"


def test_bad_schedule_is_one_line_error(db, tmp_path):
    sched = tmp_path / "s.toml"
    sched.write_text('[[schedule]]\nname = "x"\ncron = "not cron"\ncommand = ["scan", "tls"]\n')
    r = run_cli("schedule", "list", "--schedule", str(sched), dsn=db.dsn)
    assert r.returncode == 2 and "s.toml: schedule.0" in r.stderr


def test_real_scanner_sharded_equals_inline(db, tmp_path, testbed):
    """`scan dns-ttl` (a real scanner) as 3 shards on 2 workers stores exactly what the
    inline run stores: same hostnames, same TTLs, once each."""
    f = tmp_path / "names.csv"
    f.write_text("".join(f"{i},h{i}.bench.example.test\n" for i in range(1, 301)))
    assert run_cli("targets", "import", str(f), "--list", "dnsjobs", dsn=db.dsn).returncode == 0
    r = run_cli("testbed", "exec", "--", sys.executable, "-m", "netsurvey.cli", "--dsn", db.dsn, "scan", "dns-ttl",
                "--list", "dnsjobs", "--json")
    assert r.returncode == 0, r.stderr
    inline_id = json.loads(r.stdout.strip().splitlines()[-1])["run_id"]
    r = run_cli("scan", "dns-ttl", "--list", "dnsjobs", "--shards", "3", dsn=db.dsn)
    assert r.returncode == 0, r.stderr
    sharded_id = int(r.stdout.split("queued run ")[1].split(":")[0])
    ws = [worker(db, "--once"), worker(db, "--once")]
    for w in ws:
        assert w.wait(120) == 0, w.stderr.read()
    assert run_row(db, sharded_id)[0] == "finished"
    q = "SELECT hostname, qtype, ttl FROM dns_ttl_observation WHERE run_id = %s ORDER BY 1, 2"
    with db.connect() as conn:
        inline = conn.execute(q, (inline_id,)).fetchall()
        sharded = conn.execute(q, (sharded_id,)).fetchall()
        dup = conn.execute("SELECT count(*) - count(DISTINCT (hostname, qtype)) FROM dns_ttl_probe WHERE run_id = %s",
                           (sharded_id,)).fetchone()[0]
    assert len(inline) >= 300 and sharded == inline and dup == 0
    # --procs 2: the same shards run at once here, without the queue (one engine per core)
    r = run_cli("testbed", "exec", "--", sys.executable, "-m", "netsurvey.cli", "--dsn", db.dsn, "scan", "dns-ttl",
                "--list", "dnsjobs", "--procs", "2")
    assert r.returncode == 0, r.stderr
    last = r.stdout.strip().splitlines()[-1]  # each shard prints its own summary before
    assert last.startswith("run ") and " finished (" in last, r.stdout
    local_id = int(last.split()[1].rstrip(":"))
    assert r.stderr.count(" done") == 2
    assert run_row(db, local_id)[:2] == ("finished", 2)
    with db.connect() as conn:
        local = conn.execute(q, (local_id,)).fetchall()
        shards = conn.execute("SELECT count(*) FROM job_shard WHERE run_id = %s", (local_id,)).fetchone()[0]
    assert local == inline and shards == 2


def test_procs_shard_that_failed_inside_is_reported_not_retried(db, tmp_path, testbed):
    """A shard whose scan failed commits itself as 'failed': --procs says so (exit 1, the
    shard named), the run is 'failed', and the shard is not run again (a retry would find
    its row and exit 0, hiding the failure)."""
    import_list(db, tmp_path, 40, "procsfail")
    env = dict(os.environ, **PLUGIN)
    env.pop("NETSURVEY_DSN", None)
    r = subprocess.run([sys.executable, "-m", "netsurvey.cli", "testbed", "exec", "--", sys.executable, "-m",
                        "netsurvey.cli", "--dsn", db.dsn, "scan", "tcp-connect", "--list", "procsfail",
                        "--fail-shard", "1", "--procs", "2"], cwd=REPO, env=env, capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 1, (r.returncode, r.stderr)
    assert "shard(s) 2 of 2 failed" in r.stderr and "shard 2/2 failed (exit 1)" in r.stderr
    with db.connect() as conn:
        run_id, status = conn.execute("SELECT id, status FROM scan_run WHERE kind = 'tcp-connect' "
                                      "ORDER BY id DESC LIMIT 1").fetchone()
        shards = conn.execute("SELECT shard, status, attempt FROM job_shard WHERE run_id = %s ORDER BY 1",
                              (run_id,)).fetchall()
    assert status == "failed" and shards == [(0, "finished", 1), (1, "failed", 1)], (shards, r.stderr[-3000:])


def test_procs_shards_read_the_given_config(db, tmp_path, testbed):
    """--config reaches the shards: a config that blocks the nameserver stops every shard
    (exit 2, nothing probed) where the default config would let them scan."""
    f = tmp_path / "names.csv"
    f.write_text("".join(f"{i},c{i}.bench.example.test\n" for i in range(1, 21)))
    assert run_cli("targets", "import", str(f), "--list", "dnscfg", dsn=db.dsn).returncode == 0
    cfg = tmp_path / "block.toml"
    cfg.write_text('[etiquette]\nblock = ["198.18.1.53/32"]\n')
    r = run_cli("testbed", "exec", "--", sys.executable, "-m", "netsurvey.cli", "--dsn", db.dsn, "--config", str(cfg),
                "scan", "dns-ttl", "--list", "dnscfg", "--nameserver", "198.18.1.53", "--procs", "2")
    assert r.returncode == 2 and "blocklisted" in r.stderr, (r.returncode, r.stderr)
    with db.connect() as conn:
        assert conn.execute("SELECT count(*) FROM dns_ttl_probe").fetchone()[0] == 0


def test_procs_bad_input_is_one_line_exit_2(db):
    r = run_cli("scan", "dns-ttl", "--list", "x", "--procs", "0", dsn=db.dsn)
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1 and "--procs" in r.stderr
    r = run_cli("scan", "dns-ttl", "--list", "x", "--procs", "two", dsn=db.dsn)
    assert r.returncode == 2 and "--procs" in r.stderr and len(r.stderr.strip().splitlines()) == 1
    r = run_cli("scan", "dns-ttl", "--list", "x", "--procs", "2", "--shards", "2", dsn=db.dsn)
    assert r.returncode == 2 and "do not go together" in r.stderr


COMMITTER = r"""
import os, sys, time
from pathlib import Path
from netsurvey import runctx, shard
dsn, barrier = os.environ["NETSURVEY_DSN"], Path(sys.argv[1])
i, n, run_id = (int(x) for x in sys.argv[2:5])
active = runctx.activate(runctx.RunContext("tfo", shard=runctx.ShardSpec(i, n, run_id)))
active.__enter__()
spec = shard.current()
conn = shard.connection(dsn)
# a result row: its foreign key holds FOR KEY SHARE on the run's scan_run row until commit
conn.execute("INSERT INTO tfo_probe (run_id, port, status) VALUES (%s, 443, 'success')", (spec.run_id,))
shard.mark_filtered()
(barrier / f"ready-{spec.index}").touch()
while len(list(barrier.glob("ready-*"))) < spec.count:
    time.sleep(0.01)
print(shard.commit_shard(dsn, "finished", {"success": 1}))
"""


LOSER = r"""
import os, sys, time
from pathlib import Path
from netsurvey import runctx, shard
dsn, ready = os.environ["NETSURVEY_DSN"], Path(sys.argv[1])
active = runctx.activate(runctx.RunContext("tfo", shard=runctx.ShardSpec(0, 1, int(sys.argv[2]))))
active.__enter__()
conn = shard.connection(dsn)
conn.execute("INSERT INTO tfo_probe (run_id, port, status) VALUES (%s, 443, 'success')", (int(sys.argv[2]),))
shard.mark_filtered()
ready.write_text(str(conn.info.backend_pid))
while not ready.with_suffix(".go").exists():
    time.sleep(0.01)
try:
    conn.execute("SELECT 1")   # the connection is gone: the writer's flush would fail here
except Exception as exc:
    print("flush failed:", type(exc).__name__, file=sys.stderr)
try:
    shard.commit_shard(dsn, "failed", {})   # what a scanner's error path does next
except shard.ShardConnectionLost:
    sys.exit(3)
print("committed")
"""


def test_shard_that_lost_its_connection_commits_nothing(db, tmp_path):
    """A shard whose connection a database restart cut (here: its backend terminated) must
    not commit a job_shard row on a new connection: that ended compose runs 'failed' (issue
    23). It raises ShardConnectionLost (exit 1, the job is retried) and leaves the run open."""
    with db.connect() as conn:
        run_id = conn.execute("INSERT INTO scan_run (kind, shards, status) VALUES ('tfo', 1, 'running') "
                              "RETURNING id").fetchone()[0]
        conn.commit()
    ready = tmp_path / "ready"
    env = dict(os.environ, NETSURVEY_DSN=db.dsn, PYTHONPATH=str(REPO))
    p = subprocess.Popen([sys.executable, "-c", LOSER, str(ready), str(run_id)], env=env, cwd=REPO,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert wait_for(lambda: ready.exists() and ready.read_text(), 60)
    with db.connect() as conn:
        assert conn.execute("SELECT pg_terminate_backend(%s)", (int(ready.read_text()),)).fetchone()[0]
    ready.with_suffix(".go").touch()
    out, err = p.communicate(timeout=60)
    assert p.returncode == 3 and "committed" not in out, (p.returncode, out, err[-2000:])
    with db.connect() as conn:
        assert conn.execute("SELECT status FROM scan_run WHERE id = %s", (run_id,)).fetchone()[0] == "running"
        assert conn.execute("SELECT count(*) FROM job_shard WHERE run_id = %s", (run_id,)).fetchone()[0] == 0
        assert conn.execute("SELECT count(*) FROM tfo_probe WHERE run_id = %s", (run_id,)).fetchone()[0] == 0


def test_concurrent_shard_commits_do_not_deadlock(db, tmp_path):
    """Two shards whose result rows are written and that commit at the same moment: both
    commit on their first attempt (FOR UPDATE on scan_run used to deadlock against the other
    shard's foreign-key lock, failing one shard and re-running it whole)."""
    with db.connect() as conn:
        run_id = conn.execute("INSERT INTO scan_run (kind, shards, status) VALUES ('tfo', 2, 'running') "
                              "RETURNING id").fetchone()[0]
        conn.commit()
    procs = []
    for i in range(2):
        env = dict(os.environ, NETSURVEY_DSN=db.dsn, PYTHONPATH=str(REPO))
        procs.append(subprocess.Popen([sys.executable, "-c", COMMITTER, str(tmp_path), str(i), "2", str(run_id)],
                                      env=env, cwd=REPO,
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    outs = [p.communicate(timeout=60) for p in procs]
    for p, (out, err) in zip(procs, outs):
        assert p.returncode == 0 and out.strip() == "True", err[-2000:]
    with db.connect() as conn:
        assert conn.execute("SELECT status, counts FROM scan_run WHERE id = %s", (run_id,)).fetchone() == (
            "finished", {"success": 2})
        assert conn.execute("SELECT count(*) FROM tfo_probe WHERE run_id = %s", (run_id,)).fetchone()[0] == 2


def test_sigterm_to_a_procs_run_ends_it_failed_and_stops_its_shards(db, tmp_path):
    """SIGTERM to `scan ... --procs 2` killed the parent at once (Python's default action):
    its shards died with it by SIGKILL and the run stayed 'running' for ever (review
    attack, issue 20). Now the parent passes SIGTERM on to its shards, waits for them and
    ends the run 'failed' (exit 143), and the stopped shard keeps its rows. A local server that accepts and never answers keeps
    the TLS handshake in flight."""
    import socket

    import psycopg

    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(64)
    port = srv.getsockname()[1]
    cfg = tmp_path / "local.toml"
    cfg.write_text('[etiquette]\nallow = ["127.0.0.1/32"]\nown_servers = ["127.0.0.1/32"]\n')
    env = dict(os.environ, NETSURVEY_DSN=db.dsn, PYTHONPATH=str(REPO))
    p = subprocess.Popen([sys.executable, "-m", "netsurvey.cli", "--config", str(cfg), "scan", "handshake-timing",
                          "--target", "127.0.0.1", "--tls-port", str(port), "--methods", "tls13_full",
                          "--samples", "1", "--timeout", "8", "--procs", "2"],
                         cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        conns = []
        srv.settimeout(30)
        conns.append(srv.accept()[0])    # a shard is probing
        time.sleep(1)
        children = subprocess.run(["pgrep", "-P", str(p.pid)], capture_output=True, text=True).stdout.split()
        assert children, "no shard processes"
        p.send_signal(signal.SIGTERM)
        rc = p.wait(timeout=30)   # the shards' handshake times out after 8 s
    finally:
        if p.poll() is None:
            p.kill()
        srv.close()
    assert rc == 128 + signal.SIGTERM, (rc, p.stderr.read()[-2000:])
    assert not [c for c in children if Path(f"/proc/{c}").exists()], "a shard outlived the run"
    with psycopg.connect(db.dsn) as c:
        run_id, status, shards = c.execute("SELECT id, status, shards FROM scan_run ORDER BY id DESC LIMIT 1"
                                           ).fetchone()
        # nothing retries a --procs shard: like an inline run, it keeps what it has - the
        # target in flight, recorded as interrupted (it was contacted), in a 'failed' shard
        kept = c.execute("SELECT count(*) FROM handshake_timing_sample WHERE run_id = %s AND error LIKE "
                         "'interrupted%%'", (run_id,)).fetchone()[0]
        shard_status = sorted(s for (s,) in c.execute("SELECT status FROM job_shard WHERE run_id = %s", (run_id,)))
    assert shards == 2 and status == "failed", status
    assert kept == 1, kept
    # the probing shard committed as 'failed' (the other may have ended before or with it)
    assert "failed" in shard_status and len(shard_status) <= 2, shard_status


def test_a_signal_during_the_shard_commit_is_delivered_after_it():
    """SIGTERM between a shard's job_shard row and its commit cut the commit in two (the
    issue-20 adversary): the handler's second commit found the row, rolled back, and the
    shard lost its rows. Signals inside netsurvey.shard.signals_deferred wait for its end."""
    import signal as sig

    from netsurvey.shard import signals_deferred

    fired: list[str] = []
    old = sig.signal(sig.SIGTERM, lambda *_: fired.append("handler"))
    try:
        with signals_deferred():
            os.kill(os.getpid(), sig.SIGTERM)
            time.sleep(0.05)
            fired.append("commit")
        assert fired == ["commit", "handler"], fired
    finally:
        sig.signal(sig.SIGTERM, old)
