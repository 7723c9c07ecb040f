"""`netsurvey testbed status` says by its exit status whether the testbed is up: 0 when it
is, 1 with one line on stderr when it is down (it exited 0 either way, so a script could
not tell); `--json` prints the state and ground truth in both cases.

Down is a state directory of our own that holds no testbed (NETSURVEY_TESTBED_DIR, which
testbed/procs.py state_dir() reads): the machine-wide testbed is never taken down here."""
from __future__ import annotations

import json
import time

from conftest import needs_root, run_cli


@needs_root()
def test_status_exits_1_when_down(tmp_path):
    env = {"NETSURVEY_TESTBED_DIR": str(tmp_path / "no-testbed")}
    r = run_cli("testbed", "status", env=env)
    assert r.returncode == 1, (r.returncode, r.stdout, r.stderr)
    assert r.stdout == "" and len(r.stderr.strip().splitlines()) == 1 and "testbed is down" in r.stderr, r.stderr
    assert "Traceback" not in r.stderr
    r = run_cli("testbed", "status", "--json", env=env)
    assert r.returncode == 1 and len(r.stderr.strip().splitlines()) == 1, (r.returncode, r.stderr)
    st = json.loads(r.stdout)
    assert st["up"] is False and st["state_dir"] == env["NETSURVEY_TESTBED_DIR"] and st["ground_truth"]["tls_hosts"]
    assert not (tmp_path / "no-testbed").exists()   # status writes nothing


@needs_root()
def test_status_exits_0_when_up(testbed):
    """The shared testbed is up (the fixture); another session may be rebuilding it for a
    moment, so each exit status is checked against the state reported, until it is up."""
    deadline = time.time() + 90
    while True:
        r = run_cli("testbed", "status", "--json")
        st = json.loads(r.stdout)
        assert r.returncode == (0 if st["up"] else 1), (r.returncode, st["up"], r.stderr)
        plain = run_cli("testbed", "status")
        assert plain.returncode in (0, 1) and (plain.returncode == 0) == plain.stdout.startswith("testbed is UP"), \
            (plain.returncode, plain.stdout[:200], plain.stderr)
        if (st["up"] and plain.returncode == 0) or time.time() > deadline:
            break
        time.sleep(2)
    assert st["up"] and r.stderr == "" and plain.returncode == 0 and plain.stderr == "", (r.stderr, plain.stderr)
