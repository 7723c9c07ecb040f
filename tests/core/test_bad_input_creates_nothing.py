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
