"""Adversary (session 32, second pass) on the run liveness lock (runs.hold_run)."""
from __future__ import annotations

import os
import signal
import subprocess
import time

import pytest

from conftest import REPO, needs_root
from support.tls_lifetime import _argv, _config, _q, _short

pytestmark = pytest.mark.timeout(240)


@needs_root()
def test_resume_refused_after_the_liveness_session_dropped(db, testbed, tmp_path):
    """The liveness lock lives in one kept-open session: a database restart, an idle-session
    timeout or pg_terminate_backend drops it while the run goes on (its other connections are
    opened per use). A --resume from another process then ran the live run a second time.
    Now the running process notices its lost session and takes its locks again within ~1 s."""
    from netsurvey.runs import RUN_LIVENESS_KEY

    h = _short(testbed)
    cfg = _config(tmp_path, 20)
    args = ["--target", f"short.example.test={h['addresses'][0]}", "--max-age", "60", "--step", "5"]
    first = subprocess.Popen(_argv(db, cfg, *args), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             cwd=REPO, start_new_session=True)
    second = None
    try:
        t0 = time.monotonic()
        while not _q(db, "SELECT count(*) FROM tls_lifetime_event")[0][0]:
            assert time.monotonic() - t0 < 60 and first.poll() is None, "no event"
            time.sleep(0.3)
        run_id = _q(db, "SELECT id FROM scan_run WHERE kind = 'tls-lifetime'")[0][0]
        pids = _q(db, "SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND classid = %s AND objid = %s",
                  RUN_LIVENESS_KEY, run_id)
        assert len(pids) == 1
        _q(db, "SELECT pg_terminate_backend(%s)", pids[0][0])
        time.sleep(3)
        assert first.poll() is None   # the run goes on
        second = subprocess.Popen(_argv(db, cfg, "--resume", str(run_id)), stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True, cwd=REPO, start_new_session=True)
        try:
            _, err = second.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            pytest.fail("a --resume of a run still running elsewhere was not refused (it ran)")
        assert second.returncode == 2 and "still being run by another process" in err, (second.returncode, err[-2000:])
    finally:
        for p in (first, second):
            if p is not None and p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)
                p.communicate(timeout=30)


def test_runs_in_one_process_leave_no_liveness_lock(db):
    """A long-lived process (jobs worker, an in-process CLI sequence) starting and ending runs
    keeps no advisory lock: also not for a run it started, failed without ending (an exception
    before finish) and then resumed in the same session (re-entrant lock taken twice, released
    once: held until the process exits, and every --resume elsewhere refused)."""
    from netsurvey.runs import RUN_LIVENESS_KEY, hold_run, start_run

    def held() -> int:
        with db.connect() as conn:
            return conn.execute("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND classid = %s",
                                (RUN_LIVENESS_KEY,)).fetchone()[0]

    for _ in range(20):
        start_run(db, "tls-lifetime", {}).finish()
    assert held() == 0
    run = start_run(db, "tls-lifetime", {})   # ... its command raised before finish
    hold_run(db, run.id, resuming=True)        # --resume of it, in the same process
    run.finish()
    assert held() == 0


def test_resume_reads_the_status_again_under_the_lock(db):
    """The resume commands read the run's status, then take its lock: a run its process
    finished in between (status 'finished', lock let go) was resumed, set 'running' again and
    probed again. hold_run(resuming=True) reads the status under the lock."""
    from netsurvey.errors import UsageError
    from netsurvey.runs import RUN_LIVENESS_KEY, hold_run, start_run

    run = start_run(db, "tls-lifetime", {})
    run.finish()   # ... after the resuming process read 'running'
    with pytest.raises(UsageError, match="already finished"):
        hold_run(db, run.id, resuming=True)
    with db.connect() as conn:
        assert conn.execute("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND classid = %s",
                            (RUN_LIVENESS_KEY,)).fetchone()[0] == 0


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
