"""`netsurvey demo`: what `make demo` runs. Each step reports and a failing step does not
stop the others."""
from __future__ import annotations

from pathlib import Path

from rich.console import Console
from rich.table import Table

SAMPLE_LIST = Path(__file__).resolve().parent.parent / "tests" / "data" / "sample_top.csv"


def run_demo(state, out: Console) -> None:
    from .targets import import_list

    db = state.db
    applied = db.migrate()
    out.rule("netsurvey demo")
    out.print(f"database: {'embedded PostgreSQL' if db.embedded_dir else db.dsn}; "
              f"migrations applied now: {len(applied)}")
    report = import_list(db, SAMPLE_LIST, "sample", max_bad_share=state.config.targets.max_bad_share, replace=True,
                         list_date=None)
    out.print(f"imported {SAMPLE_LIST.name} as list 'sample': {report.imported} targets "
              f"({report.duplicates} duplicates, {report.n_bad} bad lines skipped)")
    with db.connect() as conn:
        rows = conn.execute(
            """SELECT l.name, l.list_date, count(t.*),
                      count(*) FILTER (WHERE t.rank <= 10), min(t.hostname), max(t.hostname)
               FROM target_list l LEFT JOIN target t ON t.list_id = l.id
               GROUP BY l.id ORDER BY l.name, l.list_date""").fetchall()
        top = conn.execute(
            """SELECT t.rank, t.hostname FROM target t JOIN target_list l ON l.id = t.list_id
               WHERE l.id = %s ORDER BY t.rank LIMIT 10""", (report.list_id,)).fetchall()
    t = Table("list", "date", "targets", "in top 10", title="target lists in the database")
    for r in rows:
        t.add_row(r[0], str(r[1]), str(r[2]), str(r[3]))
    out.print(t)
    t2 = Table("rank", "hostname", title="sample: top 10")
    for r in top:
        t2.add_row(str(r[0]), r[1])
    out.print(t2)
