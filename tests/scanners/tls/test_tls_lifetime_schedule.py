"""scan tls-lifetime as a bounded-memory scheduler (issue 26): the search finds the
configured lifetime with at most --sessions sessions per (host, mechanism, version), never
sends a host more connections than the per-destination limit allows (counted from the
SYN-ACKs the server's namespace sends, not from the scanner), and a run killed mid-way
(SIGKILL) finishes with --resume RUN, presenting the sessions it had stored. Ground truth: short.example.test's nginx
ssl_session_timeout (config/testbed.toml, via `testbed status`)."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import defaultdict

import pytest

from conftest import REPO, needs_root, run_cli
from scanners.tls.schedule import default_slots, next_points
from support.sniffing import SNIFFER
from support.tls_lifetime import _argv, _config, _q, _short

pytestmark = pytest.mark.timeout(240)


def _search(n: int, lifetime_index: int, slots: int) -> tuple[int, int, int]:
    """The scheduler's search against a server that resumes exactly the indices <=
    lifetime_index: (lo, hi, rounds)."""
    lo, hi, rounds = 0, n + 1, 0
    while hi - lo > 1:
        pts = next_points(lo, hi, slots)
        assert 0 < len(pts) <= slots and all(lo < k < hi for k in pts)
        assert pts[-1] == hi - 1            # the largest open age is always tried
        rounds += 1
        for k in pts:                        # outcomes in age order; later ones dropped
            if k <= lifetime_index:
                lo = max(lo, k)
            else:
                hi = min(hi, k)
                break
    return lo, hi, rounds


@pytest.mark.parametrize("n", [1, 2, 5, 12, 100, 288, 1000])
def test_default_slots_bracket_every_lifetime_in_two_rounds(n):
    s = default_slots(n)
    assert s * s >= n and (s - 1) * (s - 1) < n
    for life in range(0, n + 1):
        lo, hi, rounds = _search(n, life, s)
        assert (lo, hi) == (life, life + 1) and rounds <= 2, (n, life, rounds)
    # fewer sessions: more rounds, the same answer
    for life in (0, n // 3, n):
        assert _search(n, life, 2)[:2] == (life, life + 1)


def _check_log(db, run_id: int, slots: int) -> None:
    """From the event log alone: never more than ``slots`` sessions of one chain held at
    once, every planned attempt ended (outcome, drop or loss), each chain finished once."""
    rows = _q(db, """SELECT origin_host, host(origin_address), mechanism, version, round, grid_index, event
                     FROM tls_lifetime_event WHERE run_id = %s ORDER BY at, event <> 'planned'""", run_id)
    held, peak, finished = defaultdict(int), defaultdict(int), defaultdict(int)
    open_ = set()
    for h, a, m, v, rnd, k, ev in rows:
        chain = (h, a, m, v)
        if ev == "planned":
            held[chain] += 1
            open_.add((chain, rnd, k))
        elif ev == "finished":
            finished[chain] += 1
        elif (chain, rnd, k) in open_:
            open_.discard((chain, rnd, k))
            held[chain] -= 1
        peak[chain] = max(peak[chain], held[chain])
    assert not open_, f"planned attempts without an end: {sorted(open_)[:5]}"
    assert finished and set(finished.values()) == {1}, finished
    assert max(peak.values()) <= slots, peak


def _measured(db, run_id: int) -> dict:
    return {(m, v): (r, f) for m, v, r, f in _q(
        db, "SELECT mechanism, version, max_resumed_age_s, min_failed_age_s FROM tls_lifetime_measured_v "
            "WHERE run_id = %s AND hostname = 'short.example.test'", run_id)}


def _assert_lifetime(got: dict, timeout_s: float, step: float) -> None:
    assert set(got) == {("id", "1.2"), ("ticket", "1.2"), ("ticket", "1.3")}, got
    for key, (resumed, failed) in got.items():
        # OpenSSL expires a session when the whole seconds elapsed exceed the timeout
        assert resumed is not None and failed is not None, (key, got)
        assert timeout_s - step <= resumed <= timeout_s + 1 and timeout_s < failed <= timeout_s + step + 1, (key, got)


@needs_root()
def test_bounded_sessions_and_per_destination_limit_seen_by_the_server(db, testbed, tmp_path):
    h = _short(testbed)
    addr = h["addresses"][0]
    pdp, slots, step = 4, 3, 1
    cfg = _config(tmp_path, pdp)
    pkts = tmp_path / "server.jsonl"
    # the sniffer runs in the server's namespace: it records the SYN-ACKs nginx sends
    sniff = subprocess.Popen(["ip", "netns", "exec", "nstb-web", sys.executable, str(SNIFFER), "--out", str(pkts),
                              "--iface", "eth0", "--seconds", "200"], stdout=subprocess.PIPE, text=True)
    try:
        assert sniff.stdout.readline().strip() == "ready"
        p = subprocess.run(_argv(db, cfg, "--target", f"short.example.test={addr}", "--max-age",
                                 str(h["session_timeout"] + 4), "--step", str(step), "--sessions", str(slots)),
                           capture_output=True, text=True, timeout=200, cwd=REPO)
    finally:
        sniff.send_signal(signal.SIGTERM)
        stats = json.loads(sniff.communicate(timeout=30)[0].strip().splitlines()[-1])
    assert p.returncode == 0, p.stderr[-2000:]
    out = json.loads(p.stdout.strip().splitlines()[-1])
    assert stats["kernel_drops"] == 0
    synacks = sorted(r["t"] for r in map(json.loads, pkts.read_text().splitlines())
                     if r.get("synack") and r["src"] == addr and r.get("sport") == 443)
    # every handshake the scanner made is one connection the server accepted (no retransmits here)
    initial = _q(db, "SELECT count(*) FROM tls_lifetime_event WHERE run_id = %s AND event = 'planned'",
                 out["run_id"])[0][0]
    assert len(synacks) >= out["attempts"] + initial > 0
    worst = max(sum(1 for u in synacks if t <= u < t + 1.0) for t in synacks)
    assert worst <= pdp + 1, f"{worst} connections within one second at {addr} (limit {pdp}/s)"
    assert out["sessions_peak_per_target"] <= 3 * slots
    _check_log(db, out["run_id"], slots)
    _assert_lifetime(_measured(db, out["run_id"]), h["session_timeout"], step)


@needs_root()
def test_killed_run_resumes_and_finishes(db, testbed, tmp_path):
    h = _short(testbed)
    addr = h["addresses"][0]
    cfg = _config(tmp_path, 20)
    args = ["--target", f"short.example.test={addr}", "--max-age", str(h["session_timeout"] + 4), "--step", "1",
            "--sessions", "3"]
    proc = subprocess.Popen(_argv(db, cfg, *args), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            cwd=REPO, start_new_session=True)
    try:
        t0 = time.monotonic()
        planned = 0
        while time.monotonic() - t0 < 60 and planned < 6:   # round 1 sessions established and logged
            time.sleep(0.3)
            planned = _q(db, "SELECT count(*) FROM tls_lifetime_event WHERE event = 'planned'")[0][0]
        assert planned >= 6
    finally:
        os.killpg(proc.pid, signal.SIGKILL)       # as a crash: nothing is flushed or finished
        proc.communicate(timeout=30)
    run_id, status = _q(db, "SELECT id, status FROM scan_run WHERE kind = 'tls-lifetime'")[0]
    assert status == "running"
    p = run_cli("testbed", "exec", "--", sys.executable, "-m", "netsurvey.cli", "--config", str(cfg), "--dsn",
                db.dsn, "scan", "tls-lifetime", "--resume", str(run_id), "--json", dsn=db.dsn, timeout=200)
    assert p.returncode == 0, p.stderr[-2000:]
    out = json.loads(p.stdout.strip().splitlines()[-1])
    # the pending attempts' sessions were stored: the restarted run presents them (none lost)
    assert out["run_id"] == run_id and out["restored_on_restart"] >= 1 and out["lost_on_restart"] == 0, out
    assert _q(db, "SELECT status FROM scan_run WHERE id = %s", run_id)[0][0] == "finished"
    assert _q(db, "SELECT count(*) FROM tls_lifetime_event WHERE run_id = %s AND event = 'lost'", run_id)[0][0] == 0
    # ... and their secrets are not kept once the run is finished
    assert _q(db, "SELECT count(*) FROM tls_lifetime_event WHERE session IS NOT NULL")[0][0] == 0
    _check_log(db, run_id, 3)
    _assert_lifetime(_measured(db, run_id), h["session_timeout"], 1)
    # bad input: a finished run is not resumed again
    p = run_cli("--dsn", db.dsn, "scan", "tls-lifetime", "--resume", str(run_id), dsn=db.dsn)
    assert p.returncode == 2 and len(p.stderr.strip().splitlines()) == 1 and "already finished" in p.stderr


@needs_root()
def test_resume_of_a_run_still_running_is_refused(db, testbed, tmp_path):
    """A --resume of a run another live process is running is refused (both would probe and
    write the same attempts); once that process is killed, the run resumes at once (the
    lock lived in the dead process's database session). Before: the second process ran it too."""
    h = _short(testbed)
    cfg = _config(tmp_path, 20)
    args = ["--target", f"short.example.test={h['addresses'][0]}", "--max-age", "60", "--step", "5"]

    def start(*extra):
        return subprocess.Popen(_argv(db, cfg, *extra), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                cwd=REPO, start_new_session=True)

    def wait_events(n: int) -> int:
        t0 = time.monotonic()
        while time.monotonic() - t0 < 60:
            got = _q(db, "SELECT count(*) FROM tls_lifetime_event")[0][0]
            if got >= n:
                return got
            time.sleep(0.3)
        raise AssertionError(f"fewer than {n} events after 60 s")

    first = start(*args)
    try:
        wait_events(1)
        run_id = _q(db, "SELECT id FROM scan_run WHERE kind = 'tls-lifetime'")[0][0]
        p = subprocess.run(_argv(db, cfg, "--resume", str(run_id)), capture_output=True, text=True, timeout=60,
                           cwd=REPO)
        assert p.returncode == 2 and len(p.stderr.strip().splitlines()) == 1, (p.returncode, p.stderr[-2000:])
        assert "still being run by another process" in p.stderr
        assert first.poll() is None and _q(db, "SELECT status FROM scan_run WHERE id = %s", run_id)[0][0] == "running"
    finally:
        os.killpg(first.pid, signal.SIGKILL)
        first.communicate(timeout=30)
    before = _q(db, "SELECT count(*) FROM tls_lifetime_event")[0][0]
    second = start("--resume", str(run_id))
    try:
        wait_events(before + 1)   # the killed run's lock went with its session: resumed, probing again
        assert second.poll() is None
    finally:
        os.killpg(second.pid, signal.SIGKILL)
        second.communicate(timeout=30)


def test_a_lost_attempt_keeps_the_shard_that_planned_it(db):
    """An attempt planned without a stored session is logged 'lost' on restart; the lost row
    keeps the planning row's shard_id, so row_vantage attributes it to that shard's vantage
    and round (it was written without shard_id: the run-level fallback)."""
    import datetime as dt

    from scanners.tls.schedule import prior_state

    now = dt.datetime.now(dt.timezone.utc)
    with db.connect() as conn:
        run_id = conn.execute("INSERT INTO scan_run (kind) VALUES ('tls-lifetime') RETURNING id").fetchone()[0]
        for k, shard in ((0, 41), (1, None)):
            conn.execute("INSERT INTO tls_lifetime_event (run_id, origin_host, origin_address, mechanism, version, "
                         "round, grid_index, event, due_at, at, shard_id) VALUES (%s, 'a.test', '198.18.2.1', 'id', "
                         "'TLSv1.2', 1, %s, 'planned', %s, %s, %s)", (run_id, k, now, now, shard))
        _, lost, restored = prior_state(conn, run_id)
        rows = conn.execute("SELECT grid_index, shard_id FROM tls_lifetime_event WHERE run_id = %s AND event = 'lost' "
                            "ORDER BY 1", (run_id,)).fetchall()
    assert lost == 2 and restored == []
    assert rows == [(0, 41), (1, None)], rows


@needs_root()
def test_resume_of_a_dry_run_is_refused(db, testbed, tmp_path):
    """`scan tls-lifetime --dry-run` records a cancelled run with its parameters and plan;
    `--resume` of it ran the whole scan for real under a row that says dry_run (the resume
    checks refused only 'finished'). Now: exit 2, one line, nothing contacted."""
    h = _short(testbed)
    cfg = _config(tmp_path, 20)
    args = ["--target", f"short.example.test={h['addresses'][0]}", "--max-age", "60", "--step", "5"]
    p = subprocess.run(_argv(db, cfg, *args, "--dry-run"), capture_output=True, text=True, timeout=60, cwd=REPO)
    if p.returncode != 0:   # --dry-run may be a global option
        argv = _argv(db, cfg, *args)
        argv.insert(argv.index("--config"), "--dry-run")
        p = subprocess.run(argv, capture_output=True, text=True, timeout=60, cwd=REPO)
    assert p.returncode == 0, p.stderr[-2000:]
    run_id, status = _q(db, "SELECT id, status FROM scan_run WHERE kind = 'tls-lifetime'")[0]
    assert status == "cancelled"
    second = subprocess.Popen(_argv(db, cfg, "--resume", str(run_id)), stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, cwd=REPO, start_new_session=True)
    try:
        _, err = second.communicate(timeout=30)
    finally:
        if second.poll() is None:
            os.killpg(second.pid, signal.SIGKILL)
            second.communicate(timeout=30)
    assert second.returncode == 2 and len(err.strip().splitlines()) == 1 and "dry run" in err, \
        (second.returncode, err[-2000:])
    assert _q(db, "SELECT count(*) FROM tls_lifetime_event")[0][0] == 0
    assert _q(db, "SELECT status FROM scan_run WHERE id = %s", run_id)[0][0] == "cancelled"
