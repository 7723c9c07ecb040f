"""Helpers of the figure tests: finished runs with hand-made rows, `netsurvey plot` of
given runs, a figure's CSV read back."""
from __future__ import annotations

import csv
import datetime as dt
import json
from pathlib import Path

from conftest import run_cli

T0 = dt.datetime(2026, 11, 1, tzinfo=dt.timezone.utc)


def _run(conn, kind: str, netns: str | None = "nstb-vantage", **params) -> int:
    return conn.execute("INSERT INTO scan_run (kind, status, parameters, vantage, started_at, finished_at)"
                        " VALUES (%s, 'finished', %s, %s, %s, %s) RETURNING id",
                        (kind, json.dumps(params), json.dumps({"host": "v1", "netns": netns}), T0, T0)).fetchone()[0]


def _tfo_run(conn, n_hosts: int, tfo_ranks: set[int]) -> int:
    rid = _run(conn, "tfo", list="sample")
    for rank in range(1, n_hosts + 1):
        has = rank in tfo_ranks
        conn.execute("INSERT INTO tfo_probe (run_id, rank, hostname, address, port, status, reply, cookie, cookie_len)"
                     " VALUES (%s, %s, %s, '198.18.3.1', 80, 'success', 'syn-ack', %s, %s)",
                     (rid, rank, f"h{rank}.test", b"\x01\x02\x03\x04" if has else None, 4 if has else None))
    return rid


def _csv(path: Path) -> list[dict]:
    with path.open(newline="") as fh:
        return list(csv.DictReader(fh))


def _plot(db, name: str, out: Path, *runs: int):
    r = run_cli("plot", name, *[a for rid in runs for a in ("--run", str(rid))], "--out", str(out), "--json",
                dsn=db.dsn)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def _key_run(conn, spans: dict[str, float]) -> int:
    """A tls run in which each host's one key_name was seen at T0 and T0 + span."""
    rid = _run(conn, "tls", list="tls")
    for i, (host, span) in enumerate(spans.items()):
        for t in (T0, T0 + dt.timedelta(seconds=span)):
            conn.execute("INSERT INTO tls_handshake (run_id, hostname, port, version, status, ticket_count, key_name,"
                         " ticket_lifetime, observed_at) VALUES (%s, %s, 443, '1.2', 'success', 1, %s, 7200, %s)",
                         (rid, host, bytes([i + 1]) * 16, t))
    return rid
