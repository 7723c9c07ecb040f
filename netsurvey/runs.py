"""Run bookkeeping: one ``scan_run`` row per scanner execution."""
from __future__ import annotations

import json
import platform
import socket
import sys
from dataclasses import dataclass
from importlib import metadata
from typing import Any, Optional

from .db import Database


def tool_versions(*packages: str) -> dict[str, str]:
    """Versions of netsurvey, Python and the given distributions."""
    out = {"netsurvey": metadata.version("netsurvey"), "python": platform.python_version()}
    for p in packages:
        try:
            out[p] = metadata.version(p)
        except metadata.PackageNotFoundError:
            out[p] = "missing"
    return out


def vantage_description(namespace: Optional[str] = None) -> dict[str, Any]:
    return {"host": socket.gethostname(), "platform": platform.platform(), "netns": namespace,
            "argv": sys.argv[1:]}


@dataclass
class Run:
    """An open scan run; ``finish`` records status and counts."""

    db: Database
    id: int

    def finish(self, status: str = "finished", counts: Optional[dict] = None) -> None:
        """Record the end of the run. In shard mode (see shard.py) this commits the shard's
        results and its job_shard row atomically instead; a shard committed before is not
        committed again."""
        from . import shard

        if shard.current() is not None:
            shard.commit_shard(self.db.dsn, "finished" if status == "finished" else "failed", counts or {})
            return
        with self.db.connect() as conn:
            conn.execute(
                "UPDATE scan_run SET status=%s, finished_at=now(), counts=%s WHERE id=%s",
                (status, json.dumps(counts or {}), self.id),
            )


def start_run(db: Database, kind: str, parameters: dict, *, packages: tuple[str, ...] = (),
              namespace: Optional[str] = None) -> Run:
    from . import shard

    spec = shard.current()
    if spec is not None:   # a shard of a queued run: reuse it
        with db.connect() as conn:
            conn.execute("UPDATE scan_run SET status = 'running', parameters = %s, vantage = %s, tool_versions = %s"
                         " WHERE id = %s AND status = 'queued'",
                         (json.dumps(parameters, default=str), json.dumps(vantage_description(namespace)),
                          json.dumps(tool_versions(*packages)), spec.run_id))
        return Run(db, spec.run_id)
    with db.connect() as conn:
        run_id = conn.execute(
            "INSERT INTO scan_run (kind, parameters, vantage, tool_versions) VALUES (%s,%s,%s,%s) RETURNING id",
            (kind, json.dumps(parameters, default=str), json.dumps(vantage_description(namespace)),
             json.dumps(tool_versions(*packages))),
        ).fetchone()[0]
    return Run(db, run_id)
