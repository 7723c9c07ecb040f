"""The `netsurvey` command. Subcommands follow the repository layout:
db, targets, sql, testbed, demo (scan, plot, report arrive with their issues).

Bad input gives one line on stderr and exit code 2, with nothing written.
"""
from __future__ import annotations

import csv
import datetime as dt
import json
import os
import sys
from pathlib import Path
from typing import Optional

import typer
from rich.console import Console
from rich.table import Table

from .clictx import migrated_db, state
from .db import stop_embedded
from .errors import MigrationError, UsageError

app = typer.Typer(add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False,
                  help="Survey the connection state Internet protocols keep (TFO, TLS, QUIC, DNS).")
db_app = typer.Typer(no_args_is_help=True, help="The PostgreSQL database: embedded (pgserver) or --dsn.")
targets_app = typer.Typer(no_args_is_help=True, help="Top lists (Tranco/Alexa rank,domain CSV).")
scan_app = typer.Typer(no_args_is_help=True, help="Run a scanner (results go to the database).")
app.add_typer(db_app, name="db")
app.add_typer(targets_app, name="targets")
app.add_typer(scan_app, name="scan")

out = Console()
err = Console(stderr=True)


@app.callback()
def _global(
    dsn: Optional[str] = typer.Option(None, "--dsn", envvar="NETSURVEY_DSN",
                                      help="libpq DSN of an external PostgreSQL (default: embedded pgserver)."),
    config: Optional[Path] = typer.Option(None, "--config", envvar="NETSURVEY_CONFIG",
                                          help="Survey config TOML (default: ./config/survey.toml if present)."),
) -> None:
    state.dsn = dsn
    state.config_path = config


# -- db ---------------------------------------------------------------------------
@db_app.command("up")
def db_up() -> None:
    """Start the embedded PostgreSQL if needed and apply pending migrations."""
    db = state.db
    applied = db.migrate()
    out.print(f"database ready ({'embedded' if db.embedded_dir else 'external'}): {db.masked_dsn}")
    out.print(f"migrations applied now: {', '.join(applied) if applied else 'none (up to date)'}")


@db_app.command("migrate")
def db_migrate() -> None:
    """Apply pending schema migrations (schema/NNNN_*.sql), each in its own transaction."""
    applied = state.db.migrate()
    out.print(f"applied: {', '.join(applied) if applied else 'none (up to date)'}")


@db_app.command("status")
def db_status(as_json: bool = typer.Option(False, "--json", help="Print JSON.")) -> None:
    """Server version, applied and pending migrations, core row counts."""
    st = state.database(create=False).status()
    if as_json:
        print(json.dumps(st))
        return
    out.print(f"dsn: {st['dsn']} ({'embedded' if st['embedded'] else 'external'})")
    out.print(f"PostgreSQL {st['server_version']}")
    out.print(f"applied migrations: {len(st['applied'])}; pending: {', '.join(st['pending']) or 'none'}")
    for t, n in st["rows"].items():
        out.print(f"  {t}: {n} rows")


@db_app.command("down")
def db_down() -> None:
    """Stop the embedded PostgreSQL (data is kept)."""
    if state.dsn or state.config.database.dsn:
        raise UsageError("db down only stops the embedded server; an external server is yours to manage")
    stopped = stop_embedded(state.config.database.data_dir)
    out.print("embedded database stopped" if stopped else "embedded database was not running")


# -- targets -------------------------------------------------------------------------
@targets_app.command("import")
def targets_import(
    file: Path = typer.Argument(..., help="rank,domain CSV, plain or zipped (top-1m.csv inside)."),
    list_name: str = typer.Option(..., "--list", help="Name the list is stored under."),
    date: Optional[str] = typer.Option(None, "--date", help="List date YYYY-MM-DD (default: today)."),
    replace: bool = typer.Option(False, "--replace", help="Replace an import of the same name and date."),
    as_json: bool = typer.Option(False, "--json", help="Print the import report as JSON."),
) -> None:
    """Import a top list (streams; normalises names; de-duplicates; reports bad lines)."""
    from rich.progress import BarColumn, DownloadColumn, Progress, TimeRemainingColumn

    from .targets import import_list

    try:
        list_date = dt.date.fromisoformat(date) if date else None
    except ValueError:
        raise UsageError(f"--date: {date!r} is not YYYY-MM-DD") from None
    if not file.exists():
        raise UsageError(f"{file}: file not found")
    if not file.is_file():
        raise UsageError(f"{file}: not a regular file")
    db = migrated_db()
    with Progress("[progress.description]{task.description}", BarColumn(), DownloadColumn(),
                  TimeRemainingColumn(), console=err, transient=True, disable=as_json) as prog:
        task = prog.add_task(f"importing {file.name}", total=None)
        report = import_list(db, file, list_name, list_date, max_bad_share=state.config.targets.max_bad_share,
                             replace=replace, progress=lambda done, total: prog.update(task, completed=done, total=total))
    if as_json:
        print(json.dumps({"list_id": report.list_id, "name": report.name, "list_date": str(report.list_date),
                          "lines": report.lines, "imported": report.imported, "duplicates": report.duplicates,
                          "bad_lines": report.n_bad,
                          "bad": [{"line": b.line_no, "reason": b.reason} for b in report.bad[:100]]}))
        return
    for b in report.bad[:20]:
        err.print(f"{file}:{b.line_no}: skipped: {b.reason}")
    if report.n_bad > 20:
        err.print(f"... and {report.n_bad - 20} more bad lines")
    out.print(f"list {report.name!r} ({report.list_date}): {report.imported} targets imported, "
              f"{report.duplicates} duplicates skipped, {report.n_bad} bad lines skipped")


@targets_app.command("list")
def targets_list(as_json: bool = typer.Option(False, "--json", help="Print JSON.")) -> None:
    """Imported lists with their sizes."""
    with state.database(create=False).connect() as conn:
        if not conn.execute("SELECT to_regclass('target_list') IS NOT NULL").fetchone()[0]:
            rows = []
        else:
            rows = conn.execute("SELECT id, name, list_date, n_targets, n_bad_lines, n_duplicates, source "
                                "FROM target_list ORDER BY name, list_date").fetchall()
    if as_json:
        print(json.dumps([dict(id=r[0], name=r[1], list_date=str(r[2]), targets=r[3], bad_lines=r[4],
                               duplicates=r[5], source=r[6]) for r in rows]))
        return
    t = Table("id", "name", "date", "targets", "bad", "dups", "source")
    for r in rows:
        t.add_row(*[str(x) for x in r])
    out.print(t)


# -- sql -----------------------------------------------------------------------------
@app.command("sql")
def sql_cmd(
    query: str = typer.Argument(..., help="One SQL statement, run in a read-only transaction."),
    fmt: str = typer.Option("table", "--format", help="table, csv or json."),
    timeout_s: Optional[float] = typer.Option(None, "--timeout-s",
                                              help="Statement timeout (default [database].statement_timeout_s, 300)."),
) -> None:
    """Run one read-only query (as the read-only role, with a statement timeout) and print the rows."""
    import psycopg

    from .readonly import connect_reader, postgres_message

    if fmt not in ("table", "csv", "json"):
        raise UsageError(f"--format: {fmt!r} is not one of table, csv, json")
    timeout = timeout_s if timeout_s is not None else state.config.database.statement_timeout_s
    with connect_reader(state.database(create=False), timeout) as conn:
        cur = conn.cursor()
        try:
            # prepare=True forces the extended protocol: exactly one statement, so no
            # "COMMIT; ..." can leave the read-only transaction.
            cur.execute(query, prepare=True)
        except psycopg.Error as exc:
            raise UsageError(f"query failed: {postgres_message(exc)}") from None
        if cur.description is None:
            raise UsageError("query returned no rows (only read-only queries are allowed)")
        cols = [d.name for d in cur.description]
        rows = cur.fetchall()
        conn.rollback()
    if fmt == "json":
        print(json.dumps([dict(zip(cols, r)) for r in rows], default=str))
    elif fmt == "csv":
        w = csv.writer(sys.stdout)
        w.writerow(cols)
        w.writerows(rows)
    else:
        t = Table(*cols)
        for r in rows:
            t.add_row(*["" if v is None else str(v) for v in r])
        out.print(t)


# -- demo ----------------------------------------------------------------------------
@app.command("demo")
def demo_cmd() -> None:
    """Start the database, import the sample list, bring up the testbed and show what they hold."""
    from .demo import run_demo

    raise typer.Exit(run_demo(state, out))


# -- plot ----------------------------------------------------------------------------
@app.command("plot")
def plot_cmd(
    name: Optional[str] = typer.Argument(None, help="Figure or table name (see --list)."),
    runs: list[int] = typer.Option([], "--run", help="scan_run id(s) to use (default: the latest run)."),
    out_dir: Path = typer.Option(Path("out/figures"), "--out", help="Output directory."),
    list_: bool = typer.Option(False, "--list", help="List every figure with its source tables."),
    as_json: bool = typer.Option(False, "--json", help="JSON output."),
) -> None:
    """Write a figure (PNG + SVG + CSV) or table (CSV) from the database; never touches the network."""
    from analysis.figures import load_all, render

    if list_ or name is None:
        specs = load_all()
        if as_json:
            print(json.dumps([{"name": s.name, "sources": list(s.sources), "thesis": s.thesis,
                               "description": s.description} for s in specs.values()]))
            return
        t = Table("name", "thesis", "source tables", "what")
        for s in specs.values():
            t.add_row(s.name, s.thesis, ", ".join(s.sources), s.description)
        out.print(t)
        return
    ctx = render(migrated_db(create=False), name, out_dir, runs)
    if as_json:
        print(json.dumps({"name": name, "files": [str(p) for p in ctx.written], "notes": ctx.notes}, default=str))
    else:
        for p in ctx.written:
            out.print(str(p))


# -- workers, runs, schedules ---------------------------------------------------------
runs_app = typer.Typer(help="Scan runs: progress, shards, cancel.", invoke_without_command=True)
schedule_app = typer.Typer(no_args_is_help=True, help="Campaigns declared in config/schedule.toml.")
app.add_typer(runs_app, name="runs")
app.add_typer(schedule_app, name="schedule")


@app.command("worker")
def worker_cmd(
    concurrency: int = typer.Option(1, "--concurrency", help="Shards this worker runs at once."),
    once: bool = typer.Option(False, "--once", help="Exit when the queue is empty instead of waiting."),
    heartbeat: float = typer.Option(5.0, "--heartbeat", help="Seconds between worker heartbeats."),
    stalled_after: float = typer.Option(15.0, "--stalled-after",
                                        help="Retry jobs of workers silent for this many seconds."),
    schedule: Optional[Path] = typer.Option(None, "--schedule", help="Schedule file (default config/schedule.toml)."),
) -> None:
    """Pull sharded scan tasks from the queue (procrastinate) and run them; also fires the
    schedule's cron entries. Run any number of workers on any machine sharing the DSN."""
    import asyncio

    from .jobs import load_schedule, run_worker

    if concurrency < 1:
        raise UsageError("--concurrency must be at least 1")
    asyncio.run(run_worker(migrated_db(), concurrency, wait=not once, heartbeat=heartbeat,
                           stalled_after=stalled_after, schedule=load_schedule(schedule)))


@runs_app.callback()
def runs_list(ctx: typer.Context, as_json: bool = typer.Option(False, "--json", help="Print JSON."),
              limit: int = typer.Option(20, "--limit", help="Most recent runs to show.")) -> None:
    """Recent runs with their status, shard progress and counts."""
    if ctx.invoked_subcommand:
        return
    if limit < 1:
        raise UsageError(f"--limit: must be at least 1 (got {limit})")
    db = migrated_db(create=False)
    with db.connect() as conn:
        rows = conn.execute("SELECT id, kind, status, started_at, finished_at, shards, shards_done, shards_failed,"
                            " shards_remaining, counts FROM run_progress ORDER BY id DESC LIMIT %s", (limit,)).fetchall()
    keys = ["id", "kind", "status", "started_at", "finished_at", "shards", "shards_done", "shards_failed",
            "shards_remaining", "counts"]
    if as_json:
        print(json.dumps([dict(zip(keys, r)) for r in rows], default=str))
        return
    t = Table("id", "kind", "status", "started", "shards done/total", "counts")
    for r in rows:
        t.add_row(str(r[0]), r[1], r[2], str(r[3])[:19], "-" if r[5] is None else f"{r[6]}/{r[5]}",
                  json.dumps(r[9])[:60])
    out.print(t)


@runs_app.command("cancel")
def runs_cancel(run_id: int = typer.Argument(..., help="scan_run id.")) -> None:
    """Cancel a queued or running run: shards not yet started never start."""
    from .jobs import cancel_run

    n = cancel_run(migrated_db(), run_id)
    out.print(f"run {run_id} cancelled; {n} pending shards cancelled")


@schedule_app.command("list")
def schedule_list(schedule: Optional[Path] = typer.Option(None, "--schedule", help="Schedule file."),
                  as_json: bool = typer.Option(False, "--json", help="Print JSON.")) -> None:
    """Declared campaigns and when each is due next (cron entries, UTC)."""
    from .jobs import load_schedule, next_due

    entries = load_schedule(schedule)
    rows = [{"name": e.name, "command": " ".join(e.command), "cron": e.cron, "rounds": e.rounds,
             "interval": e.interval, "shards": e.shards,
             "next_due": (next_due(e).isoformat() if e.cron else "on 'schedule start'")} for e in entries]
    if as_json:
        print(json.dumps(rows))
        return
    t = Table("name", "when", "next due (UTC)", "shards", "command")
    for r in rows:
        t.add_row(r["name"], r["cron"] or f"{r['rounds']} x {r['interval']}", r["next_due"], str(r["shards"]),
                  r["command"])
    out.print(t)


@schedule_app.command("start")
def schedule_start(name: str = typer.Argument(..., help="A rounds x interval entry."),
                   schedule: Optional[Path] = typer.Option(None, "--schedule", help="Schedule file.")) -> None:
    """Defer every round of a 'rounds x interval' campaign (workers run each on time)."""
    from .jobs import load_schedule, start_rounds

    entries = {e.name: e for e in load_schedule(schedule)}
    if name not in entries:
        raise UsageError(f"no schedule entry named {name!r}")
    ids = start_rounds(migrated_db(), entries[name])
    out.print(f"{name}: {len(ids)} rounds queued as runs {ids[0]}..{ids[-1]}")


def _intercept_scan_flags(argv: list[str]) -> list[str] | None:
    """Handle `scan ... --shards N` (queue instead of running), `--procs N` (run N shards
    here at once) and `--dry-run` for every scanner in one place. Returns the argv to run,
    or None when the command was queued or run as shards."""
    import os as _os

    i = 0
    while i < len(argv) and argv[i].startswith("-"):   # global options and their values
        i += 1 if "=" in argv[i] or argv[i] == "--help" else 2
    if i >= len(argv) or argv[i] != "scan":
        return argv
    head, tail = argv[:i], argv[i:]
    if "--dry-run" in tail:
        tail.remove("--dry-run")
        _os.environ["NETSURVEY_DRY_RUN"] = "1"
    shards, procs = _pop_count(tail, "--shards"), _pop_count(tail, "--procs")
    if shards is not None and procs is not None:
        raise UsageError("--shards (queue for workers) and --procs (run here) do not go together")
    if shards is not None:
        n = shards
        # parse the global options (--dsn/--config) so the queue uses the same database
        from .jobs import start_command

        _global(dsn=_opt(head, "--dsn") or _os.environ.get("NETSURVEY_DSN"), config=_path(_opt(head, "--config")))
        run_id = start_command(state.db, tail, n)
        out.print(f"queued run {run_id}: {n} shards of '{' '.join(tail)}'; start workers with 'netsurvey worker'")
        return None
    if procs is not None:
        n = procs
        if "NETSURVEY_DRY_RUN" in _os.environ:
            raise UsageError("--procs and --dry-run do not go together (dry-run the command alone)")
        from .jobs import run_local

        config = _opt(head, "--config")
        if config:  # the shards read the same survey config (etiquette limits included)
            _os.environ["NETSURVEY_CONFIG"] = str(Path(config).resolve())
        _global(dsn=_opt(head, "--dsn") or _os.environ.get("NETSURVEY_DSN"), config=_path(config))
        run = run_local(state.db, tail, n, on_shard=lambda i, rc: rc == 2 or err.print(
            f"run: shard {i + 1}/{n} {'done' if rc == 0 else f'failed (exit {rc})'}"))
        codes = run.exit_codes
        if codes and all(rc == 2 for rc in codes.values()):
            sys.exit(2)  # bad input: every shard said why
        if "--json" in tail:  # the shards printed theirs; this last line is the run's
            print(json.dumps({"run_id": run.run_id, "status": run.status, "counts": run.counts,
                              "shards": {str(i): rc for i, rc in codes.items()}}))
        else:
            total = ", ".join(f"{k} {v}" for k, v in sorted(run.counts.items()))
            out.print(f"run {run.run_id}: {n} shards of '{' '.join(tail)}' {run.status} ({total})",
                      highlight=False, soft_wrap=True)
        if run.status != "finished":
            failed = ", ".join(str(i + 1) for i, rc in codes.items() if rc) or "?"  # 1-based, as above
            raise SystemExit(f"run {run.run_id} {run.status}: shard(s) {failed} of {n} failed; "
                             "see 'netsurvey runs'")
        return None
    return head + tail


def _pop_count(tail: list[str], flag: str) -> int | None:
    """Remove ``flag N`` from ``tail`` and return N (None if absent)."""
    if flag not in tail:
        return None
    j = tail.index(flag)
    try:
        n = int(tail[j + 1])
    except (IndexError, ValueError):
        raise UsageError(f"{flag} needs a whole number") from None
    del tail[j:j + 2]
    return n


def _opt(args: list[str], name: str) -> str | None:
    for k, a in enumerate(args):
        if a == name and k + 1 < len(args):
            return args[k + 1]
        if a.startswith(name + "="):
            return a.split("=", 1)[1]
    return None


def _path(v: str | None) -> Path | None:
    return Path(v) if v else None


#: Packages that add commands: each has a module ``cli`` with ``register(app, scan_app)``.
PLUGIN_CLIS = ["scanners.tfo.cli", "scanners.tls.cli", "scanners.quic.cli", "scanners.dns.cli",
               "atlas.cli", "browser_probes.cli", "analysis.cli"]


def _register_subapps() -> None:
    from testbed.cli import testbed_app

    from .plugins import import_present

    app.add_typer(testbed_app, name="testbed")
    extra = [m for m in os.environ.get("NETSURVEY_PLUGINS", "").split(",") if m]
    for m in import_present(PLUGIN_CLIS + extra):
        m.register(app, scan_app)


_register_subapps()


def main() -> None:
    try:
        argv = _intercept_scan_flags(sys.argv[1:])
        if argv is None:
            return
        app(args=argv, prog_name="netsurvey", standalone_mode=True)
    except UsageError as exc:
        err.print(f"netsurvey: error: {exc}", highlight=False, markup=False, soft_wrap=True)
        sys.exit(2)
    except MigrationError as exc:
        err.print(f"netsurvey: error: {exc}", highlight=False, markup=False, soft_wrap=True)
        sys.exit(1)


if __name__ == "__main__":
    main()
