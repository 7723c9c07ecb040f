"""The run context: everything a measurement's execution needs to know about *how* it
runs (dry run, which shard of which run, which config file), set once by the run path in
:mod:`netsurvey.measure` and read by the core (``open_scan``, ``ResultWriter``,
``select_targets``, ``Run``). Nothing travels in environment variables any more: a shard
process receives its context as a serialised :class:`RunSpec` and activates it.

One context is active per process at a time (a command runs one measurement).
"""
from __future__ import annotations

import contextlib
import json
import signal
from dataclasses import asdict, dataclass, field
from typing import Any, Iterator, Optional


@dataclass(frozen=True)
class ShardSpec:
    """Shard ``index`` of ``count`` of the queued run ``run_id`` (attempt ``attempt``), in
    round ``round`` of a campaign run (0 = a run without rounds; see campaign.py).

    ``keep_on_interrupt``: a shard stopped by a signal commits what it has (its rows, the
    targets in flight as interrupted) as a 'failed' shard, as an inline run keeps its rows.
    True for ``--procs`` (nothing retries those shards); False for queued shards, which
    commit nothing when stopped because a worker retries them whole."""

    index: int
    count: int
    run_id: int
    attempt: int = 1
    round: int = 0
    keep_on_interrupt: bool = False


@dataclass(frozen=True)
class RunSpec:
    """A measurement invocation as data: the measurement's name and its parsed options
    (JSON values). Queued with a sharded run and handed to each shard process."""

    measurement: str
    params: dict[str, Any]
    #: the survey config the submitter used (path, sha256), recorded with the run
    config_path: Optional[str] = None
    config_sha256: Optional[str] = None

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str | dict) -> "RunSpec":
        d = json.loads(text) if isinstance(text, str) else dict(text)
        return cls(**d)


@dataclass
class RunContext:
    """How the current measurement runs. ``runs`` collects the runs it opened, so the run
    path can end them ``failed`` when the process is interrupted."""

    measurement: str
    dry_run: bool = False
    shard: Optional[ShardSpec] = None
    runs: list = field(default_factory=list)
    #: set by the run path's signal handler: SIGTERM/SIGINT arrived (a shard then commits nothing)
    interrupted: bool = False
    #: ``--json``: the run path prints the summary as JSON (a measurement keeps its stdout
    #: for it: no progress bar or per-target lines there)
    json: bool = False


_current: Optional[RunContext] = None


def current() -> Optional[RunContext]:
    """The active run context, or None outside a measurement (library use, tests)."""
    return _current


def current_shard() -> Optional[ShardSpec]:
    return _current.shard if _current is not None else None


def current_round() -> int:
    """The campaign round this process runs (1..N), or 0 outside a campaign run: a
    measurement whose rows carry a round number (e.g. tfo_probe.round) writes this."""
    return _current.shard.round if _current is not None and _current.shard is not None else 0


def json_output() -> bool:
    """The summary is printed as JSON (``--json``): progress and per-item lines stay quiet."""
    return bool(_current is not None and _current.json)


def is_dry_run() -> bool:
    return bool(_current is not None and _current.dry_run)


@contextlib.contextmanager
def activate(ctx: RunContext) -> Iterator[RunContext]:
    """Make ``ctx`` the active context for the duration of the block."""
    global _current
    saved, _current = _current, ctx
    try:
        yield ctx
    finally:
        _current = saved


class DryRunDone(Exception):
    """Raised by ``open_scan`` once a dry run has printed its plan and recorded the
    cancelled run: the run path ends the command with exit code 0, nothing contacted."""


class Terminated(BaseException):
    """SIGTERM or SIGINT arrived while a measurement ran (not an ``Exception``: a scanner's
    ``except Exception`` must not swallow it). Raised where the main thread stands; inside
    an event loop's task it ends that task, and ``asyncio.run`` returns it."""

    def __init__(self, signum: int):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


class LoopTerminated(Terminated, KeyboardInterrupt):
    """:class:`Terminated` raised from an event-loop callback of its own: a
    ``KeyboardInterrupt`` so that the loop lets it out of ``run_forever`` (any other
    exception of a callback is only logged), after which ``asyncio.run`` cancels the tasks.
    Raised inside a task instead it would stay that task's exception (a scan worker even
    recorded it and the scan went on: issue 26)."""


def counts_json(counts: Optional[dict]) -> str:
    """A run's counts as JSON PostgreSQL takes: a value JSON cannot hold (a set, a date) as
    text, a NaN or infinity (jsonb refuses them) as text too. A run whose counts failed to
    serialise stayed 'running' with every count lost."""
    import math

    def clean(v: Any) -> Any:
        if isinstance(v, float) and not math.isfinite(v):
            return str(v)
        if isinstance(v, dict):
            return {str(k): clean(x) for k, x in v.items()}
        if isinstance(v, (list, tuple)):
            return [clean(x) for x in v]
        return v
    return json.dumps(clean(counts or {}), default=str)
