"""Issue 26 item 4: a "rounds x interval" campaign of schedule.toml is ONE run with rounds
(netsurvey/campaign.py): exactly once per (round, shard) across a SIGKILLed worker, progress
in `netsurvey runs`, and Figs 3.2/3.3 drawn from one campaign run of `scan tfo`."""
from __future__ import annotations

import csv
import signal
import time

import pytest

from conftest import needs_root, run_cli
from support.campaign import progress, q, schedule_file, start
from support.jobs import PLUGIN, import_list, wait_for, worker

pytestmark = needs_root()
AUTH_NS = "198.18.1.53"   # knot: fresh answers for the load-balanced names (TTL 1, no cache)


def test_campaign_is_one_run_resumable_after_sigkill(db, tmp_path, testbed):
    rounds, shards, n = 3, 2, 20
    import_list(db, tmp_path, n, name="camp")
    sched = schedule_file(tmp_path, "camp3", rounds, "2s", shards,
                          ["scan", "tcp-connect", "--list", "camp", "--delay", "0.3", "--concurrency", "2"])
    t0 = time.time()
    run_id = start(db, sched, "camp3", env=PLUGIN)
    assert q(db, "SELECT count(*) FROM scan_run WHERE parameters->>'schedule' = 'camp3'") == [(1,)]
    p = progress(db, run_id)
    assert (p["status"], p["rounds"], p["rounds_done"], p["shards_remaining"]) == ("queued", rounds, 0, rounds * shards)
    assert p["next_due_at"] is not None
    a = worker(db, "--concurrency", "2")
    try:   # kill the worker while a shard of round 2 is under way (round 1 committed)
        assert wait_for(lambda: q(db, "SELECT count(*) FROM procrastinate_jobs WHERE status = 'doing'"
                                      " AND (args->>'run_id')::bigint = %s AND (args->>'round')::int = 2",
                                  run_id)[0][0] >= 1, 60)
        time.sleep(0.5)
    finally:
        a.send_signal(signal.SIGKILL)
        a.wait(10)
    mid = progress(db, run_id)
    # round 1 is done unless a loaded machine still ran one of its shards when round 2 began
    assert mid["status"] == "running" and mid["rounds_done"] in (0, 1), mid
    assert mid["next_due_at"] is not None
    table = run_cli("runs", dsn=db.dsn, env={"COLUMNS": "300"})   # the human table: rounds done/planned
    assert table.returncode == 0 and f"{mid['rounds_done']}/{rounds}" in table.stdout, table.stdout
    b = worker(db)
    try:
        assert wait_for(lambda: progress(db, run_id)["status"] == "finished", 120)
    finally:
        b.send_signal(signal.SIGTERM)
        b.wait(30)
    elapsed = time.time() - t0
    done = progress(db, run_id)
    assert (done["rounds_done"], done["shards_remaining"], done["next_due_at"]) == (rounds, 0, None)
    # exactly once per shard and round; every target once per round
    js = q(db, "SELECT round, shard, attempt FROM job_shard WHERE run_id = %s ORDER BY 1, 2", run_id)
    assert [(r, s) for r, s, _ in js] == [(r, s) for r in range(1, rounds + 1) for s in range(shards)]
    assert any(att >= 2 for r, _, att in js if r == 2), js     # the killed round-2 shard was retried
    per_host = q(db, "SELECT hostname, count(*) FROM test_tcp_probe WHERE run_id = %s GROUP BY 1", run_id)
    assert len(per_host) == n and all(c == rounds for _, c in per_host), per_host
    # rounds started no earlier than due (round k at start + (k-1) * 2 s)
    due = q(db, "SELECT p.round, extract(epoch FROM p.finished_at - p.due_at) FROM run_round_progress p"
                " WHERE run_id = %s ORDER BY 1", run_id)
    assert [r for r, _ in due] == [1, 2, 3] and all(lag >= 0 for _, lag in due)
    print(f"campaign {rounds} rounds x {shards} shards x {n} targets with a SIGKILL: {elapsed:.1f} s")


@pytest.mark.slow   # ~30 s on the shared 2-core machine; the SIGKILL test above covers the mechanism in CI
def test_campaign_of_scan_tfo_draws_figs_3_2_and_3_3(db, tmp_path, testbed):
    gt = testbed.status()["ground_truth"]
    pools = {n: set(v["pool"]) for n, v in gt["dns"]["load_balanced"].items()}
    names = sorted(pools) + ["on1.tfo.test", "off.tfo.test"]
    f = tmp_path / "tfo.csv"
    f.write_text("".join(f"{i},{h}\n" for i, h in enumerate(names, 1)))
    assert run_cli("targets", "import", str(f), "--list", "tfocamp", dsn=db.dsn).returncode == 0
    rounds = 5
    sched = schedule_file(tmp_path, "tfo-rounds", rounds, "1s", 1,
                          ["scan", "tfo", "--list", "tfocamp", "--nameserver", AUTH_NS, "--cooldown", "0.1"])
    run_id = start(db, sched, "tfo-rounds")
    w = worker(db)
    try:
        assert wait_for(lambda: progress(db, run_id)["status"] not in ("queued", "running"), 120)
    finally:
        w.send_signal(signal.SIGTERM)
        w.wait(30)
    assert progress(db, run_id)["status"] == "finished"
    obs = q(db, "SELECT hostname, round, host(address), cookie_len FROM tfo_probe WHERE run_id = %s ORDER BY 1, 2",
            run_id)
    seq: dict[str, list] = {}
    for h, rnd, a, _ in obs:
        seq.setdefault(h, []).append((rnd, a))
    assert {h: [r for r, _ in v] for h, v in seq.items()} == {h: list(range(1, rounds + 1)) for h in names}
    for name, pool in pools.items():
        assert {a for _, a in seq[name]} - {None} <= pool
    # Fig 3.2 / Fig 3.3 from this one run, equal to an independent recount of its rows
    always = {h for h in names if all(c for hh, _, _, c in obs if hh == h)}
    figs = tmp_path / "figs"
    for fig in ("tfo-addresses-per-host", "tfo-lb-failure-rate", "tfo-support-table"):
        r = run_cli("plot", fig, "--run", str(run_id), "--out", str(figs), dsn=db.dsn)
        assert r.returncode == 0, r.stderr
    with open(figs / "tfo-addresses-per-host.csv") as fh:
        per_addresses = {int(r["addresses"]): int(r["hostnames"]) for r in csv.DictReader(fh)}
    expect: dict[int, int] = {}
    for h in always:
        k = len({a for _, a in seq[h]})
        expect[k] = expect.get(k, 0) + 1
    assert per_addresses == expect and len(always) >= 2
    with open(figs / "tfo-lb-failure-rate.csv") as fh:
        fig33 = {int(r["connection"]): int(r["new_address"]) for r in csv.DictReader(fh)}
    recount = {k: sum(seq[h][k - 1][1] not in [a for _, a in seq[h][:k - 1]] for h in always)
               for k in range(2, rounds + 1)}
    assert fig33 == recount
    with open(figs / "tfo-support-table.csv") as fh:    # Table 3.1 from the campaign's first round
        t31 = list(csv.DictReader(fh))
    assert int(t31[-1]["hostnames"]) == len(names)
    print(f"campaign run {run_id}: Fig 3.2 {per_addresses}, Fig 3.3 new addresses per connection {fig33}")


def test_schedule_start_bad_entry_is_one_line(db, tmp_path):
    sched = schedule_file(tmp_path, "bad", 3, "1s", 1, ["scan", "tfo", "--list", "x", "--no-such-option"])
    r = run_cli("schedule", "start", "bad", "--schedule", str(sched), dsn=db.dsn)
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert q(db, "SELECT count(*) FROM scan_run") == [(0,)]


def test_schedule_start_past_the_year_9999_is_one_line(db, tmp_path):
    """10 000 rounds x 365d: the last round's due time is no date; it was an internal error
    (OverflowError) after migrating (adversary)."""
    sched = schedule_file(tmp_path, "far", 10000, "365d", 1, ["scan", "tfo", "--list", "x"])
    r = run_cli("schedule", "start", "far", "--schedule", str(sched), dsn=db.dsn)
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1 and "9999" in r.stderr, r.stderr
    assert q(db, "SELECT count(*) FROM scan_run") == [(0,)]


@pytest.mark.parametrize("rounds,shards", [(1, 100_000_000), (2, 10_001), (10_000, 11)])
def test_schedule_start_too_many_jobs_is_one_line(db, tmp_path, rounds, shards):
    """A schedule entry's shards had no bound (--shards has 10 000): shards = 100 000 000
    built every job in memory (past 4 GB before it was stopped) (adversary)."""
    sched = schedule_file(tmp_path, "big", rounds, "1s", shards, ["scan", "tfo", "--list", "x"])
    r = run_cli("schedule", "start", "big", "--schedule", str(sched), dsn=db.dsn, timeout=120)
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert q(db, "SELECT count(*) FROM scan_run") == [(0,)]


def test_schedule_cron_entry_with_too_many_shards_is_refused(tmp_path):
    """A cron entry's shards are queued by a worker when due: bounded like --shards."""
    f = tmp_path / "schedule.toml"
    f.write_text('[[schedule]]\nname = "c"\ncron = "0 3 * * *"\ncommand = ["scan", "tfo", "--list", "x"]\n'
                 "shards = 100000000\n")
    r = run_cli("schedule", "list", "--schedule", str(f))
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1 and "shards" in r.stderr, r.stderr
