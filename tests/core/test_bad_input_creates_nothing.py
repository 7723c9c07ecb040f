"""Bad input to a measurement in a directory with no database: one line on stderr, exit
2, and nothing created - no embedded database initialised, no server left running, no
file. (Before: ``scan tfo --list nosuch --dry-run`` exited 2 after running initdb and left
a PostgreSQL server running in the directory.)"""
from __future__ import annotations

import pytest

from conftest import run_cli
from netsurvey.measure import load_registry


def _argv(m) -> list[str]:
    if m.module.startswith("browser_probes"):
        return ["browser", m.name.removeprefix("browser-")]
    return ["scan", m.name]


LISTED = {name: _argv(m) for name, m in sorted(load_registry().items())
          if "list_name" in m.function.__code__.co_varnames[:m.function.__code__.co_argcount]}


def test_the_measurements_with_a_list_are_found():
    assert {"tfo", "tfo-lb", "tls", "quic", "dns-ttl", "handshake-timing", "browser-pageload"} <= set(LISTED)


@pytest.mark.parametrize("name", sorted(LISTED))
def test_unknown_list_in_an_empty_directory_creates_nothing(name, server_reachable_dir):
    p = run_cli(*LISTED[name], "--list", "nosuch", "--dry-run", cwd=server_reachable_dir,
                env={"HOME": str(server_reachable_dir)})
    lines = p.stderr.strip().splitlines()
    assert p.returncode == 2 and len(lines) == 1 and "internal error" not in p.stderr, (p.returncode, p.stderr)
    assert list(server_reachable_dir.iterdir()) == [], list(server_reachable_dir.rglob("*"))[:5]



@pytest.mark.parametrize("special", ["/dev/zero", "fifo"])
@pytest.mark.parametrize("how", ["--config", "NETSURVEY_CONFIG", "--schedule"])
def test_a_config_or_schedule_that_never_ends_is_one_line(how, special, server_reachable_dir):
    """--config / NETSURVEY_CONFIG / --schedule naming /dev/zero or a FIFO: one line, exit
    2, nothing created. Before: /dev/zero was read until MemoryError ('internal error',
    exit 1; without a memory limit the kernel killed the command) and a FIFO with no
    writer hung the command for ever."""
    import os
    import resource
    import subprocess
    import sys

    from conftest import REPO

    f = "/dev/zero"
    if special == "fifo":
        f = str(server_reachable_dir / "cfg.toml")
        os.mkfifo(f)
    env = {**os.environ, "PYTHONPATH": str(REPO), "HOME": str(server_reachable_dir)}
    env.pop("NETSURVEY_DSN", None)
    args = {"--config": ["--config", f, "db", "status"], "NETSURVEY_CONFIG": ["db", "status"],
            "--schedule": ["schedule", "list", "--schedule", f]}[how]
    if how == "NETSURVEY_CONFIG":
        env[how] = f
    p = subprocess.run([sys.executable, "-m", "netsurvey.cli", *args], cwd=server_reachable_dir, env=env,
                       capture_output=True, text=True, timeout=60,   # memory capped: /dev/zero must not eat the machine
                       preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30)))
    lines = p.stderr.strip().splitlines()
    assert p.returncode == 2 and len(lines) == 1 and "internal error" not in p.stderr, (p.returncode, p.stderr)
    assert [x.name for x in server_reachable_dir.iterdir()] == (["cfg.toml"] if special == "fifo" else [])


@pytest.mark.parametrize("argv", [["runs", "cancel", "7"], ["export", "--run", "7", "--out", "o"],
                                  ["db", "archive-run", "--run", "7", "--out", "o"]],
                         ids=["runs-cancel", "export", "archive-run"])
def test_a_run_id_in_an_empty_directory_creates_nothing(argv, server_reachable_dir):
    """A command about an existing run, in a directory with no database: the run cannot
    exist, so one line, exit 2 and nothing created. Before: each ran initdb (and left the
    embedded server's files) and then said 'no scan_run with id 7' / 'run 7 is not queued
    or running'."""
    p = run_cli(*argv, cwd=server_reachable_dir, env={"HOME": str(server_reachable_dir)})
    lines = p.stderr.strip().splitlines()
    assert p.returncode == 2 and len(lines) == 1 and "internal error" not in p.stderr, (p.returncode, p.stderr)
    assert list(server_reachable_dir.iterdir()) == [], list(server_reachable_dir.rglob("*"))[:5]


def test_a_blocklist_that_never_ends_is_one_line(tmp_path, server_reachable_dir):
    """etiquette.blocklist_files naming /dev/zero or a FIFO: one line, exit 2 (it read the
    whole file: a FIFO waited for a writer for ever, /dev/zero until memory ran out)."""
    import os

    fifo = server_reachable_dir / "fifo"
    os.mkfifo(fifo)
    for target in ("/dev/zero", str(fifo)):
        cfg = tmp_path / "survey.toml"
        cfg.write_text(f'[etiquette]\nblocklist_files = ["{target}"]\n')
        p = run_cli("--config", str(cfg), "scan", "tls", "--target", "a.test=198.18.0.1", "--dry-run",
                    cwd=server_reachable_dir, env={"HOME": str(server_reachable_dir)}, timeout=60)
        assert p.returncode == 2 and len(p.stderr.strip().splitlines()) == 1, (target, p.returncode, p.stderr[-500:])
        assert "internal error" not in p.stderr


def test_db_docs_to_a_full_device_is_one_line(db):
    p = run_cli("db", "docs", "--out", "/dev/full", dsn=db.dsn)
    assert p.returncode == 2 and len(p.stderr.strip().splitlines()) == 1 and "cannot write" in p.stderr, p.stderr


def test_worker_with_absurd_heartbeat_is_refused_before_a_database(server_reachable_dir):
    """`worker --once --heartbeat 1e308 --stalled-after 1.7e308` created a database and then
    ended in an internal error (the queue's interval overflowed)."""
    p = run_cli("worker", "--once", "--heartbeat", "1e308", "--stalled-after", "1.7e308",
                cwd=server_reachable_dir, env={"HOME": str(server_reachable_dir)})
    assert p.returncode == 2 and len(p.stderr.strip().splitlines()) == 1, p.stderr
    assert list(server_reachable_dir.iterdir()) == []
