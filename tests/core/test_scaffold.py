"""`netsurvey new-measurement`: a new measurement is its package, one migration and one
test; nothing else is added or edited (file hashes), and in a copy of the checkout its own
test passes, and so do the checks every measurement must pass: it has a promise case and is
in the promise matrix, its table is commented and in the data dictionary, its shared options
are the shared ones."""
from __future__ import annotations

import hashlib
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


def _hashes(root) -> dict[str, str]:
    """sha256 of every file under ``root`` (bytecode caches left out)."""
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in root.rglob("*") if p.is_file() and "__pycache__" not in p.parts}


#: the checks every measurement must pass, run in the copy besides the generated test
WHOLE_PROMISE = ["tests/promises/test_promises.py::test_every_measurement_has_a_case", "tests/core/test_schema_docs.py",
                 "tests/core/test_schema_invariants.py", "tests/core/test_options.py"]
PROMISES = ["test_dry_run_sends_nothing", "test_blocked_addresses_never_contacted", "test_rates_hold",
            "test_sigterm_keeps_rows_and_fails_the_run", "test_worker_config_reaches_the_shards",
            "test_procs_config_and_no_secret"]


def test_scaffold_touches_three_places_and_its_test_passes(tmp_path, server_dsn):
    co = tmp_path / "checkout"
    co.mkdir()
    _copy_checkout(co)
    before = _hashes(co)
    env = dict(os.environ, NETSURVEY_DSN=server_dsn, PYTHONPATH=str(co))
    r = subprocess.run([sys.executable, "-m", "netsurvey.cli", "new-measurement", "echo-probe"], cwd=co, env=env,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    after = _hashes(co)
    added = sorted(set(after) - set(before))
    changed = sorted(p for p in set(before) & set(after) if before[p] != after[p])
    removed = sorted(set(before) - set(after))
    assert (changed, removed) == ([], []), f"new-measurement changed {changed}, removed {removed}"
    assert [a for a in added if not a.startswith("scanners/echo_probe/")] == [
        next(a for a in added if a.startswith("schema/")), "tests/scanners/echo_probe/test_scan_echo_probe.py"]
    assert len([a for a in added if a.startswith("schema/")]) == 1
    # the new measurement is declared, shows the shared options, and its own test passes
    h = subprocess.run([sys.executable, "-m", "netsurvey.cli", "scan", "echo-probe", "--help"], cwd=co, env=env,
                       capture_output=True, text=True, timeout=120)
    assert h.returncode == 0 and all(o in h.stdout for o in ("--dry-run", "--shards", "--procs")), h.stdout
    # the promise matrix has a case for it in each promise (built from the registry)
    c = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--collect-only",
                        "tests/promises/test_promises.py"], cwd=co, env=env, capture_output=True, text=True, timeout=300)
    assert c.returncode == 0, c.stdout[-3000:] + c.stderr[-2000:]
    ids = set(c.stdout.split())
    assert {f"tests/promises/test_promises.py::{t}[echo-probe]" for t in PROMISES} <= ids, c.stdout[-3000:]
    # its own test, and the checks every measurement must pass: all of them pass, none is skipped
    t = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rfEsxXp",
                        "tests/scanners/echo_probe/test_scan_echo_probe.py", *WHOLE_PROMISE],
                       cwd=co, env=env, capture_output=True, text=True, timeout=600)
    assert t.returncode == 0, t.stdout[-3000:] + t.stderr[-2000:]
    outcomes = {}
    for line in t.stdout.splitlines():
        word, _, rest = line.partition(" ")
        if word in ("PASSED", "FAILED", "SKIPPED", "ERROR", "XFAIL", "XPASS"):
            outcomes.setdefault(word, []).append(rest)
    assert set(outcomes) == {"PASSED"}, {k: v for k, v in outcomes.items() if k != "PASSED"}
    passed = set(outcomes["PASSED"])
    assert {"tests/scanners/echo_probe/test_scan_echo_probe.py::test_echo_probe_probes_a_local_listener",
            "tests/scanners/echo_probe/test_scan_echo_probe.py::test_echo_probe_dry_run_contacts_nothing",
            WHOLE_PROMISE[0],
            "tests/core/test_options.py::test_shared_options_have_one_type_one_parser_one_range[echo-probe]",
            "tests/core/test_schema_docs.py::test_db_docs_renders_every_declared_table",
            "tests/core/test_schema_docs.py::test_every_table_view_and_column_has_a_comment",
            "tests/core/test_schema_invariants.py::test_every_result_table_carries_shard_id"} <= passed, sorted(passed)


def test_scaffold_bad_name_is_one_line_exit_2(tmp_path):
    r = subprocess.run([sys.executable, "-m", "netsurvey.cli", "new-measurement", "Bad_Name", "--root", str(tmp_path)],
                       cwd=REPO, capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1
    assert not any(tmp_path.iterdir())
