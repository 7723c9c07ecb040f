"""State shared by the `netsurvey` command and the commands that scanners, probes and
analysis register (``register(app, scan_app)`` in their ``cli`` modules)."""
from __future__ import annotations

from pathlib import Path
from typing import Optional

from .config import SurveyConfig, load_config
from .db import Database


class State:
    """Options shared by every subcommand (set by the top-level callback)."""

    dsn: Optional[str] = None
    config_path: Optional[Path] = None
    _config: Optional[SurveyConfig] = None
    _db: Optional[Database] = None

    def forget(self) -> None:
        """Drop the cached config and database (a process forked from a running command
        reads them anew from its options and environment)."""
        self._config = self._db = None

    @property
    def config(self) -> SurveyConfig:
        if self._config is None:
            self._config = load_config(self.config_path)
        return self._config

    @property
    def db(self) -> Database:
        return self.database(create=True)

    def database(self, create: bool) -> Database:
        """The database; without ``create`` a missing embedded one is "no database here"."""
        if self._db is None:
            cfg = self.config.database
            self._db = Database.resolve(self.dsn, cfg.data_dir, cfg.dsn, create=create, reader_dsn=cfg.reader_dsn)
        return self._db


state = State()


def migrated_db(create: bool = True) -> Database:
    """The database with every migration applied (scanners call this before writing).
    Commands that only read pass ``create=False``: they never create an embedded database."""
    db = state.database(create)
    db.migrate()
    return db


def open_scan(kind: str, parameters: dict, *, packages: tuple[str, ...] = (), namespace: str | None = None,
              rate_pps: float | None = None):
    """Start a ``scan_run`` and build the ScanContext (policy, rate limiter) for it."""
    import os

    from .etiquette import RateLimiter, TargetPolicy
    from .runs import start_run
    from .scanning import ScanContext

    db = migrated_db()
    cfg = state.config
    policy = TargetPolicy.from_config(cfg.etiquette)
    rate, per_dest = rate_pps or cfg.etiquette.rate_pps, cfg.etiquette.per_destination_pps
    from . import shard

    spec = shard.current()
    if spec is not None:
        # limits are per process: N shards may run at once on N workers, so each gets 1/N
        # and the run as a whole never exceeds the configured rates
        rate, per_dest = rate / spec.count, per_dest / spec.count
    limiter = RateLimiter(rate, per_dest)
    if namespace is None and os.environ.get("NETSURVEY_IN_TESTBED"):
        namespace = "nstb-vantage"
    run = start_run(db, kind, parameters, packages=packages, namespace=namespace)
    return ScanContext(db=db, run=run, config=cfg, policy=policy, limiter=limiter)
