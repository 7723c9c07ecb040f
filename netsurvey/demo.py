"""`netsurvey demo`: what `make demo` runs. Each step reports on its own; a failing step is
reported and the remaining steps still run. Exit code 1 if any step failed."""
from __future__ import annotations

import os
import traceback
from pathlib import Path
from typing import Callable

from rich.console import Console
from rich.table import Table

SAMPLE_LIST = Path(__file__).resolve().parent.parent / "tests" / "data" / "sample_top.csv"


def _step_database(state, out: Console) -> str:
    from .targets import import_list

    db = state.db
    applied = db.migrate()
    out.print(f"database: {'embedded PostgreSQL' if db.embedded_dir else db.dsn}; "
              f"migrations applied now: {len(applied)}")
    report = import_list(db, SAMPLE_LIST, "sample", max_bad_share=state.config.targets.max_bad_share,
                         replace=True)
    out.print(f"imported {SAMPLE_LIST.name} as list 'sample': {report.imported} targets "
              f"({report.duplicates} duplicates, {report.n_bad} bad lines skipped)")
    with db.connect() as conn:
        rows = conn.execute(
            """SELECT l.name, l.list_date, count(t.*), count(*) FILTER (WHERE t.rank <= 10)
               FROM target_list l LEFT JOIN target t ON t.list_id = l.id
               GROUP BY l.id ORDER BY l.name, l.list_date""").fetchall()
        top = conn.execute("SELECT rank, hostname FROM target WHERE list_id = %s ORDER BY rank LIMIT 10",
                           (report.list_id,)).fetchall()
    t = Table("list", "date", "targets", "in top 10", title="target lists in the database")
    for r in rows:
        t.add_row(r[0], str(r[1]), str(r[2]), str(r[3]))
    out.print(t)
    t2 = Table("rank", "hostname", title="sample: top 10")
    for r in top:
        t2.add_row(str(r[0]), r[1])
    out.print(t2)
    return f"{report.imported} targets"


def _step_testbed(state, out: Console) -> str:
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


STEPS: list[tuple[str, Callable]] = [
    ("database and sample list", _step_database),
    ("testbed", _step_testbed),
]

#: Later steps: each module has ``STEP`` (a title) and ``run(state, out) -> str`` (a one-line
#: result); it runs its scanner/probe on the testbed, stores results and writes figures.
DEMO_MODULES = ["scanners.tfo.demo", "scanners.tls.demo", "scanners.quic.demo", "scanners.dns.demo",
                "atlas.demo", "browser_probes.demo", "analysis.demo"]


def _plugin_steps() -> list[tuple[str, Callable]]:
    import importlib

    steps = []
    for mod in DEMO_MODULES:
        try:
            m = importlib.import_module(mod)
        except ModuleNotFoundError as exc:
            if exc.name != mod:
                raise
            continue
        steps.append((m.STEP, m.run))
    return steps


def run_demo(state, out: Console) -> int:
    out.rule("netsurvey demo")
    summary = []
    failed = 0
    for name, fn in STEPS + _plugin_steps():
        out.rule(name)
        try:
            summary.append((name, "ok", fn(state, out)))
        except Exception as exc:  # a failing step must not stop the others
            failed += 1
            out.print(f"[red]step {name!r} failed:[/red] {exc}")
            out.print(traceback.format_exc(limit=3), markup=False, highlight=False)
            summary.append((name, "FAILED", str(exc)))
    t = Table("step", "status", "result", title="demo summary")
    for row in summary:
        t.add_row(*row)
    out.print(t)
    return 1 if failed else 0
