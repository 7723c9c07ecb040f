"""clockshift.c (issue 27): the LD_PRELOAD shim that moves a browser's wall clock for
`browser lifetime`. Real processes under the real shim: the wall clock moves by the offset
in the mapped file (at once when the file changes), monotonic clocks stay real unless
NETSURVEY_CLOCK_MONOTONIC=1, and Firefox ESR starts under it (it hung under libfaketime
0.9.10 even for --version)."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from browser_probes.drivers import FIREFOX_BINARY, clock_offset, clockshift_library, set_clock_offset

PROBE = r"""
import json, sys, time
out = []
for _ in range(2):
    out.append({"wall": time.time(), "mono": time.monotonic(), "boot": time.clock_gettime(time.CLOCK_BOOTTIME)})
    sys.stdout.write(json.dumps(out[-1]) + "\n"); sys.stdout.flush()
    sys.stdin.readline()
"""


def _run(env_extra: dict, spec, change_to: float):
    env = dict(os.environ, LD_PRELOAD=str(clockshift_library()), NETSURVEY_CLOCK_FILE=str(spec), **env_extra)
    p = subprocess.Popen([sys.executable, "-c", PROBE], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                         env=env)
    first = json.loads(p.stdout.readline())
    import time
    real1 = (time.time(), time.monotonic())
    set_clock_offset(spec, change_to)      # written in place: the running process sees it at once
    p.stdin.write("\n")
    p.stdin.flush()
    second = json.loads(p.stdout.readline())
    real2 = (time.time(), time.monotonic())
    p.stdin.write("\n")
    p.stdin.flush()
    assert p.wait(10) == 0
    return first, real1, second, real2


def test_the_wall_clock_moves_at_once_and_monotonic_clocks_stay_real(tmp_path):
    spec = tmp_path / "clock"
    set_clock_offset(spec, 2 * 86400)
    assert clock_offset(spec) == 2 * 86400
    first, real1, second, real2 = _run({}, spec, 30 * 86400)
    assert abs(first["wall"] - (real1[0] + 2 * 86400)) < 5
    assert abs(second["wall"] - (real2[0] + 30 * 86400)) < 5        # moved without a restart
    assert abs(first["mono"] - real1[1]) < 5 and abs(second["mono"] - real2[1]) < 5


def test_monotonic_clocks_jump_too_when_asked(tmp_path):
    spec = tmp_path / "clock"
    set_clock_offset(spec, 0)
    first, real1, second, real2 = _run({"NETSURVEY_CLOCK_MONOTONIC": "1"}, spec, 7 * 86400)
    assert abs(first["mono"] - real1[1]) < 5
    assert abs(second["mono"] - (real2[1] + 7 * 86400)) < 5
    assert second["boot"] - first["boot"] > 7 * 86400 - 5
    assert abs(second["wall"] - (real2[0] + 7 * 86400)) < 5


@pytest.mark.skipif(not os.path.exists(FIREFOX_BINARY), reason="firefox-esr not installed")
def test_firefox_starts_under_the_shim(tmp_path):
    """Firefox ESR hung at start under libfaketime 0.9.10 (even --version); under clockshift it
    answers at once."""
    spec = tmp_path / "clock"
    set_clock_offset(spec, 86400)
    env = dict(os.environ, LD_PRELOAD=str(clockshift_library()), NETSURVEY_CLOCK_FILE=str(spec))
    r = subprocess.run([FIREFOX_BINARY, "--version"], env=env, capture_output=True, text=True, timeout=30)
    assert r.returncode == 0 and "Firefox" in r.stdout, r.stderr[-500:]
