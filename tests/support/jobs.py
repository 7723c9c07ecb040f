"""Helpers of the tests that run procrastinate workers (the real CLI in the testbed's
vantage namespace) with the tcp-connect scanner of plugins/tcp_connect_scan.py."""
from __future__ import annotations

import os
import subprocess
import sys
import time

from conftest import REPO, run_cli

PLUGIN = {"NETSURVEY_PLUGINS": "tests.support.plugins.tcp_connect_scan", "PYTHONPATH": str(REPO)}


def import_list(db, tmp_path, n: int, name: str = "jobs") -> None:
    f = tmp_path / f"{name}.csv"
    f.write_text("".join(f"{i},h{i}.jobs.test\n" for i in range(1, n + 1)))
    assert run_cli("targets", "import", str(f), "--list", name, dsn=db.dsn).returncode == 0


def worker(db, *args: str) -> subprocess.Popen:
    env = dict(os.environ, **PLUGIN)
    env.pop("NETSURVEY_DSN", None)
    return subprocess.Popen([sys.executable, "-m", "netsurvey.cli", "testbed", "exec", "--", sys.executable, "-m",
                             "netsurvey.cli", "--dsn", db.dsn, "worker", "--heartbeat", "1", "--stalled-after", "4",
                             *args], cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)


def wait_for(pred, timeout: float, every: float = 0.3):
    deadline = time.time() + timeout
    while time.time() < deadline:
        v = pred()
        if v:
            return v
        time.sleep(every)
    return pred()
