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
              concurrency: int | None = None, plan_note: str | None = None):
    """The run path's one door to the network: open the ``scan_run`` and build the
    ScanContext (policy, rate limiter) for it. The run's kind is the running measurement's
    declared kind (``kind`` only for a run opened outside a measurement). The run path
    ends the run (finished / failed / cancelled with ``ctx.counts``); the caller never does.

    - Rates: ``rate_pps`` from the command line may only lower ``etiquette.rate_pps``; in a
      shard, both limits are divided by the number of shards (N shards may run at once, the
      run as a whole never exceeds the configured rates).
    - Dry run: the plan (:func:`_plan`) judges ``targets`` (ScanTargets or addresses, when
      the command knows them before probing) as the run will: names the run resolves are
      resolved by the run's own code (a :class:`~netsurvey.scanning.ResolvingStream` or
      :class:`~netsurvey.scanning.ResolvedOnce`: the resolver is asked, no target is
      contacted), every address is judged by the run's policy and each blocked one counted
      under the rule that blocks it. The run is recorded as ``cancelled`` with those counts,
      the plan is printed (with ``plan_note``: what it cannot count), and
      :class:`~netsurvey.measure.DryRunDone` ends the command: nothing after this call runs,
      so nothing is contacted.
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
        # planned before the run is recorded: resolving a long list takes a while, and a
        # dry run stopped meanwhile leaves no run behind
        lines, planned = _plan(kind, policy, limiter, targets, concurrency, plan_note)
        run = start_run(db, kind, parameters, packages=packages, namespace=namespace)
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
    """A listed target's address for the policy: its address, or its name if that spells
    one (the run's resolver answers such a name with that address: resolve.py)."""
    import ipaddress

    addr = t if isinstance(t, str) else getattr(t, "address", None) or getattr(t, "hostname", None)
    try:   # a name "[v6]" resolves to that address (resolve.py), so the plan judges it as one
        return str(ipaddress.ip_address(addr.strip("[]"))) if addr else None
    except ValueError:  # a URL or a name the run looks up as it probes
        return None


class _Tally:
    """What the plan counts: targets the run would probe (the first 20 kept to list), and
    those the policy blocks, by rule (TargetPolicy.blocking_rule), the first 20 kept too."""

    SHOWN = 20

    def __init__(self, policy):
        from collections import Counter

        self.rule_of = policy.blocking_rule
        self.allowed = 0
        self.by_rule: Counter = Counter()
        self.unresolved = 0
        self.first: list = []
        self.first_blocked: list = []

    def add(self, t, address: str | None) -> None:
        rule = self.rule_of(address) if address else None
        if rule is None:
            self.allowed += 1
            if len(self.first) < self.SHOWN:
                self.first.append(t)
        else:
            self.by_rule[rule] += 1
            if len(self.first_blocked) < self.SHOWN:
                self.first_blocked.append((t, address, rule))

    @property
    def blocked(self) -> int:
        return sum(self.by_rule.values())

    def _rules(self) -> list[str]:
        """Every rule of the policy, in the order it applies them (then any other reason)."""
        from .etiquette import BLOCK_RULES

        return [*BLOCK_RULES, *sorted(set(self.by_rule) - set(BLOCK_RULES))]

    def counts(self) -> dict:
        """The cancelled run's counts: would-be-probed, blocked, blocked per rule (every
        rule, zeros included), and names that did not resolve (when some did not)."""
        out = {"dry-run-targets": self.allowed, "blocked": self.blocked}
        out.update({f"blocked-{r}": self.by_rule.get(r, 0) for r in self._rules()})
        if self.unresolved:
            out["resolution-failed"] = self.unresolved
        return out

    def breakdown(self) -> str:
        """' (not in etiquette.allow: 0, reserved range: 1, ...)' when something is blocked."""
        from .etiquette import BLOCK_RULES

        if not self.blocked:
            return ""
        return " (" + ", ".join(f"{BLOCK_RULES.get(r, r)}: {self.by_rule.get(r, 0)}" for r in self._rules()) + ")"


def _line(t, address: str | None = None) -> str:
    """One target of the plan: rank, name, address (``address``: the one judged, when the
    target spells it as its name), port."""
    if isinstance(t, str):
        return f"{'-':>7} {'-':40} {t:39}"
    return f"{t.rank or '-':>7} {t.hostname or '-':40} {t.address or address or '-':39} {t.port}"


def _plan(kind: str, policy, limiter, targets, concurrency: int | None,
          note: str | None = None) -> tuple[list[str], dict]:
    """--dry-run: what would be probed, what the policy blocks and by which rule, and at
    what rate (nothing is sent to a target): plain lines for stdout, never wrapped, so
    programs can read them, and the counts recorded. ``targets`` are judged as the run
    judges them:

    - a :class:`~netsurvey.scanning.ResolvingStream` / :class:`~netsurvey.scanning.ResolvedOnce`
      (names the run resolves before probing): resolved by the run's own code, each
      address judged, names without one counted as the run records them (resolution-failed);
    - another stream (e.g. the names a DNS measurement asks about, counted in SQL): only
      the targets given with an address are judged, as :func:`~netsurvey.scanning.run_scan`
      judges only those; a name is asked about, never contacted;
    - a list: each target's address (or its name, when that spells an address);
    - a :class:`~netsurvey.zmap.ZmapRange`: the network's addresses, counted per rule.
    """
    rate = f"rate <= {limiter.rate:g}/s overall, <= {limiter.per_destination or 0:g}/s per address"
    flight = f", {concurrency} in flight" if concurrency else ""
    note = note or getattr(targets, "plan_note", None)
    if targets is None:
        lines = [f"dry run of '{kind}': nothing sent; {rate}{flight}; the targets are known only while probing"]
        return lines + ([f"  note: {note}"] if note else []), {"dry-run": 1}
    tally = _Tally(policy)
    listed = True
    if hasattr(targets, "plan_range"):   # a network zmap scans first (netsurvey.zmap.ZmapRange)
        tally.allowed, by_rule = targets.plan_range(policy)
        tally.by_rule.update({r: n for r, n in by_rule.items() if n})
        listed = False
    elif hasattr(targets, "plan_resolved"):
        def failed(o) -> None:
            tally.unresolved += 1

        for t in targets.plan_resolved(failed):
            tally.add(t, t.address)
    elif not isinstance(targets, (list, tuple)) and hasattr(targets, "__len__"):
        import itertools

        view = targets.plan_view() if hasattr(targets, "plan_view") else targets
        total = len(view)   # counted in SQL for a list (issue 26): never iterated whole
        for t in (view.addressed() if hasattr(view, "addressed") else []):
            tally.add(t, t.address)
        tally.allowed = total - tally.blocked
        tally.first = list(itertools.islice((t for t in view if not ((a := getattr(t, "address", None))
                                                                     and policy.blocking_rule(a))), _Tally.SHOWN))
    else:
        for t in targets:
            tally.add(t, _address_of(t))
    n = tally.allowed
    head = (f"dry run of '{kind}': {n} targets would be probed, {tally.blocked} blocked by policy{tally.breakdown()}"
            + (f", {tally.unresolved} names did not resolve" if tally.unresolved else "")
            + f"; {rate}{flight}; estimated >= {n / limiter.rate:.1f} s")
    lines = [head]
    lines += [f"  {_line(t)}" for t in tally.first]
    if listed and n > len(tally.first):
        lines.append(f"  ... and {n - len(tally.first)} more")
    from .etiquette import BLOCK_RULES

    for t, address, rule in tally.first_blocked:
        lines.append(f"  blocked ({BLOCK_RULES.get(rule, rule)}): {_line(t, address)}")
    if listed and tally.blocked > len(tally.first_blocked):
        lines.append(f"  ... and {tally.blocked - len(tally.first_blocked)} more blocked")
    if note:
        lines.append(f"  note: {note}")
    return lines, tally.counts()
