"""`netsurvey testbed up | status | exec | down`."""
from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import List, Optional

import typer
from rich.console import Console
from rich.table import Table

from netsurvey.errors import UsageError
from netsurvey.options import json_option

from .model import DEFAULT_TESTBED_CONFIG, load_testbed_config
from .zoo_record import ZOOS

testbed_app = typer.Typer(no_args_is_help=True,
                          help="A mini-Internet of real servers in network namespaces (needs root).")
out = Console()
err = Console(stderr=True)

_CONFIG_OPT = typer.Option(None, "--config", help="Testbed config (default: config/testbed.toml).")


def _testbed(config: Optional[Path], use_running: bool = True):
    """The testbed for ``config``; without one, the running testbed's config (status, exec)
    or the repository's config/testbed.toml (up, ``use_running=False``)."""
    from .manager import State, Testbed

    if os.geteuid() != 0:
        raise UsageError("the testbed needs root (network namespaces)")
    if config is None and not use_running:
        config = DEFAULT_TESTBED_CONFIG
    if config is None:
        st = State.load()
        config = Path(st.config_path) if st and st.config_path else DEFAULT_TESTBED_CONFIG
    return Testbed(load_testbed_config(config), config)


@testbed_app.command("up")
def up(config: Optional[Path] = _CONFIG_OPT) -> None:
    """Create namespaces and start every server (idempotent; restarts if the config changed)."""
    tb = _testbed(config, use_running=False)
    try:
        tb.up(log=lambda m: err.print(m))
    except Exception as exc:
        from .manager import down

        err.print(f"netsurvey: error: testbed up failed: {exc}")
        down(log=lambda m: err.print(m))
        raise typer.Exit(1) from exc


@testbed_app.command("status")
def status(as_json: bool = json_option(help="Print state and ground truth as JSON."),
           config: Optional[Path] = _CONFIG_OPT) -> None:
    """What runs, and the ground truth of every host. Exit status 0 when the testbed is up,
    1 (and one line on stderr) when it is down; --json prints the state either way."""
    st = _testbed(config).status()
    if as_json:
        print(json.dumps(st, indent=1, default=str))
    if not st["up"]:
        print(f"netsurvey: testbed is down (state in {st['state_dir']}); start it with 'netsurvey testbed up'",
              file=sys.stderr)
        raise typer.Exit(1)
    if as_json:
        return
    out.print(f"testbed is UP (state in {st['state_dir']})")
    t = Table("process", "namespace", "pid", "running")
    for p in st["processes"]:
        t.add_row(p["name"], p["namespace"], str(p["pid"]), "yes" if p["running"] else "NO")
    out.print(t)
    gt = st["ground_truth"]
    h = Table("TLS host", "addresses", "versions", "timeout s", "ids", "tickets", "key group", "share")
    for x in gt["tls_hosts"]:
        h.add_row(x["hostname"], " ".join(x["addresses"]), ",".join(x["versions"]), str(x["session_timeout"]),
                  str(x["session_ids"]), str(x["tickets"]), x["ticket_key_group"], x["share_group"])
    out.print(h)
    f = Table("TCP host", "addresses", "TFO", "key group")
    for x in gt["tfo_hosts"]:
        f.add_row(x["hostname"], " ".join(x["addresses"]), str(x["tfo"]), str(x["key_group"]))
    out.print(f)
    out.print("full ground truth: netsurvey testbed status --json")


@testbed_app.command("exec", context_settings={"allow_extra_args": True, "ignore_unknown_options": True})
def exec_(cmd: List[str] = typer.Argument(..., help="Command to run in the vantage namespace.")) -> None:
    """Run CMD in the vantage namespace with the testbed's resolver and CA trusted."""
    tb = _testbed(None)
    env = dict(os.environ)
    env.update(tb.exec_env())
    argv = tb.exec_argv(cmd)
    sys.stdout.flush()
    os.execvpe(argv[0], argv, env)


@testbed_app.command("profile")
def profile_cmd(name: str = typer.Argument(..., help="Profile name ([[profile]] in the testbed config)."),
                host_class: List[str] = typer.Option(..., "--class", help="Host class: a namespace name of the "
                                                     "testbed, 'timing', or 'track' (the tracking vantage; repeatable)."),
                config: Optional[Path] = _CONFIG_OPT) -> None:
    """Switch host classes' links to a delay profile (netem/tbf; the delay line for 'timing' and 'track')."""
    from .profiles import ProfileError, apply

    tb = _testbed(config, use_running=False)
    try:
        res = apply(tb.cfg, name, list(host_class))
    except ProfileError as exc:
        raise UsageError(str(exc)) from None
    print(json.dumps(res, indent=1, default=str))


timing_app = typer.Typer(no_args_is_help=True, help="The timing testbed: hosts of its own for handshake timing.")
testbed_app.add_typer(timing_app, name="timing")


@timing_app.command("up")
def timing_up(config: Optional[Path] = _CONFIG_OPT) -> None:
    """Create the timing testbed's namespaces, delay line and servers (idempotent; profile none)."""
    from . import timing

    tb = _testbed(config, use_running=False)
    try:
        st = timing.up(tb.cfg, log=lambda m: err.print(m))
    except Exception as exc:
        err.print(f"netsurvey: error: timing testbed up failed: {exc}")
        timing.down(tb.cfg, log=lambda m: err.print(m))
        raise typer.Exit(1) from exc
    print(json.dumps(st, indent=1, default=str))


@timing_app.command("down")
def timing_down(config: Optional[Path] = _CONFIG_OPT) -> None:
    """Stop the timing testbed and the tracking vantage, remove their namespaces (the shared
    testbed is untouched but for the tracking vantage's TUN peer in its vantage)."""
    from . import timing, trackline

    cfg = _testbed(config, use_running=False).cfg
    trackline.down(cfg, log=lambda m: err.print(m))
    timing.down(cfg, log=lambda m: err.print(m))


@timing_app.command("exec", context_settings={"allow_extra_args": True, "ignore_unknown_options": True})
def timing_exec(cmd: List[str] = typer.Argument(..., help="Command to run in the timing vantage namespace.")) -> None:
    """Run CMD in the timing testbed's vantage namespace with the testbed CA trusted."""
    from . import netns
    from .timing import netns_name

    tb = _testbed(None, use_running=False)
    ns = netns_name(tb.cfg.timing.vantage_ns)
    if ns not in netns.list_netns():
        raise UsageError(f"the timing testbed is not up (no namespace {ns}): netsurvey testbed timing up")
    env = dict(os.environ)
    env.update(tb.exec_env())
    sys.stdout.flush()
    argv = ["ip", "netns", "exec", ns, *cmd]
    os.execvpe(argv[0], argv, env)


zoo_dns_app = typer.Typer(no_args_is_help=True, help="The DNS zoo: BIND, gdnsd, NSD, PowerDNS with their stock defaults, "
                          "in a testbed of their own (testbed/zoo_dns.py).")
testbed_app.add_typer(zoo_dns_app, name="zoo-dns")


@zoo_dns_app.command("up")
def zoo_dns_up() -> None:
    """Create the DNS zoo's namespaces and start its servers (idempotent); print its ground truth."""
    from . import zoo_dns

    if os.geteuid() != 0:
        raise UsageError("the testbed needs root (network namespaces)")
    try:
        st = zoo_dns.up(log=lambda m: err.print(m))
    except Exception as exc:
        err.print(f"netsurvey: error: zoo-dns testbed up failed: {exc}")
        zoo_dns.down(log=lambda m: err.print(m))
        raise typer.Exit(1) from exc
    print(json.dumps(st, indent=1, default=str))


@zoo_dns_app.command("down")
def zoo_dns_down() -> None:
    """Stop the DNS zoo and remove its namespaces (the shared testbed is untouched)."""
    from . import zoo_dns

    if os.geteuid() != 0:
        raise UsageError("the testbed needs root (network namespaces)")
    zoo_dns.down(log=lambda m: err.print(m))


@zoo_dns_app.command("exec", context_settings={"allow_extra_args": True, "ignore_unknown_options": True})
def zoo_dns_exec(cmd: List[str] = typer.Argument(..., help="Command to run in the DNS zoo's vantage namespace.")) -> None:
    """Run CMD in the DNS zoo's vantage namespace."""
    from . import netns, zoo_dns

    if os.geteuid() != 0:
        raise UsageError("the testbed needs root (network namespaces)")
    if zoo_dns.VANTAGE not in netns.list_netns():
        raise UsageError(f"the DNS zoo is not up (no namespace {zoo_dns.VANTAGE}): netsurvey testbed zoo-dns up")
    env = dict(os.environ)
    sys.stdout.flush()
    argv = ["ip", "netns", "exec", zoo_dns.VANTAGE, *cmd]
    os.execvpe(argv[0], argv, env)


zoo_quic_app = typer.Typer(no_args_is_help=True, help="The QUIC zoo: quic-go, ngtcp2 and quinn servers with their stock "
                           "defaults, and a TFO key-pair host, in namespaces of their own (nstq-*).")
testbed_app.add_typer(zoo_quic_app, name="zoo-quic")


@zoo_quic_app.command("up")
def zoo_quic_up() -> None:
    """Create the QUIC zoo's namespaces and start its servers (idempotent)."""
    from . import zoo_quic

    if os.geteuid() != 0:
        raise UsageError("the testbed needs root (network namespaces)")
    try:
        st = zoo_quic.up(log=lambda m: err.print(m))
    except Exception as exc:
        err.print(f"netsurvey: error: QUIC zoo up failed: {exc}")
        zoo_quic.down(log=lambda m: err.print(m))
        raise typer.Exit(1) from exc
    print(json.dumps(st, indent=1, default=str))


@zoo_quic_app.command("down")
def zoo_quic_down() -> None:
    """Stop the QUIC zoo and remove its namespaces (the shared testbed is untouched)."""
    from . import zoo_quic

    if os.geteuid() != 0:
        raise UsageError("the testbed needs root (network namespaces)")
    zoo_quic.down(log=lambda m: err.print(m))


@zoo_quic_app.command("exec", context_settings={"allow_extra_args": True, "ignore_unknown_options": True})
def zoo_quic_exec(cmd: List[str] = typer.Argument(..., help="Command to run in the QUIC zoo's vantage namespace.")) -> None:
    """Run CMD in the QUIC zoo's vantage namespace."""
    from . import netns, zoo_quic

    if os.geteuid() != 0:
        raise UsageError("the testbed needs root (network namespaces)")
    ns = zoo_quic.netns_name(zoo_quic.VANTAGE)
    if ns not in netns.list_netns():
        raise UsageError(f"the QUIC zoo is not up (no namespace {ns}): netsurvey testbed zoo-quic up")
    sys.stdout.flush()
    argv = zoo_quic.exec_argv(list(cmd))
    os.execvpe(argv[0], argv, dict(os.environ))


zoo2_app = typer.Typer(no_args_is_help=True, help="TLS zoo 2: H2O, BoringSSL, rustls in a testbed of their own.")
testbed_app.add_typer(zoo2_app, name="zoo2")


@zoo2_app.command("up")
def zoo2_up() -> None:
    """Create the zoo2 testbed's namespaces and servers (idempotent)."""
    from .zoo2_cli import up_cmd

    up_cmd(err)


@zoo2_app.command("down")
def zoo2_down() -> None:
    """Stop the zoo2 testbed and remove its namespaces (the shared testbed is untouched)."""
    from .zoo2_cli import down_cmd

    down_cmd(err)


@zoo2_app.command("exec", context_settings={"allow_extra_args": True, "ignore_unknown_options": True})
def zoo2_exec(cmd: List[str] = typer.Argument(..., help="Command to run in the zoo2 vantage namespace.")) -> None:
    """Run CMD in the zoo2 testbed's vantage namespace with the testbed CA trusted."""
    from .zoo2_cli import exec_cmd

    exec_cmd(cmd)


@testbed_app.command("down")
def down_cmd() -> None:
    """Stop every process and remove every namespace the testbed made."""
    from .manager import down

    if os.geteuid() != 0:
        raise UsageError("the testbed needs root (network namespaces)")
    down(log=lambda m: err.print(m))


_ZOO_HELP = "Only this zoo: " + ", ".join(f"{name} ({what})" for name, what in ZOOS.items()) \
    + " (repeatable; default: every zoo)."


@testbed_app.command("zoo-record")
def zoo_record(zoo: List[str] = typer.Option([], "--zoo", help=_ZOO_HELP),
               as_json: bool = json_option(help="Print rows written per zoo as JSON.")) -> None:
    """Write the documented (cited) default of every fact of every zoo server into the
    database (table zoo_documented_default), replacing what an earlier run wrote. `plot
    zoo-table` reads them from there. Needs neither root nor a running zoo."""
    from netsurvey.clictx import migrated_db

    from .zoo_record import record

    bad = [z for z in zoo if z not in ZOOS]
    if bad:
        raise UsageError(f"--zoo: unknown zoo {bad[0]!r} (use {', '.join(ZOOS)})")
    counts = record(migrated_db(), tuple(dict.fromkeys(zoo)) or tuple(ZOOS))
    if as_json:
        print(json.dumps({"rows": counts}))
    else:
        print(", ".join(f"{k}: {n} facts" for k, n in counts.items()))


def register(app: typer.Typer, scan_app: typer.Typer) -> None:
    app.add_typer(testbed_app, name="testbed")


def demo_steps():
    """The demo's testbed step, then the zoos' documented defaults into the demo's database
    (so the report's zoo table shows them beside the measurements) (netsurvey/plugins.py)."""
    return [(10, "testbed", _step_testbed), (11, "zoo documented defaults (testbed zoo-record)", _step_zoo_record)]


def _step_zoo_record(state, out) -> str:
    from .zoo_record import record

    state.db.migrate()
    counts = record(state.db)
    return ", ".join(f"{k}: {n} facts" for k, n in counts.items())


def _step_testbed(state, out) -> str:
    import os

    from rich.table import Table

    if os.geteuid() != 0:
        return "skipped: the testbed needs root"
    from testbed.manager import Testbed
    from testbed.model import DEFAULT_TESTBED_CONFIG, load_testbed_config

    tb = Testbed(load_testbed_config(DEFAULT_TESTBED_CONFIG), DEFAULT_TESTBED_CONFIG)
    tb.up(log=lambda m: out.print(m))
    st = tb.status()
    gt = st["ground_truth"]
    t = Table("kind", "hosts", "facts (ground truth)", title="testbed")
    t.add_row("TLS (nginx)", str(len(gt["tls_hosts"])),
              ", ".join(f"{h['hostname']}:{h['session_timeout']}s" for h in gt["tls_hosts"][:4]) + ", ...")
    t.add_row("TCP/TFO", str(len(gt["tfo_hosts"])),
              ", ".join(f"{h['hostname']}:{'on' if h['tfo'] else 'off'}" for h in gt["tfo_hosts"]))
    t.add_row("QUIC (aioquic)", str(len(gt["quic_hosts"])),
              ", ".join(f"{h['hostname']}:retry={h['retry']}" for h in gt["quic_hosts"]))
    t.add_row("DNS (knot+unbound)", str(len(gt["dns"].get("names", {}))), "zones: " + ", ".join(gt["dns"].get("zones", {})))
    out.print(t)
    running = sum(p["running"] for p in st["processes"])
    return f"{running}/{len(st['processes'])} server processes running"


