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
        with self.db.connect() as conn:
            conn.execute(
                "UPDATE scan_run SET status=%s, finished_at=now(), counts=%s WHERE id=%s",
                (status, json.dumps(counts or {}), self.id),
            )


def start_run(db: Database, kind: str, parameters: dict, *, packages: tuple[str, ...] = (),
              namespace: Optional[str] = None) -> Run:
    with db.connect() as conn:
        run_id = conn.execute(
            "INSERT INTO scan_run (kind, parameters, vantage, tool_versions) VALUES (%s,%s,%s,%s) RETURNING id",
            (kind, json.dumps(parameters, default=str), json.dumps(vantage_description(namespace)),
             json.dumps(tool_versions(*packages))),
        ).fetchone()[0]
    return Run(db, run_id)
