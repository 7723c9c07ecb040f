"""Helpers of the campaign tests: a schedule.toml entry, `schedule start`, a run's progress
as `netsurvey runs --json` shows it, and a query."""
from __future__ import annotations

import json

from conftest import run_cli


def schedule_file(tmp_path, name: str, rounds: int, interval: str, shards: int, command: list[str]):
    f = tmp_path / "schedule.toml"
    f.write_text(f'[[schedule]]\nname = "{name}"\nrounds = {rounds}\ninterval = "{interval}"\n'
                 f"command = {json.dumps(command)}\nshards = {shards}\n")
    return f


def start(db, sched, name: str, env=None) -> int:
    r = run_cli("schedule", "start", name, "--schedule", str(sched), dsn=db.dsn, env=env)
    assert r.returncode == 0, r.stderr
    assert "queued as run " in r.stdout, r.stdout
    return int(r.stdout.split("queued as run ")[1].split(":")[0])


def progress(db, run_id: int) -> dict:
    r = run_cli("runs", "--json", "--limit", "50", dsn=db.dsn)
    assert r.returncode == 0, r.stderr
    return next(x for x in json.loads(r.stdout) if x["id"] == run_id)


def q(db, sql, *p):
    with db.connect() as conn:
        return conn.execute(sql, p).fetchall()
