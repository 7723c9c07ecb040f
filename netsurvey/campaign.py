"""Campaigns that are one run (issue 26): a "rounds x interval" entry of
``config/schedule.toml`` (``netsurvey schedule start NAME``) becomes ONE ``scan_run`` with
``rounds`` rounds, not N separate runs.

- Queued through the one run path of sharded scans (:mod:`netsurvey.jobs`): the run is
  recorded 'queued' with its spec, ``scan_run.rounds`` and ``round_interval_s``; a
  ``run_round`` row per round with its due time; and ``shards`` jobs per round, deferred
  to that time, all in one transaction (an interrupted submission leaves nothing).
- Each job runs the measurement as shard i of round k (``ShardSpec.round``); the
  measurement reads :func:`netsurvey.runctx.current_round` for the round number of its
  rows (``scan tfo`` writes it into ``tfo_probe.round``, so the views of Figs 3.2/3.3
  see one campaign run as a load-balancing survey of ``rounds`` connections).
- Exactly once per (run, round, shard): a shard commits its rows with its ``job_shard``
  row (key run_id, round, shard) in one transaction, so a killed worker's shard is retried
  whole and a committed one is never repeated; later rounds are already queued, so any
  worker (or a restarted one) continues with the next round when it is due.
- The run is 'running' from its first shard until ``shards x rounds`` shards are in;
  ``netsurvey runs`` shows rounds done / planned and the next due time
  (``run_progress``; per round: ``run_round_progress``).
"""
from __future__ import annotations

import datetime as dt
import json
from typing import TYPE_CHECKING

from .db import Database
from .errors import UsageError

if TYPE_CHECKING:  # annotations only: .jobs is imported where it is used (start_campaign)
    from .jobs import ScheduleEntry

#: A campaign of more rounds than this is a typo (10 000 x 5 min is a month).
MAX_ROUNDS = 10_000
#: Jobs (rounds x shards) one campaign may queue: all are built in memory and deferred in
#: one transaction (a schedule entry with shards = 100 000 000 grew past 4 GB).
MAX_JOBS = 100_000


def start_campaign(db: Database, spec, shards: int, rounds: int, interval_s: float, *, note: str | None = None,
                   start_at: dt.datetime | None = None) -> int:
    """Queue ``spec`` as one run of ``rounds`` rounds, ``interval_s`` apart (round 1 at
    ``start_at``, default now), each as ``shards`` jobs. Returns the run id."""
    from .jobs import QUEUE, TASK_NAME, _insert_queued_run, ensure_queue_schema, make_app
    from .measure import MAX_SHARDS

    if not 1 <= shards <= MAX_SHARDS:
        raise UsageError(f"shards must be between 1 and {MAX_SHARDS}")
    if not 1 <= rounds <= MAX_ROUNDS:
        raise UsageError(f"rounds must be between 1 and {MAX_ROUNDS}")
    if not interval_s >= 0:
        raise UsageError("interval must be >= 0 seconds")
    if rounds * shards > MAX_JOBS:
        raise UsageError(f"{rounds} rounds x {shards} shards: more than {MAX_JOBS} jobs in one campaign")
    start = start_at or dt.datetime.now(dt.timezone.utc)
    try:   # the last round's due time must be a date (10 000 x 365d is not: OverflowError)
        start + dt.timedelta(seconds=(rounds - 1) * interval_s)
    except OverflowError:
        raise UsageError(f"{rounds} rounds x {interval_s:g} s end after the year 9999") from None
    db.migrate()
    ensure_queue_schema(db, make_app(db.dsn))
    spec_d = json.loads(spec.to_json())
    with db.connect() as conn:
        run_id = _insert_queued_run(conn, spec, shards, note)
        conn.execute("UPDATE scan_run SET rounds = %s, round_interval_s = %s WHERE id = %s",
                     (rounds, interval_s, run_id))
        dues = [(run_id, k, start + dt.timedelta(seconds=(k - 1) * interval_s)) for k in range(1, rounds + 1)]
        with conn.cursor() as cur:
            cur.executemany("INSERT INTO run_round (run_id, round, due_at) VALUES (%s, %s, %s)", dues)
        jobs = [(QUEUE, TASK_NAME, 0, None, f"run{run_id}-round{k}-shard{i}",
                 json.dumps({"run_id": run_id, "shard": i, "shards": shards, "spec": spec_d, "round": k}), due)
                for _, k, due in dues for i in range(shards)]
        for j in range(0, len(jobs), 1000):
            conn.execute("SELECT procrastinate_defer_jobs_v1(%s::procrastinate_job_to_defer_v1[])", (jobs[j:j + 1000],))
    return run_id


def start_rounds(db: Database, entry: "ScheduleEntry") -> int:
    """Queue a 'rounds x interval' entry as ONE campaign run with rounds:
    round k's shards are due at start + (k - 1) * interval (start_campaign). Returns the run id."""
    if entry.rounds is None:
        raise UsageError(f"schedule {entry.name!r} is a cron entry; workers start it on time")
    from .jobs import parse_duration
    from .measure import parse_spec_argv

    assert entry.interval is not None   # ScheduleEntry's validator: rounds come with an interval
    return start_campaign(db, parse_spec_argv(entry.command), entry.shards, entry.rounds,
                          parse_duration(entry.interval), note=entry.name)
