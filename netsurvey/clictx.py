"""State shared by the `netsurvey` command and the commands that scanners, probes and
analysis register (``register(app, scan_app)`` in their ``cli`` modules)."""
from __future__ import annotations

from pathlib import Path
from typing import Optional

from .config import SurveyConfig, load_config
from .db import Database
from .errors import UsageError


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


def list_db() -> Database:
    """The database a target list (--list) is read from. It is never created for that: a
    list cannot be in a database that does not exist yet, so a scan of a list in a fresh
    directory is bad input (one line, exit 2), not a new embedded server left running."""
    return migrated_db(create=False)


def migrated_db(create: bool = True) -> Database:
    """The database with every migration applied (scanners call this before writing).
    Commands that only read pass ``create=False``: they never create an embedded database."""
    db = state.database(create)
    db.migrate()
    return db


def open_scan(parameters: dict, *, kind: str | None = None, packages: tuple[str, ...] = (),
              namespace: str | None = None, rate_pps: float | None = None, targets=None,
              concurrency: int | None = None):
    """The run path's one door to the network: open the ``scan_run`` and build the
    ScanContext (policy, rate limiter) for it. The run's kind is the running measurement's
    declared kind (``kind`` only for a run opened outside a measurement). The run path
    ends the run (finished / failed / cancelled with ``ctx.counts``); the caller never does.

    - Rates: ``rate_pps`` from the command line may only lower ``etiquette.rate_pps``; in a
      shard, both limits are divided by the number of shards (N shards may run at once, the
      run as a whole never exceeds the configured rates).
    - Dry run: the run is recorded as ``cancelled`` with what would be probed (``targets``,
      ScanTargets or addresses, when the command knows them before probing), the plan is
      printed, and :class:`~netsurvey.measure.DryRunDone` ends the command: nothing after
      this call runs, so nothing is contacted.
    - The config file used and its sha256 are recorded with the run's parameters.
    """
    import hashlib
    import math
    import os

    from . import runctx, shard
    from .etiquette import TargetPolicy, limiter_from_config
    from .runs import start_run
    from .scanning import ScanContext

    if kind is None:
        from .measure import registry

        rc = runctx.current()
        m = registry().get(rc.measurement) if rc is not None else None
        if m is None:
            raise RuntimeError("open_scan outside a declared measurement needs kind=")
        kind = m.kind
    db = migrated_db()
    cfg = state.config
    policy = TargetPolicy.from_config(cfg.etiquette)
    if rate_pps is not None:
        if not (isinstance(rate_pps, (int, float)) and math.isfinite(rate_pps) and rate_pps > 0):
            raise UsageError(f"rate {rate_pps!r}: must be a positive, finite number of packets per second")
    spec = shard.current()
    limiter = limiter_from_config(cfg.etiquette, rate_pps, spec.count if spec is not None else 1)
    rate = limiter.rate
    if namespace is None and os.environ.get("NETSURVEY_IN_TESTBED"):
        namespace = "nstb-vantage"
    parameters = dict(parameters)
    if state.config_path is not None:
        try:
            digest = hashlib.sha256(Path(state.config_path).read_bytes()).hexdigest()
        except OSError:
            digest = None
        parameters["config"] = {"path": str(Path(state.config_path).resolve()), "sha256": digest}
    parameters["rate_pps_effective"] = rate
    ctx = runctx.current()
    if ctx is not None and ctx.dry_run:
        parameters["dry_run"] = True
        run = start_run(db, kind, parameters, packages=packages, namespace=namespace)
        sc = ScanContext(db=db, run=run, config=cfg, policy=policy, limiter=limiter)
        lines, planned = _plan(kind, sc, targets, concurrency)
        run.finish("cancelled", planned)  # recorded before printing: a closed pipe cannot leave it 'running'
        print("\n".join(lines), flush=True)
        from .runctx import DryRunDone

        raise DryRunDone(kind)
    run = start_run(db, kind, parameters, packages=packages, namespace=namespace)
    from .vantage import record as record_vantage

    # name and source addresses (getsockname, towards allowed destinations only), issue 26
    record_vantage(db, run.id, targets, parameters, allowed=policy.allowed,
                   config_name=getattr(cfg, "vantage_name", None))
    return ScanContext(db=db, run=run, config=cfg, policy=policy, limiter=limiter)


def _address_of(t) -> str | None:
    """A target's address for the policy: its address, or its name if that is one."""
    import ipaddress

    addr = t if isinstance(t, str) else getattr(t, "address", None) or getattr(t, "hostname", None)
    try:   # a name "[v6]" resolves to that address (resolve.py), so the plan judges it as one
        return str(ipaddress.ip_address(addr.strip("[]"))) if addr else None
    except ValueError:  # a URL or name: its address is checked when it is resolved
        return None


def _plan_stream(kind: str, ctx, targets, rate: str, flight: str) -> tuple[list[str], dict]:
    """The dry-run plan of a streamed target list (issue 26): counted in SQL (``len``), the
    policy applied to the names that are address literals (read in SQL), the first 20
    read from the stream's cursor; nothing is resolved or contacted."""
    import itertools

    view = targets.plan_view() if hasattr(targets, "plan_view") else targets
    n = len(view)
    literals = view.address_literals() if hasattr(view, "address_literals") else []
    blocked = sum(1 for t in literals if (a := _address_of(t)) and ctx.policy.reason_blocked(a))
    n_allowed = n - blocked
    first = list(itertools.islice((t for t in view if not ((a := _address_of(t)) and ctx.policy.reason_blocked(a))),
                                  20))
    lines = [f"dry run of '{kind}': {n_allowed} targets would be probed, {blocked} blocked by policy; "
             f"{rate}{flight}; estimated >= {n_allowed / ctx.limiter.rate:.1f} s"]
    for t in first:
        lines.append(f"  {t.rank or '-':>7} {t.hostname or '-':40} {t.address or '-':39} {t.port}")
    if n_allowed > 20:
        lines.append(f"  ... and {n_allowed - 20} more")
    return lines, {"dry-run-targets": n_allowed, "blocked": blocked}


def _plan(kind: str, ctx, targets, concurrency: int | None) -> tuple[list[str], dict]:
    """--dry-run: what would be probed, and at what rate (nothing is sent): plain lines for
    stdout, never wrapped, so programs can read them, and the counts recorded."""
    lim = ctx.limiter
    rate = f"rate <= {lim.rate:g}/s overall, <= {lim.per_destination or 0:g}/s per address"
    flight = f", {concurrency} in flight" if concurrency else ""
    if targets is None:
        return [f"dry run of '{kind}': nothing sent; {rate}{flight}; the targets are known only while probing"], \
            {"dry-run": 1}
    import ipaddress

    if not isinstance(targets, (list, tuple)) and hasattr(targets, "__len__"):
        return _plan_stream(kind, ctx, targets, rate, flight)
    allowed, blocked = [], 0
    for t in targets:
        # an address given as the target's name (--target 198.18.2.21) is one too
        addr = t if isinstance(t, str) else getattr(t, "address", None) or getattr(t, "hostname", None)
        try:
            addr = str(ipaddress.ip_address(addr)) if addr else None
        except ValueError:  # a URL or name: its address is checked when it is resolved
            addr = None
        if addr and ctx.policy.reason_blocked(addr):
            blocked += 1
        else:
            allowed.append(t)
    lines = [f"dry run of '{kind}': {len(allowed)} targets would be probed, {blocked} blocked by policy; "
             f"{rate}{flight}; estimated >= {len(allowed) / lim.rate:.1f} s"]
    for t in allowed[:20]:
        if isinstance(t, str):
            lines.append(f"  {'-':>7} {'-':40} {t:39}")
        else:
            lines.append(f"  {t.rank or '-':>7} {t.hostname or '-':40} {t.address or '-':39} {t.port}")
    if len(allowed) > 20:
        lines.append(f"  ... and {len(allowed) - 20} more")
    return lines, {"dry-run-targets": len(allowed), "blocked": blocked}
