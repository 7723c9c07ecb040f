"""`netsurvey testbed zoo-record`: the zoos' documented defaults into the database."""
from __future__ import annotations

import json
from typing import List

import typer

from netsurvey.errors import UsageError
from netsurvey.options import json_option

from .record import ZOOS

_ZOO_HELP = "Only this zoo: " + ", ".join(f"{name} ({what})" for name, what in ZOOS.items()) \
    + " (repeatable; default: every zoo)."


def zoo_record(zoo: List[str] = typer.Option([], "--zoo", help=_ZOO_HELP),
               as_json: bool = json_option(help="Print rows written per zoo as JSON.")) -> None:
    """Write the documented (cited) default of every fact of every zoo server into the
    database (table zoo_documented_default), replacing what an earlier run wrote. `plot
    zoo-table` reads them from there. Needs neither root nor a running zoo."""
    from netsurvey.clictx import migrated_db

    from .record import record

    bad = [z for z in zoo if z not in ZOOS]
    if bad:
        raise UsageError(f"--zoo: unknown zoo {bad[0]!r} (use {', '.join(ZOOS)})")
    counts = record(migrated_db(), tuple(dict.fromkeys(zoo)) or tuple(ZOOS))
    if as_json:
        print(json.dumps({"rows": counts}))
    else:
        print(", ".join(f"{k}: {n} facts" for k, n in counts.items()))


def register(app, scan_app) -> None:
    """A command of `netsurvey testbed` (when the testbed plugin is installed)."""
    try:
        from testbed.cli import testbed_app
    except ImportError:
        return
    testbed_app.command("zoo-record")(zoo_record)
