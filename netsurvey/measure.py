"""Measurements are declared once, and every one runs through this one run path.

A measurement (after zgrab2's ``modules/<proto>/module.go``) is a function whose typer
options are its CLI, declared with :func:`measurement`::

    def register(app, scan_app):
        @measurement(scan_app, "tcp-connect", tables=("tcp_connect_probe",))
        def tcp_connect(list_name: str = typer.Option(..., "--list"), ...):
            ctx = open_scan(params, targets=targets)   # run 'tcp-connect': policy, limiter, dry run
            ...

The declaration adds the options every measurement shares — ``--dry-run``, ``--shards N``
(queue N shards for workers), ``--procs N`` (run N shards here at once), ``--json`` (the
summary as JSON) — so they appear in ``--help`` and parse like any option (``--shards=2``),
and records the measurement in
the registry that ``netsurvey scan``, the workers and the promise tests read. A measurement
that contacts the network also declares its :class:`PromiseCase` (``promise=``): how the
promise matrix (tests/promises/test_promises.py) aims it at the testbed.

The run path (:func:`_execute`), for every measurement:

- ``--shards N``: the options are validated by parsing (unknown measurement or option:
  exit 2), then the run and all N shard jobs are queued in one transaction;
- ``--procs N``: the same spec, run here as N shard processes;
- inline: the options run with an explicit :class:`~netsurvey.runctx.RunContext` (dry run,
  shard), SIGTERM/SIGINT turned into an exception that flushes every open writer and ends
  the runs the measurement opened ``failed`` (a shard instead commits nothing: it is
  retried); ``open_scan`` opens the run, applies the policy and the rate caps, and stops a
  dry run before anything is contacted;
- the summary: the measurement returns its result (a dict: ``run_id``, ``counts`` and what
  else it reports), or returns nothing and leaves its counts in ``ctx.counts`` (the
  summary is then ``{"run_id": ..., "counts": ...}`` of the last run it opened). Once the
  runs are ended, the run path prints it once: one line of JSON with ``--json``, else text
  (:func:`text_summary`, or the measurement's ``render_text`` hook when it shows a table).
  A measurement never prints its summary itself.

Shard processes receive a :class:`~netsurvey.runctx.RunSpec` (the measurement's name and
its parsed options as JSON), never an argv, and run :func:`run_spec`.
"""
from __future__ import annotations

import contextlib
import enum
import functools
import inspect
import os
import signal
import typing
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import AbstractSet, Any, Callable, Iterable, Iterator, Mapping, Optional, Sequence, Union

import typer

from .errors import UsageError
from .options import json_option
from .runctx import DryRunDone, RunContext, RunSpec, ShardSpec, Terminated, activate  # noqa: F401 (re-exported)

#: Upper bounds of the shared options: more shards than this is a typo, not a campaign;
#: more local processes than 4 per core only adds contention.
MAX_SHARDS = 10_000
MAX_PROCS = max(1, 4 * (os.cpu_count() or 1))


#: The run path's promises the promise matrix checks for every measurement that contacts the
#: network (docs/reliability.md), by the names a :class:`PromiseCase`'s ``na`` uses.
PROMISES = ("dry_run", "blocked", "rate", "sigterm", "worker_config", "procs_secret")

#: ``rate_hosts`` / ``term_hosts`` value meaning every TLS host of the testbed's ground truth
ALL_TLS_HOSTS = "ALL_TLS"


@dataclass(frozen=True)
class PromiseCase:
    """How the promise matrix (tests/promises/test_promises.py) aims a measurement at the
    testbed; plain data, declared with the measurement (``@measurement(..., promise=...)``).

    :ivar cmd: the command words (``("scan", "tls")``).
    :ivar args: its options for the dry-run, blocked, worker and ``--procs`` cases; ``{list}``
        stands for the target list the matrix imports from ``hosts``.
    :ivar block: the testbed host (or address) whose addresses the blocked cases block.
    :ivar hosts: testbed host names imported as the target list ``{list}``.
    :ivar targets: target addresses besides the hosts' (a nameserver, ``HOST=ADDRESS`` targets).
    :ivar rate_args: options for the rate case (enough attempts that an unpaced run breaks
        the caps), with ``rate_targets`` its target addresses and ``rate_hosts`` its list
        (default: ``hosts``; ``"ALL_TLS"``: every TLS host of the testbed).
    :ivar term_args: options for the SIGTERM case (a run that lasts), with ``term_hosts`` its
        list (default ``hosts``; ``"ALL_TLS"`` as above); default ``rate_args``, then ``args``.
    :ivar dns_targets: the targets are DNS servers (the hosts are names to look up), so a dry
        run may not query the resolver either.
    :ivar refuse_ok: when everything the command would contact is blocked, refusing (exit 2,
        one line, nothing contacted) is correct.
    :ivar env_from_files: environment variable -> file whose stripped text is its value (a
        key the testbed provides); a variable whose file is missing is left unset.
    :ivar requires: path (absolute, or relative to the checkout) -> why the cases are skipped
        when it does not exist (a tool that is built separately).
    :ivar na: promise (one of :data:`PROMISES`) -> why it does not apply (shown as a skip).
    :ivar slow: its cases take long: they run only with the ``slow`` tests.
    """

    # declared as any sequence / set (lists and sets read well in a declaration); stored as
    # tuples and frozensets
    cmd: Sequence[str]
    args: Sequence[str]
    block: str
    hosts: Sequence[str] = ()
    targets: AbstractSet[str] = frozenset()
    rate_args: Optional[Sequence[str]] = None
    rate_targets: Optional[AbstractSet[str]] = None
    rate_hosts: Union[Sequence[str], str, None] = None
    term_hosts: Union[Sequence[str], str, None] = None
    term_args: Optional[Sequence[str]] = None
    dns_targets: bool = False
    refuse_ok: bool = False
    env_from_files: Mapping[str, str] = field(default_factory=dict, hash=False)
    requires: Mapping[str, str] = field(default_factory=dict, hash=False)
    na: Mapping[str, str] = field(default_factory=dict, hash=False)
    slow: bool = False

    def __post_init__(self) -> None:
        # lists and sets as written in a declaration (or read back from JSON) become tuples
        # and frozensets; mappings become plain dicts of strings
        def words(v: Iterable[Any]) -> tuple[str, ...]:
            if isinstance(v, str):
                raise TypeError(f"expected a sequence of strings, got the string {v!r}")
            return tuple(str(x) for x in v)

        set_ = object.__setattr__
        set_(self, "cmd", words(self.cmd))
        set_(self, "args", words(self.args))
        set_(self, "hosts", words(self.hosts))
        set_(self, "targets", frozenset(words(self.targets)))
        for k in ("rate_args", "term_args"):
            if getattr(self, k) is not None:
                set_(self, k, words(getattr(self, k)))
        if self.rate_targets is not None:
            set_(self, "rate_targets", frozenset(words(self.rate_targets)))
        for k in ("rate_hosts", "term_hosts"):
            v = getattr(self, k)
            if v is not None and v != ALL_TLS_HOSTS:
                set_(self, k, words(v))
        for k in ("env_from_files", "requires", "na"):
            set_(self, k, {str(a): str(b) for a, b in dict(getattr(self, k)).items()})
        if not self.cmd:
            raise ValueError("PromiseCase.cmd: the command words are empty")
        unknown = sorted(set(self.na) - set(PROMISES))
        if unknown:
            raise ValueError(f"PromiseCase.na: unknown promises {unknown} (known: {', '.join(PROMISES)})")

    def to_json(self) -> dict[str, Any]:
        """JSON-ready form (sets as sorted lists); :meth:`from_json` reads it back."""
        out: dict[str, Any] = {}
        for f in fields(self):
            v = getattr(self, f.name)
            if isinstance(v, frozenset):
                v = sorted(v)
            elif isinstance(v, tuple):
                v = list(v)
            out[f.name] = v
        return out

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "PromiseCase":
        return cls(**data)


@dataclass(frozen=True)
class Measurement:
    """One declared measurement.

    :ivar name: ``netsurvey scan NAME`` and ``scan_run.kind``.
    :ivar summary: first line of its help.
    :ivar tables: the tables it writes (documentation, exports, scaffold checks).
    :ivar contacts_network: whether it sends anything to targets (promise tests cover these).
    :ivar module: the module that declared it.
    :ivar function: the option-taking function (its typer signature is the CLI).
    :ivar kind: the ``scan_run.kind`` its runs are recorded under (default: ``name``; a
        second engine of one measurement shares its kind, e.g. tls-zgrab's runs are 'tls').
    :ivar promise: how the promise matrix aims it at the testbed (required, by that test,
        for a measurement that contacts the network).
    :ivar render_text: the text form of its summary (``result -> str``), for a measurement
        whose summary reads better as a table; default :func:`text_summary`.
    """

    name: str
    summary: str
    tables: tuple[str, ...]
    contacts_network: bool
    module: str
    function: Callable[..., Any]
    kind: str = ""
    promise: Optional[PromiseCase] = None
    render_text: Optional[Callable[[Mapping[str, Any]], str]] = None

    def __post_init__(self) -> None:
        if not self.kind:
            object.__setattr__(self, "kind", self.name)


_REGISTRY: dict[str, Measurement] = {}


def registry() -> dict[str, Measurement]:
    """Every declared measurement by name (after the command line registered its plugins)."""
    return dict(_REGISTRY)


# -- declaration ----------------------------------------------------------------------
def measurement(group: typer.Typer, name: str, *, tables: tuple[str, ...] = (), contacts_network: bool = True,
                command: Optional[str] = None, kind: Optional[str] = None,
                promise: Optional[PromiseCase] = None,
                render_text: Optional[Callable[[Mapping[str, Any]], str]] = None) -> Callable[[Callable], Callable]:
    """Declare ``fn`` as measurement ``name`` (its ``scan_run.kind``): register it and add
    it to the command ``group`` (``netsurvey scan`` for scanners) as ``command`` (default:
    ``name``) with the shared run options. ``promise``: its :class:`PromiseCase`;
    ``render_text``: the text form of its summary, when not :func:`text_summary`."""
    if promise is not None and not isinstance(promise, PromiseCase):
        raise TypeError(f"measurement {name!r}: promise= takes a netsurvey.measure.PromiseCase")

    def deco(fn: Callable) -> Callable:
        old = _REGISTRY.get(name)
        if old is not None and (old.module, old.function.__qualname__) != (fn.__module__, fn.__qualname__):
            raise RuntimeError(f"measurement {name!r} declared twice ({old.module} and {fn.__module__})")
        doc = inspect.getdoc(fn) or ""
        m = Measurement(name=name, summary=doc.splitlines()[0] if doc else "", tables=tuple(tables),
                        contacts_network=contacts_network, module=fn.__module__, function=fn, kind=kind or name,
                        promise=promise, render_text=render_text)
        _REGISTRY[name] = m
        group.command(command or name)(_command_for(m))
        return fn

    return deco


def _command_for(m: Measurement) -> Callable:
    """The typer command: ``m.function``'s options plus --dry-run, --shards, --procs, --json."""
    fn = m.function
    hints = typing.get_type_hints(fn)
    sig = inspect.signature(fn)
    own = [p.replace(annotation=hints.get(p.name, p.annotation)) for p in sig.parameters.values()]
    names = {p.name for p in own}
    for clash in ("dry_run", "shards", "procs", "as_json"):
        if clash in names:
            raise RuntimeError(f"measurement {m.name!r}: option {clash!r} is reserved for the run path")
    shared = [
        inspect.Parameter("dry_run", inspect.Parameter.KEYWORD_ONLY, annotation=bool, default=typer.Option(
            False, "--dry-run", help="Print what would be probed and at what rate; contact nothing "
                                     "(the run is recorded as cancelled).")),
        inspect.Parameter("shards", inspect.Parameter.KEYWORD_ONLY, annotation=Optional[int], default=typer.Option(
            None, "--shards", min=1, max=MAX_SHARDS,
            help="Queue the scan as N shards for 'netsurvey worker' (prints the run id).")),
        inspect.Parameter("procs", inspect.Parameter.KEYWORD_ONLY, annotation=Optional[int], default=typer.Option(
            None, "--procs", min=1, max=MAX_PROCS,
            help=f"Run the scan as N shards at once on this machine (at most {MAX_PROCS}).")),
        inspect.Parameter("as_json", inspect.Parameter.KEYWORD_ONLY, annotation=bool, default=json_option(
            help="Print the summary (run id, counts, ...) as one line of JSON.")),
    ]
    params = [p.replace(kind=inspect.Parameter.KEYWORD_ONLY) for p in own] + shared

    @functools.wraps(fn)
    def command(**kwargs: Any) -> None:
        dry_run, shards, procs = kwargs.pop("dry_run"), kwargs.pop("shards"), kwargs.pop("procs")
        _execute(m, kwargs, dry_run=dry_run, shards=shards, procs=procs)

    command.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
    command.__annotations__ = {p.name: p.annotation for p in params}
    del command.__wrapped__  # typer must see the new signature, not fn's
    return command


# -- the run path ---------------------------------------------------------------------
#: runs a sharded invocation (``--shards`` / ``--procs``): netsurvey.jobs.submit, set by the
#: command line (the queue sits above this module: it runs specs through :func:`run_spec`)
_dispatch: Optional[Callable[..., None]] = None


def set_dispatcher(fn: Callable[..., None]) -> None:
    global _dispatch
    _dispatch = fn


def _execute(m: Measurement, params: dict[str, Any], *, dry_run: bool, shards: Optional[int],
             procs: Optional[int]) -> None:
    if shards is not None and procs is not None:
        raise UsageError("--shards (queue for workers) and --procs (run here) do not go together")
    if dry_run and (shards is not None or procs is not None):
        raise UsageError("--dry-run does not go with --shards/--procs: dry-run the command alone "
                         "(a dry run contacts nothing, so there is nothing to share out)")
    if shards is None and procs is None:
        run_inline(RunContext(measurement=m.name, dry_run=dry_run), m, params)
        return
    if _dispatch is None:
        raise UsageError("--shards/--procs need netsurvey's job queue (run through the netsurvey command)")
    _dispatch(m, params, shards=shards, procs=procs)


def load_registry() -> dict[str, Measurement]:
    """The registry, with every plugin's measurements declared (a process that did not
    build the command line, e.g. a shard started as a fresh interpreter)."""
    if not _REGISTRY:
        from .plugins import plugins

        for p in plugins():
            p.register(typer.Typer(), typer.Typer())
    return registry()


def make_spec(m: Measurement, params: dict[str, Any], config_path: Optional[Path]) -> RunSpec:
    """The JSON form of an invocation, with the submitter's config file and its hash."""
    import hashlib

    cfg = None
    digest = None
    if config_path is not None:
        cfg = str(Path(config_path).resolve())
        try:
            digest = hashlib.sha256(Path(cfg).read_bytes()).hexdigest()
        except OSError as exc:
            raise UsageError(f"{config_path}: cannot read config: {exc.strerror}") from None
    return RunSpec(measurement=m.name, params={k: _to_json(v) for k, v in params.items()},
                   config_path=cfg, config_sha256=digest)


def _to_json(v: Any) -> Any:
    if isinstance(v, Path):
        return str(v)
    if isinstance(v, (list, tuple)):
        return [_to_json(x) for x in v]
    if isinstance(v, enum.Enum):
        return v.value
    return v


def _from_json(fn: Callable, params: dict[str, Any]) -> dict[str, Any]:
    """Turn a spec's JSON values back into what the function's annotations say."""
    hints = typing.get_type_hints(fn)
    out: dict[str, Any] = {}
    for k, v in params.items():
        t = hints.get(k)
        args = typing.get_args(t)
        base = next((a for a in args if a is not type(None)), t) if typing.get_origin(t) is typing.Union else t
        if v is None:
            out[k] = None
        elif base is Path:
            out[k] = Path(v)
        elif typing.get_origin(base) in (list, tuple) and typing.get_args(base)[:1] == (Path,):
            out[k] = [Path(x) for x in v]
        else:
            out[k] = v
    return out


def run_inline(ctx: RunContext, m: Measurement, params: dict[str, Any]) -> None:
    """Run the measurement in this process under ``ctx``, end the runs it opened, then
    print its summary (:func:`print_summary`; ``params['as_json']``, the shared ``--json``,
    chooses JSON). SIGTERM/SIGINT raise :class:`Terminated`: open writers are flushed and
    the runs opened so far end 'failed' (in a shard nothing is committed, so the shard is
    retried); the process then exits with 128 + the signal number."""
    params = dict(params)
    ctx.json = bool(params.pop("as_json", False)) or ctx.json
    with activate(ctx), _signals_raise():
        try:
            result = m.function(**params)
        except DryRunDone:
            return
        except Terminated as t:
            _interrupted(ctx)
            raise SystemExit(128 + t.signum) from None
        except BaseException as exc:
            from .clicompat import Exit

            if isinstance(exc, Exit) and not exc.exit_code or isinstance(exc, SystemExit) and not exc.code:
                _end_runs(ctx, "finished")
            else:
                _end_runs(ctx, "failed", exc)
            raise
        _end_runs(ctx, "finished")
    print_summary(m, summary_of(ctx, result), as_json=ctx.json)


def summary_of(ctx: RunContext, result: Any) -> Optional[dict[str, Any]]:
    """What a measurement's run reports: the dict it returned, or (it returned None) the
    run id and counts of the last run it opened; None when it opened no run."""
    if result is None:
        if not ctx.runs:
            return None
        run = ctx.runs[-1]
        return {"run_id": run.id, "counts": dict(run.counts)}
    if not isinstance(result, Mapping):
        raise TypeError(f"measurement {ctx.measurement!r} returned {type(result).__name__}: "
                        "a measurement returns its summary as a dict, or None")
    return dict(result)


def _words(counts: Mapping[str, Any]) -> str:
    return ", ".join(f"{k} {v}" for k, v in sorted(counts.items(), key=lambda kv: str(kv[0])))


def text_summary(name: str, result: Mapping[str, Any]) -> str:
    """The text form of a summary: ``NAME run ID (STATUS): count 1, other 2`` (the counts
    sorted by name; the status only when the summary has one); a summary without
    ``counts`` shows its other plain values the same way (lists as their length)."""
    run = f"{name} run {result.get('run_id', '-')}"
    if isinstance(result.get("status"), str):
        run += f" ({result['status']})"
    counts = result.get("counts")
    if not isinstance(counts, Mapping):
        counts = {k: (len(v) if isinstance(v, (list, tuple)) else v) for k, v in result.items()
                  if k not in ("run_id", "status") and not isinstance(v, Mapping)}
    return f"{run}: {_words(counts)}"


def print_summary(m: Measurement, summary: Optional[Mapping[str, Any]], *, as_json: bool) -> None:
    """Print a measurement's summary once: one line of JSON (``--json``), else its text
    form (the measurement's ``render_text``, else :func:`text_summary`)."""
    import json

    if summary is None:
        return
    if as_json:
        text = json.dumps(summary, default=str)
    elif m.render_text is not None:
        text = m.render_text(summary)
    else:
        text = text_summary(m.name, summary)
    print(text, flush=True)


@contextlib.contextmanager
def run_path(kind: str) -> Iterator[RunContext]:
    """The run path for a command that is not a declared measurement but opens runs (a
    server logging what it receives): the runs it opens are ended as a measurement's are."""
    ctx = RunContext(measurement=kind)
    with activate(ctx):
        try:
            yield ctx
        except BaseException as exc:
            _end_runs(ctx, "failed", exc)
            raise
        _end_runs(ctx, "finished")


def _end_runs(ctx: RunContext, status: str, exc: Optional[BaseException] = None) -> None:
    """End every run the measurement opened and left open: 'finished' when it returned,
    'failed' when it raised (bad input found after the run opened, a database error, a
    bug), each with the counts it recorded; a failure also records what went wrong (one
    line, secrets masked)."""
    for run in ctx.runs:
        if run.ended:
            continue
        counts = _final_counts(run)
        if exc is not None:
            from .secrets import mask_text

            counts.setdefault("error", mask_text(f"{type(exc).__name__}: {exc}")[:300])
        how = run.outcome or status
        if isinstance(exc, KeyboardInterrupt) and not isinstance(exc, Terminated):
            how = "cancelled"
        try:
            run.finish(how, counts)
        except Exception:  # the database may be why it failed: the original error matters more
            if exc is None:
                raise


def run_spec(spec: RunSpec, shard: ShardSpec) -> None:
    """A shard process's entry: run ``spec`` as shard ``shard`` (after the command line
    registered its plugins)."""
    m = _REGISTRY.get(spec.measurement)
    if m is None:
        raise UsageError(f"no measurement named {spec.measurement!r} in this installation")
    run_inline(RunContext(measurement=m.name, shard=shard), m, _from_json(m.function, spec.params))


def _final_counts(run: Any) -> dict:
    counts = dict(run.counts)
    if run.final_counts is not None:
        try:
            counts.update(run.final_counts())
        except Exception:  # noqa: S110 - the database may be why the run ends
            pass
    return counts


def _interrupted(ctx: RunContext) -> None:
    from .writer import flush_all_open

    ctx.interrupted = True
    if ctx.shard is not None and not ctx.shard.keep_on_interrupt:
        return  # the shard's transaction is never committed: its retry starts clean
    flush_all_open()
    for run in ctx.runs:
        if run.ended:
            continue
        try:
            run.finish("failed", {**_final_counts(run), "interrupted": 1})
        except Exception:  # the database may be the reason we are stopping
            pass


#: After a signal was handed to the event loop: how long its callback may wait for the loop
#: before the signal is raised where the main thread stands (a blocking call inside a
#: coroutine - a paced raw-socket sender - never gives the loop back).
LOOP_GRACE_S = 1.0


class _Pending:
    """A signal handed to the running event loop and not yet raised there."""

    def __init__(self, signum: int):
        self.signum = signum
        self.delivered = False

    def raise_in_loop(self) -> None:
        from .runctx import LoopTerminated

        self.delivered = True
        raise LoopTerminated(self.signum)


class _signals_raise:
    """While active: SIGTERM and SIGINT raise :class:`Terminated` in the main thread."""

    def __enter__(self):
        import threading

        self._saved = {}
        if threading.current_thread() is not threading.main_thread():
            return self
        main_id = threading.main_thread().ident
        pending: list[_Pending] = []

        def watchdog(p: _Pending) -> None:
            import time

            time.sleep(LOOP_GRACE_S)
            if not p.delivered:   # the loop is blocked: signal again, raised in place below
                signal.pthread_kill(main_id, p.signum)

        def handler(signum, frame):
            import asyncio

            from .runctx import current

            ctx = current()
            if ctx is not None:
                ctx.interrupted = True
            loop = asyncio._get_running_loop()
            if loop is not None and not pending:
                # raised here it would be the exception of whichever task's frame the signal
                # interrupted: asyncio keeps it to that task (a scan worker even records it)
                # and the scan went on (issue 26: a 10K-target scan ignored SIGTERM/SIGINT).
                # Raised from a callback of its own it leaves run_forever; asyncio.run then
                # cancels the tasks. If the loop does not run the callback within
                # LOOP_GRACE_S (blocking code in a coroutine: scan tfo --cidr stayed running
                # after SIGTERM), the watchdog signals again and it is raised in place.
                p = _Pending(signum)
                pending.append(p)
                loop.call_soon_threadsafe(p.raise_in_loop)
                threading.Thread(target=watchdog, args=(p,), daemon=True, name="signal-watchdog").start()
                return
            raise Terminated(signum)

        for s in (signal.SIGTERM, signal.SIGINT):
            self._saved[s] = signal.signal(s, handler)
        return self

    def __exit__(self, *exc):
        for s, h in self._saved.items():
            signal.signal(s, h)
        return False


def parse_spec_argv(argv: list[str]) -> RunSpec:
    """Validate a 'scan NAME OPTIONS...' argv (from a schedule file) by parsing it with the
    measurement's own options, and return its spec. Unknown names and options, and bad
    values, are a UsageError."""
    from .clicompat import click_exceptions as click

    if len(argv) < 2 or argv[0] != "scan":
        raise UsageError("only 'scan ...' commands can be scheduled or sharded")
    m = _REGISTRY.get(argv[1])
    if m is None:
        raise UsageError(f"no measurement named {argv[1]!r} (see 'netsurvey scan --help')")
    one = typer.Typer()
    one.command(m.name)(_command_for(m))
    scan = typer.main.get_command(one)
    try:
        ctx = scan.make_context(argv[1], list(argv[2:]))
    except click.ClickException as exc:
        raise UsageError(f"{' '.join(argv)}: {exc.format_message()}") from None
    params = dict(ctx.params)
    for k in ("dry_run", "shards", "procs"):
        if params.pop(k, None) not in (None, False):
            raise UsageError(f"{' '.join(argv)}: --dry-run/--shards/--procs do not belong in a scheduled command")
    return make_spec(m, params, None)
