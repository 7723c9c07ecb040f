"""`netsurvey testbed zoo2 up | down | exec` (the commands live in testbed/cli.py)."""
from __future__ import annotations

import json
import os
import sys

import typer

from netsurvey.errors import UsageError


def _root() -> None:
    if os.geteuid() != 0:
        raise UsageError("the testbed needs root (network namespaces)")


def up_cmd(err) -> None:
    from . import zoo2

    _root()
    try:
        st = zoo2.up(log=lambda m: err.print(m))
    except Exception as exc:
        err.print(f"netsurvey: error: zoo2 testbed up failed: {exc}")
        zoo2.down(log=lambda m: err.print(m))
        raise typer.Exit(1) from exc
    print(json.dumps(st, indent=1, default=str))


def down_cmd(err) -> None:
    from . import zoo2

    _root()
    zoo2.down(log=lambda m: err.print(m))


def exec_cmd(cmd: list[str]) -> None:
    from . import netns, zoo2
    from .procs import state_dir

    _root()
    if zoo2.VANTAGE not in netns.list_netns():
        raise UsageError(f"the zoo2 testbed is not up (no namespace {zoo2.VANTAGE}): netsurvey testbed zoo2 up")
    ca = str(state_dir() / "pki" / "ca.pem")
    env = dict(os.environ)
    env.update({"SSL_CERT_FILE": ca, "CURL_CA_BUNDLE": ca, "REQUESTS_CA_BUNDLE": ca, "NETSURVEY_TESTBED_CA": ca,
                "NETSURVEY_IN_TESTBED": "1"})
    sys.stdout.flush()
    argv = ["ip", "netns", "exec", zoo2.VANTAGE, *cmd]
    os.execvpe(argv[0], argv, env)
