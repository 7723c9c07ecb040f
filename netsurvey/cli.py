"""The `netsurvey` command. Subcommands follow the repository layout:
db, targets, sql, testbed, demo (scan, plot, report arrive with their issues).

Bad input gives one line on stderr and exit code 2, with nothing written.
"""
from __future__ import annotations

import datetime as dt
import json
import os
import re
import sys
from pathlib import Path
from typing import Optional

import typer
from rich.console import Console
from rich.table import Table

from .clictx import migrated_db, state
from .db import stop_embedded
from .errors import MigrationError, UsageError
from .options import concurrency_option, json_option, out_option

app = typer.Typer(add_completion=True, no_args_is_help=True, pretty_exceptions_enable=False,
                  help="Survey the connection state Internet protocols keep (TFO, TLS, QUIC, DNS).")
db_app = typer.Typer(no_args_is_help=True, help="The PostgreSQL database: embedded (pgserver) or --dsn.")
targets_app = typer.Typer(no_args_is_help=True, help="Top lists (Tranco/Alexa rank,domain CSV).")
scan_app = typer.Typer(no_args_is_help=True, help="Run a scanner (results go to the database).")
app.add_typer(db_app, name="db")
app.add_typer(targets_app, name="targets")
app.add_typer(scan_app, name="scan")

out = Console()
err = Console(stderr=True)


def _print_version(value: bool) -> None:
    if value:
        from importlib import metadata

        from .runs import code_version

        print(f"netsurvey {metadata.version('netsurvey')} (code {code_version()})")
        raise typer.Exit(0)


@app.callback()
def _global(
    dsn: Optional[str] = typer.Option(None, "--dsn", envvar="NETSURVEY_DSN",
                                      help="libpq DSN of an external PostgreSQL (default: embedded pgserver)."),
    config: Optional[Path] = typer.Option(None, "--config", envvar="NETSURVEY_CONFIG", dir_okay=False,
                                          help="Survey config TOML (default: ./config/survey.toml if present)."),
    version: bool = typer.Option(False, "--version", is_eager=True, expose_value=False, callback=_print_version,
                                 help="Print the version (and the code's git commit) and exit."),
    vantage: Optional[str] = typer.Option(None, "--vantage", envvar="NETSURVEY_VANTAGE",
                                          help="Name of this vantage, recorded with every run (default: the config's vantage_name, else the hostname)."),
) -> None:
    state.dsn = dsn
    state.config_path = config
    if vantage:  # into the environment: shard processes and children inherit it
        from .vantage import check_name

        os.environ["NETSURVEY_VANTAGE"] = check_name(vantage)


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
def db_status(as_json: bool = json_option(help="Print JSON.")) -> None:
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


@db_app.command("docs")
def db_docs(out_file: Optional[Path] = out_option(None, "Markdown file (default: docs/schema.md).")) -> None:
    """Write the data dictionary (every table, view and column) from the database's comments."""
    from .schemadoc import DEFAULT_OUT, write

    db = migrated_db()
    try:
        written = write(db, out_file or DEFAULT_OUT)
    except OSError as exc:
        raise UsageError(f"{out_file or DEFAULT_OUT}: cannot write: {exc.strerror}") from None
    out.print(str(written), highlight=False)


@db_app.command("archive-run")
def db_archive_run(
    run: int = typer.Option(..., "--run", help="scan_run id to archive."),
    out_dir: Path = typer.Option(..., "--out", help="New or empty directory for the files and manifest.json."),
    fmt: str = typer.Option("parquet", "--format", help="jsonl, parquet or csv (as netsurvey export)."),
    drop: bool = typer.Option(False, "--drop", help="Then drop the run's partitions and its scan_run row."),
    lock_timeout_s: float = typer.Option(5.0, "--lock-timeout-s", help="With --drop: seconds to wait for tables "
                                         "another transaction (a running scan) holds, then give up (nothing dropped)."),
    as_json: bool = json_option(help="Print what was written and dropped as JSON."),
) -> None:
    """Export one run (netsurvey export) and, with --drop, drop its partitions (docs/retention.md)."""
    from .config import finite
    from .retention import archive_run

    finite(lock_timeout_s, "--lock-timeout-s", positive=True)
    manifest, dropped = archive_run(migrated_db(create=False), run, out_dir, fmt, drop, lock_timeout_s)  # a run: never a new database
    if as_json:
        print(json.dumps({"out": str(out_dir), "files": [{k: f[k] for k in ("table", "file", "rows", "sha256")}
                                                         for f in manifest["files"]],
                          "dropped": [{"table": p.table, "partition": p.partition, "rows": p.rows,
                                       "size_bytes": p.size_bytes} for p in dropped]}))
        return
    rows = sum(f["rows"] for f in manifest["files"])
    print(f"{out_dir / 'manifest.json'}: run {run}, {len(manifest['files'])} files, {rows} rows")
    if drop:
        freed = sum(p.size_bytes for p in dropped)
        print(f"dropped run {run}: {len(dropped)} partitions, {sum(p.rows for p in dropped)} rows, "
              f"{freed / 2**20:.1f} MiB freed")


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
    file: Path = typer.Argument(..., help="rank,domain CSV, plain or zipped (top-1m.csv inside); - reads plain CSV from stdin."),
    list_name: str = typer.Option(..., "--list", help="Name the list is stored under."),
    date: Optional[str] = typer.Option(None, "--date", help="List date YYYY-MM-DD (default: today)."),
    replace: bool = typer.Option(False, "--replace", help="Replace an import of the same name and date."),
    as_json: bool = json_option(help="Print the import report as JSON."),
) -> None:
    """Import a top list (streams; normalises names; de-duplicates; reports bad lines)."""
    from rich.progress import BarColumn, DownloadColumn, Progress, TimeRemainingColumn

    from .targets import import_list

    try:
        list_date = dt.date.fromisoformat(date) if date else None
    except ValueError:
        raise UsageError(f"--date: {date!r} is not YYYY-MM-DD") from None
    if str(file) != "-" and not file.exists():
        raise UsageError(f"{file}: file not found")
    if str(file) != "-" and not file.is_file():
        raise UsageError(f"{file}: not a regular file")
    db = migrated_db()
    with Progress("[progress.description]{task.description}", BarColumn(), DownloadColumn(),
                  TimeRemainingColumn(), console=err, transient=True, disable=as_json or not err.is_terminal) as prog:
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
def targets_list(as_json: bool = json_option(help="Print JSON.")) -> None:
    """Imported lists with their sizes."""
    with state.database(create=False).connect() as conn:
        if not conn.execute("SELECT to_regclass('target_list') IS NOT NULL").fetchone()[0]:  # type: ignore[index]  # one row
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
    query: Optional[str] = typer.Argument(None, help="One SQL statement, run in a read-only transaction; - reads it from stdin."),
    file: Optional[Path] = typer.Option(None, "-f", "--file", dir_okay=False, help="Read the statement from this file (- = stdin)."),
    fmt: str = typer.Option("table", "--format", help="table, csv, json (an array) or jsonl (one object a line); see docs/data.md."),
    timeout_s: Optional[float] = typer.Option(None, "--timeout-s",
                                              help="Statement timeout (default [database].statement_timeout_s, 300)."),
) -> None:
    """Run one read-only query (as the read-only role, with a statement timeout) and print the
    rows (csv/json/jsonl stream as they arrive)."""
    from . import dataout
    from .readonly import connect_reader

    if fmt not in dataout.FORMATS:
        raise UsageError(f"--format: {fmt!r} is not one of {', '.join(dataout.FORMATS)}")
    query = dataout.read_query(query, file)
    timeout = timeout_s if timeout_s is not None else state.config.database.statement_timeout_s
    # closing, not `with conn`: after a failed COPY the connection cannot roll back, and
    # psycopg's warning about it was a second line on stderr; closing aborts the transaction
    from contextlib import closing

    with closing(connect_reader(state.database(create=False), timeout)) as conn:
        cur = conn.cursor()
        # stream() sends the extended protocol: exactly one statement, so no
        # "COMMIT; ..." can leave the read-only transaction.
        cols, rows = dataout.stream(cur, query)
        try:
            if fmt in ("json", "jsonl"):
                dataout.write_json(cols, rows, sys.stdout, lines=fmt == "jsonl")
            elif fmt == "csv":
                dataout.write_csv(cols, rows, sys.stdout, dataout.json_columns(cur))
            else:
                from rich.text import Text

                t = Table(*cols)
                for r in rows:   # Text: a value such as "[ms]" is not Rich markup
                    t.add_row(*[Text("" if v is None else dataout.csv_value(v)) for v in r])
                out.print(t)
        finally:   # a half-read stream holds the connection's lock: `| head` hung in rollback
            rows.close()
        conn.rollback()


# -- export --------------------------------------------------------------------------
from .export import export_command  # noqa: E402

app.command("export")(export_command)


# -- demo ----------------------------------------------------------------------------
@app.command("demo")
def demo_cmd() -> None:
    """Start the database, import the sample list, bring up the testbed and show what they hold."""
    from .demo import run_demo

    raise typer.Exit(run_demo(state, out))


# -- scaffold ------------------------------------------------------------------------
@app.command("new-measurement")
def new_measurement_cmd(
    name: str = typer.Argument(..., help="Measurement name, e.g. ssh-hostkey (becomes 'netsurvey scan NAME')."),
    root: Path = typer.Option(Path("."), "--root", help="The netsurvey checkout to write into."),
) -> None:
    """Scaffold a new measurement: its package, one migration, one test (nothing else to edit)."""
    from .scaffold import scaffold

    for p in scaffold(name, root):
        out.print(str(p), highlight=False)


# -- workers, runs, schedules ---------------------------------------------------------
runs_app = typer.Typer(help="Scan runs: progress, shards, cancel.", invoke_without_command=True)
schedule_app = typer.Typer(no_args_is_help=True, help="Campaigns declared in config/schedule.toml.")
app.add_typer(runs_app, name="runs")
app.add_typer(schedule_app, name="schedule")


@app.command("worker")
def worker_cmd(
    concurrency: int = concurrency_option(1, help="Shards this worker runs at once."),
    once: bool = typer.Option(False, "--once", help="Exit when the queue is empty instead of waiting."),
    heartbeat: float = typer.Option(5.0, "--heartbeat", max=86400.0, help="Seconds between worker heartbeats (at most a day)."),
    stalled_after: float = typer.Option(15.0, "--stalled-after", max=7 * 86400.0,
                                        help="Retry jobs of workers silent for this many seconds (at most a week)."),
    schedule: Optional[Path] = typer.Option(None, "--schedule", dir_okay=False, help="Schedule file (default config/schedule.toml)."),
) -> None:
    """Pull sharded scan tasks from the queue (procrastinate) and run them; also fires the
    schedule's cron entries. Run any number of workers on any machine sharing the DSN."""
    import asyncio

    from .jobs import load_schedule, run_worker

    if concurrency < 1:
        raise UsageError("--concurrency must be at least 1")
    from .config import finite

    finite(heartbeat, "--heartbeat", positive=True)
    if finite(stalled_after, "--stalled-after", positive=True) <= heartbeat:   # else live shards are re-run
        raise UsageError(f"--stalled-after ({stalled_after:g} s) must be longer than --heartbeat ({heartbeat:g} s)")
    if schedule is not None and not schedule.is_file():
        raise UsageError(f"--schedule: {schedule}: " + ("not a regular file" if schedule.exists() else "file not found"))
    asyncio.run(run_worker(migrated_db(), concurrency, wait=not once, heartbeat=heartbeat,
                           stalled_after=stalled_after, schedule=load_schedule(schedule)))


@runs_app.callback()
def runs_list(ctx: typer.Context, as_json: bool = json_option(help="Print JSON."),
              limit: int = typer.Option(20, "--limit", help="Most recent runs to show.")) -> None:
    """Recent runs with their status, shard progress and counts."""
    if ctx.invoked_subcommand:
        return
    if limit < 1:
        raise UsageError(f"--limit: must be at least 1 (got {limit})")
    db = migrated_db(create=False)
    with db.connect() as conn:
        rows = conn.execute("SELECT id, kind, status, started_at, finished_at, shards, shards_done, shards_failed,"
                            " shards_remaining, counts, rounds, rounds_done, next_due_at, vantages, sources"
                            " FROM run_progress ORDER BY id DESC LIMIT %s", (limit,)).fetchall()
    keys = ["id", "kind", "status", "started_at", "finished_at", "shards", "shards_done", "shards_failed",
            "shards_remaining", "counts", "rounds", "rounds_done", "next_due_at", "vantages", "sources"]
    if as_json:
        print(json.dumps([dict(zip(keys, r)) for r in rows], default=str))
        return
    t = Table("id", "kind", "status", "started", "shards done/total", "rounds done/planned, next due", "vantage",
              "counts")
    for r in rows:
        rounds = "-" if r[10] is None else f"{r[11]}/{r[10]}" + (f", next {str(r[12])[:19]}" if r[12] else "")
        where = ", ".join(r[13] or []) + (f" ({', '.join(r[14])})" if r[14] else "")
        t.add_row(str(r[0]), r[1], r[2], str(r[3])[:19],
                  "-" if r[5] is None else f"{r[6]}/{r[5] * (r[10] or 1)}", rounds, where or "-",
                  json.dumps(r[9])[:60])
    out.print(t)


@runs_app.command("cancel")
def runs_cancel(run_id: int = typer.Argument(..., help="scan_run id.")) -> None:
    """Cancel a queued or running run: shards not yet started never start."""
    from .jobs import cancel_run

    n = cancel_run(migrated_db(create=False), run_id)   # a run to cancel is in a database that exists
    out.print(f"run {run_id} cancelled; {n} pending shards cancelled")


@schedule_app.command("list")
def schedule_list(schedule: Optional[Path] = typer.Option(None, "--schedule", dir_okay=False, help="Schedule file."),
                  as_json: bool = json_option(help="Print JSON.")) -> None:
    """Declared campaigns and when each is due next (cron entries, UTC)."""
    from .jobs import load_schedule, next_due

    entries = load_schedule(schedule)
    rows: list[dict]   # dicts of mixed value types
    rows = [{"name": e.name, "command": " ".join(e.command), "cron": e.cron, "rounds": e.rounds,
             "interval": e.interval, "shards": e.shards,
             "next_due": (next_due(e).isoformat() if e.cron else "on 'schedule start'")} for e in entries]  # type: ignore[union-attr]  # cron: due
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
                   schedule: Optional[Path] = typer.Option(None, "--schedule", dir_okay=False, help="Schedule file.")) -> None:
    """Queue a 'rounds x interval' campaign as one run with rounds (workers run each round on time)."""
    from .campaign import start_rounds
    from .jobs import load_schedule

    entries = {e.name: e for e in load_schedule(schedule)}
    if name not in entries:
        raise UsageError(f"no schedule entry named {name!r}")
    e = entries[name]
    run_id = start_rounds(migrated_db(), e)
    out.print(f"{name}: queued as run {run_id}: {e.rounds} rounds x {e.interval}, {e.shards} shards each; "
              f"'netsurvey runs' shows its progress")


def _register_subapps() -> None:
    """Commands and measurements of every plugin (entry points; see plugins.py), and the
    job queue as the runner of --shards/--procs."""
    from .measure import set_dispatcher
    from .plugins import plugins

    def submit(*args, **kwargs) -> None:   # the job queue (procrastinate) loads only when used
        from .jobs import submit as queue_submit

        queue_submit(*args, **kwargs)

    set_dispatcher(submit)
    for m in plugins():
        m.register(app, scan_app)


_register_subapps()


def _prepare_commands(cmd) -> None:
    """Two conventions for every command, applied once here:

    - help texts are plain text: Rich markup would swallow units such as "[ms]" and "[s]"
      (typer renders help with Rich markup), so every bracket is escaped;
    - an option that takes one value may be given once: a repeat is refused (exit 2)
      instead of silently keeping the last (``multiple`` options accumulate)."""
    from rich.markup import escape

    for p in cmd.params:
        if getattr(p, "help", None):
            p.help = escape(p.help)
    for attr in ("help", "short_help"):
        if getattr(cmd, attr, None):
            setattr(cmd, attr, escape(getattr(cmd, attr)))
    subs = getattr(cmd, "commands", None)
    for sub in (subs or {}).values():
        _prepare_commands(sub)
    single = [p for p in cmd.params if getattr(p, "opts", None) and getattr(p, "param_type_name", "") == "option"
              and not p.multiple and not getattr(p, "count", False)]
    for p in cmd.params:   # one convention for lists: repeat the option, or give A,B,C once
        if getattr(p, "param_type_name", "") == "option" and getattr(p, "multiple", False) \
                and p.name not in _COMMAS_INSIDE:
            p.process_value = _comma_lists(p.process_value)
    for p in cmd.params:   # the value rules every option and argument follows
        p.process_value = _value_rules(p, p.process_value)
    parse = cmd.parse_args

    def parse_args(ctx, args, _parse=parse, _single=single, _subs=subs):
        if _subs:   # a group's own options stand before its subcommand's name
            args_own = next((args[:i] for i, a in enumerate(args) if a in _subs), args)
        else:
            args_own = args
        _refuse_repeats(ctx, args_own, _single)
        return _parse(ctx, args)

    cmd.parse_args = parse_args


#: Repeatable options whose one value may itself hold commas (a URL's query, Atlas's
#: "probes:1,2,3"): repeated only, never split.
_COMMAS_INSIDE = {"url", "probes"}


def _comma_lists(process_value):
    """A repeatable option also takes comma-separated values (--name a.test,b.test is
    --name a.test --name b.test), like the comma-separated list options (--tls 1.2,1.3)."""
    def split(ctx, value, _pv=process_value):
        if isinstance(value, (list, tuple)):
            parts = (part for v in value for part in (v.split(",") if isinstance(v, str) else [v]))
            value = type(value)(part.strip() if isinstance(part, str) else part for part in parts
                                if not isinstance(part, str) or part.strip())
        return _pv(ctx, value)
    return split


#: lone surrogates: bytes of the command line that are not UTF-8 (decoded with surrogateescape)
_NOT_UTF8 = re.compile("[\udc80-\udcff]")
#: control characters, C0 and C1 (a newline would split a one-line error, a stored value, a
#: log line; U+009B is the 8-bit CSI of a terminal), and the line and paragraph separators
#: (str.splitlines breaks there)
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029]")


def _annotation_kind(p) -> Optional[type]:
    """float or Path when the option's values are numbers or paths (also Optional/List of
    them), else None."""
    import typing

    td = getattr(p, "type_descriptor", None)
    t = getattr(td, "annotation", None)
    for _ in range(3):
        args = [a for a in typing.get_args(t) if a is not type(None)]
        if typing.get_origin(t) in (typing.Union, list, tuple) and len(args) == 1:
            t = args[0]
    return t if t in (float, Path) else None


def _numeric(p) -> bool:
    """The option parses numbers with a parser of its own (a duration, a rate)."""
    info = getattr(getattr(p, "type_descriptor", None), "parameter_info", None)
    from .options import parse_duration, parse_duration_or_zero, parse_rate

    return getattr(info, "parser", None) in (parse_duration, parse_duration_or_zero, parse_rate)


def _value_rules(p, process_value):
    """Rules every value of every option follows, applied before its own parser: valid
    UTF-8, no control characters (in options; an argument may be free text: a query, the
    argv of a command to run), no empty path, and numbers finite (``nan``, ``inf`` and
    ``1e309`` reached JSON columns and models: an internal error or a NaN in the output)."""
    import math

    from .clicompat import click_exceptions

    kind = _annotation_kind(p)
    is_option = getattr(p, "param_type_name", "") == "option"

    name = next((o for o in getattr(p, "opts", []) if o.startswith("--")), None) or p.name

    def bad(ctx, text):
        raise click_exceptions.UsageError(f"{name}: {text}", ctx)

    def check(ctx, value, _pv=process_value):
        for raw in (value if isinstance(value, (list, tuple)) else [value]):
            if not isinstance(raw, str):
                continue
            if _NOT_UTF8.search(raw):
                bad(ctx, "the value is not UTF-8 text")
            if is_option and _CONTROL.search(raw):   # arguments may be free text (a query, a command's argv)
                bad(ctx, f"{raw.encode('unicode_escape').decode()[:60]} holds a control character")
            if kind is Path and not raw.strip():
                bad(ctx, "the path is empty")
            if kind is float or _numeric(p):   # before its own parser: one message for every number
                try:
                    finite = math.isfinite(float(raw))
                except ValueError:
                    finite = True   # not a number at all: its parser says what it wants
                if not finite:
                    bad(ctx, f"{raw.strip()} is not a finite number")
        out = _pv(ctx, value)
        if kind is float:
            for v in (out if isinstance(out, (list, tuple)) else [out]):
                if isinstance(v, float) and not math.isfinite(v):
                    bad(ctx, f"{v!r} is not a finite number")
        return out
    return check


def _refuse_repeats(ctx, args: list[str], options) -> None:
    from .clicompat import click_exceptions

    args = args[:args.index("--")] if "--" in args else args
    for p in options:
        names = [*p.opts, *p.secondary_opts]
        n = sum(1 for a in args if a in names or (a.startswith("--") and a.split("=", 1)[0] in names and "=" in a))
        if n > 1:
            raise click_exceptions.UsageError(f"{p.opts[-1]} given {n} times; it takes one value (give it once)", ctx)


def _one_line(text: str) -> str:
    """An error message as one printable line: control characters and bytes that are not
    UTF-8 (from a hostile value echoed back) escaped."""
    text = text.encode("utf-8", "backslashreplace").decode("utf-8")
    return _CONTROL.sub(lambda m: m.group().encode("unicode_escape").decode(), text)


def main() -> None:
    from .clicompat import Abort as _Abort, Exit as _Exit, click_exceptions as click

    try:
        cmd = typer.main.get_command(app)
        _prepare_commands(cmd)
        rv = cmd.main(args=sys.argv[1:], prog_name="netsurvey", standalone_mode=False)
        if isinstance(rv, int) and rv:
            sys.exit(rv)
    except click.NoArgsIsHelpError as exc:  # 'netsurvey scan' alone: its help
        print(exc.ctx.get_help() if exc.ctx else str(exc))
        sys.exit(2)
    except click.UsageError as exc:  # bad option or value: one line, exit 2
        where = f"{exc.ctx.command_path}: " if exc.ctx is not None else ""
        err.print(_one_line(f"netsurvey: error: {where}{exc.format_message()}"), highlight=False, markup=False, soft_wrap=True)
        sys.exit(2)
    except _Exit as exc:
        sys.exit(exc.exit_code)
    except _Abort:
        err.print("netsurvey: aborted", highlight=False, markup=False)
        sys.exit(130)
    except click.ClickException as exc:
        err.print(_one_line(f"netsurvey: error: {exc.format_message()}"), highlight=False, markup=False, soft_wrap=True)
        sys.exit(exc.exit_code)
    except UsageError as exc:
        err.print(_one_line(f"netsurvey: error: {exc}"), highlight=False, markup=False, soft_wrap=True)
        sys.exit(2)
    except MigrationError as exc:
        err.print(_one_line(f"netsurvey: error: {exc}"), highlight=False, markup=False, soft_wrap=True)
        sys.exit(1)
    except Exception as exc:  # a bug of ours: one line for the user, the trace on request
        if os.environ.get("NETSURVEY_TRACEBACK"):
            raise
        from .secrets import mask_text

        said = mask_text(str(exc))
        err.print(_one_line(f"netsurvey: internal error ({type(exc).__name__}: {said}); this is a bug in "
                            "netsurvey: rerun with NETSURVEY_TRACEBACK=1 and report what it prints"),
                  highlight=False, markup=False, soft_wrap=True)
        sys.exit(1)


if __name__ == "__main__":
    main()
