"""The run liveness lock (netsurvey/runs.py hold_run): a run still being run by one process
is not resumed by another, also after the lock's own session was dropped; runs started and
ended in one process leave no lock behind; a resume reads the run's status again under the
lock."""
from __future__ import annotations

import os
import signal
import subprocess
import time

import pytest

from conftest import REPO, needs_root
from support.tls_lifetime import _argv, _config, _q, _short

#: this test's database only: the test server is shared by every test (one database each),
#: and a run id (1, 2, ...) of another test's database is another run
OWN_DB = " AND database = (SELECT oid FROM pg_database WHERE datname = current_database())"

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
        pids = _q(db, "SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND classid = %s AND objid = %s" + OWN_DB,
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
            return conn.execute("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND classid = %s" + OWN_DB,
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
        assert conn.execute("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND classid = %s" + OWN_DB,
                            (RUN_LIVENESS_KEY,)).fetchone()[0] == 0
