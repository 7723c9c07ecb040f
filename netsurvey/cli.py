"""The `netsurvey` command. Subcommands follow the repository layout:
db, targets, sql, testbed, demo (scan, plot, report arrive with their issues).

Bad input gives one line on stderr and exit code 2, with nothing written.
"""
from __future__ import annotations

import csv
import datetime as dt
import json
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
    out.print(f"database ready ({'embedded' if db.embedded_dir else 'external'}): {db.dsn}")
    out.print(f"migrations applied now: {', '.join(applied) if applied else 'none (up to date)'}")


@db_app.command("migrate")
def db_migrate() -> None:
    """Apply pending schema migrations (schema/NNNN_*.sql), each in its own transaction."""
    applied = state.db.migrate()
    out.print(f"applied: {', '.join(applied) if applied else 'none (up to date)'}")


@db_app.command("status")
def db_status(as_json: bool = typer.Option(False, "--json", help="Print JSON.")) -> None:
    """Server version, applied and pending migrations, core row counts."""
    st = state.db.status()
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
    with state.db.connect() as conn:
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
) -> None:
    """Run one read-only query and print the rows."""
    import psycopg

    if fmt not in ("table", "csv", "json"):
        raise UsageError(f"--format: {fmt!r} is not one of table, csv, json")
    with state.db.connect(options="-c default_transaction_read_only=on") as conn:
        conn.read_only = True
        cur = conn.cursor()
        try:
            # prepare=True forces the extended protocol: exactly one statement, so no
            # "COMMIT; ..." can leave the read-only transaction.
            cur.execute(query, prepare=True)
        except psycopg.Error as exc:
            raise UsageError(f"query refused: {(exc.diag.message_primary or str(exc)).strip()}") from None
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
    ctx = render(migrated_db(), name, out_dir, runs)
    if as_json:
        print(json.dumps({"name": name, "files": [str(p) for p in ctx.written], "notes": ctx.notes}, default=str))
    else:
        for p in ctx.written:
            out.print(str(p))


#: Packages that add commands: each has a module ``cli`` with ``register(app, scan_app)``.
PLUGIN_CLIS = ["scanners.tfo.cli", "scanners.tls.cli", "scanners.quic.cli", "scanners.dns.cli",
               "atlas.cli", "browser_probes.cli", "analysis.cli"]


def _register_subapps() -> None:
    import importlib

    from testbed.cli import testbed_app

    app.add_typer(testbed_app, name="testbed")
    for mod in PLUGIN_CLIS:
        try:
            m = importlib.import_module(mod)
        except ModuleNotFoundError as exc:
            if exc.name != mod:
                raise
            continue
        m.register(app, scan_app)


_register_subapps()


def main() -> None:
    try:
        app(standalone_mode=True)
    except UsageError as exc:
        err.print(f"netsurvey: error: {exc}", highlight=False, markup=False, soft_wrap=True)
        sys.exit(2)
    except MigrationError as exc:
        err.print(f"netsurvey: error: {exc}", highlight=False, markup=False, soft_wrap=True)
        sys.exit(1)


if __name__ == "__main__":
    main()
