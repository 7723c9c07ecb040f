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


def vantage_cli_json(state, *args: str, timeout: float = 120) -> dict:
    """Run ``netsurvey [--dsn D] [--config C] ARGS`` inside the testbed's vantage namespace
    and return the JSON object of its last output line; raise with the end of stderr if it
    fails. Demo steps of scanners and probes use this to run their commands."""
    import json
    import os
    import subprocess
    import sys

    inner = [sys.executable, "-m", "netsurvey.cli"]  # the DSN goes by the environment, never argv
    if state.config_path:
        inner += ["--config", str(Path(state.config_path).resolve())]
    p = subprocess.run([sys.executable, "-m", "netsurvey.cli", "testbed", "exec", "--", *inner, *args],
                       capture_output=True, text=True, timeout=timeout,
                       env=dict(os.environ, NETSURVEY_DSN=state.db.dsn))
    if p.returncode != 0:
        raise RuntimeError(f"{' '.join(args[:2])} failed: {p.stderr.strip()[-300:]}")
    return json.loads(p.stdout.strip().splitlines()[-1])


def _step_database(state, out: Console) -> str:
    from .targets import import_list

    db = state.db
    applied = db.migrate()
    out.print(f"database: {'embedded PostgreSQL' if db.embedded_dir else db.masked_dsn}; "
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


STEPS: list[tuple[str, Callable]] = [
    ("database and sample list", _step_database),
]

def _plugin_steps() -> list[tuple[str, Callable]]:
    """Later steps come from the plugins (testbed, scanners, atlas, browsers, analysis):
    each runs its part on the testbed, stores results and writes figures."""
    from .plugins import demo_steps

    return demo_steps()


def _row_counts(db) -> dict[str, int]:
    """Exact row counts of every table in the public schema (demo-sized databases)."""
    from psycopg import sql

    try:
        with db.connect() as conn:
            tables = [r[0] for r in conn.execute(
                "SELECT tablename FROM pg_tables WHERE schemaname = 'public' AND tablename NOT LIKE 'procrastinate%'")]
            return {t: conn.execute(sql.SQL("SELECT count(*) FROM {}").format(sql.Identifier(t))).fetchone()[0]
                    for t in tables}
    except Exception:
        return {}


def run_demo(state, out: Console) -> int:
    """Run every step; print a summary table (step, status, observations stored, result
    against the testbed's ground truth) and where the report is. Returns 1 if a step failed."""
    import time

    out.rule("netsurvey demo")
    summary = []
    failed = 0
    t_start = time.time()
    for name, fn in STEPS + _plugin_steps():
        out.rule(name)
        before = _row_counts(state.db)
        t0 = time.time()
        try:
            result = fn(state, out)
            status = "ok"
        except Exception as exc:  # a failing step must not stop the others
            failed += 1
            out.print(f"[red]step {name!r} failed:[/red] {exc}")
            out.print(traceback.format_exc(limit=3), markup=False, highlight=False)
            status, result = "FAILED", str(exc)
        after = _row_counts(state.db)
        added = {t: after[t] - before.get(t, 0) for t in after if after[t] - before.get(t, 0) > 0}
        obs = sum(n for t, n in added.items() if t not in ("target", "target_list", "scan_run", "schema_migrations"))
        summary.append((name, status, f"{time.time() - t0:.0f} s", str(obs), result))
    t = Table("step", "status", "time", "observations", "result vs ground truth", title="demo summary")
    for row in summary:
        t.add_row(*row)
    out.print(t)
    report = Path(os.environ.get("NETSURVEY_DEMO_OUT", "out")) / "report" / "index.html"
    out.print(f"demo finished in {time.time() - t_start:.0f} s; "
              f"{len(summary) - failed}/{len(summary)} steps ok")
    if report.exists():
        out.print(f"report: {report.resolve()}")
    return 1 if failed else 0
