"""`netsurvey new-measurement`: a new measurement is its package, one migration and one
test; nothing else is edited, and the generated test passes (in a copy of the checkout)."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys

from conftest import REPO


def _copy_checkout(dst):
    files = subprocess.run(["git", "ls-files", "-z"], cwd=REPO, capture_output=True, check=True).stdout
    for rel in filter(None, files.decode().split("\0")):
        src = REPO / rel
        if src.is_file():
            (dst / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dst / rel)


def test_scaffold_touches_three_places_and_its_test_passes(tmp_path, server_dsn):
    co = tmp_path / "checkout"
    co.mkdir()
    _copy_checkout(co)
    before = {p.relative_to(co) for p in co.rglob("*") if p.is_file()}
    env = dict(os.environ, NETSURVEY_DSN=server_dsn, PYTHONPATH=str(co))
    r = subprocess.run([sys.executable, "-m", "netsurvey.cli", "new-measurement", "echo-probe"], cwd=co, env=env,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    after = {p.relative_to(co) for p in co.rglob("*") if p.is_file() and "__pycache__" not in p.parts}
    added = sorted(str(p) for p in after - before)
    assert [a for a in added if not a.startswith("scanners/echo_probe/")] == [
        next(a for a in added if a.startswith("schema/")), "tests/scanners/echo_probe/test_scan_echo_probe.py"]
    assert len([a for a in added if a.startswith("schema/")]) == 1
    # the new measurement is declared, shows the shared options, and its own test passes
    h = subprocess.run([sys.executable, "-m", "netsurvey.cli", "scan", "echo-probe", "--help"], cwd=co, env=env,
                       capture_output=True, text=True, timeout=120)
    assert h.returncode == 0 and all(o in h.stdout for o in ("--dry-run", "--shards", "--procs")), h.stdout
    t = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                        "tests/scanners/echo_probe/test_scan_echo_probe.py"],
                       cwd=co, env=env, capture_output=True, text=True, timeout=600)
    assert t.returncode == 0, t.stdout[-3000:] + t.stderr[-2000:]
    assert "2 passed" in t.stdout


def test_scaffold_bad_name_is_one_line_exit_2(tmp_path):
    r = subprocess.run([sys.executable, "-m", "netsurvey.cli", "new-measurement", "Bad_Name", "--root", str(tmp_path)],
                       cwd=REPO, capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1
    assert not any(tmp_path.iterdir())
