"""Helpers of the `scan tls-lifetime` tests: the testbed's short-lifetime host, the command
run in the testbed's vantage with a config of its own, and a query."""
from __future__ import annotations

import sys
from pathlib import Path


def _short(testbed) -> dict:
    return next(h for h in testbed.status()["ground_truth"]["tls_hosts"] if h["hostname"] == "short.example.test")


def _argv(db, cfg: Path, *args) -> list[str]:
    return [sys.executable, "-m", "netsurvey.cli", "testbed", "exec", "--", sys.executable, "-m", "netsurvey.cli",
            "--config", str(cfg), "--dsn", db.dsn, "scan", "tls-lifetime", *args, "--json"]


def _config(tmp_path: Path, pdp: float) -> Path:
    f = tmp_path / "survey.toml"
    f.write_text(f"[etiquette]\nallow = [\"198.18.0.0/15\", \"2001:2::/48\"]\nper_destination_pps = {pdp}\n")
    return f


def _q(db, sql, *params):
    with db.connect() as conn:
        return conn.execute(sql, params).fetchall()
