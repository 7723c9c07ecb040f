"""`netsurvey demo` step: the zoos' documented defaults into the demo's database, so the
report's zoo table shows them beside the measurements."""
from __future__ import annotations

STEP = "zoo documented defaults (testbed zoo-record)"
ORDER = 11   # right after the testbed step


def run(state, out) -> str:
    from .record import record

    state.db.migrate()
    counts = record(state.db)
    return ", ".join(f"{k}: {n} facts" for k, n in counts.items())
