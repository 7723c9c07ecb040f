"""Shared options, declared once (zgrab2's ``BaseFlags``): every measurement takes its
targets, probing, rate and output options from here, so the same name means the same
thing, with the same unit, bounds and parser, in every command.

Groups:

- targets: ``--list``, ``--top``, ``--target``, ``--port``, ``--ipv6/--no-ipv6``
  (:func:`check_targets` applies the rules they share; :mod:`netsurvey.selection` builds
  the targets from them, the one builder every measurement uses);
- probing: ``--timeout`` and ``--deadline`` as durations (``5``, ``5s``, ``500ms``, ``2m``),
  ``--concurrency`` (at least 1), ``--rate`` (packets per second, > 0, may only lower
  ``etiquette.rate_pps``);
- output: ``--json``, ``--out FILE`` (a file, never a directory or the empty path).

Every option of every command also follows the command line's own rules
(``netsurvey.cli._prepare_commands``): no number option takes ``nan`` or ``inf``, no value
holds a control character or bytes that are not UTF-8, no path is empty. :data:`SHARED`
names each shared option's parser and bounds; a test walks every command of the CLI's own
tree and checks that a shared name has them everywhere.
"""
from __future__ import annotations

import math
from typing import Any, Optional

import typer

from .durations import parse_duration_s
from .errors import UsageError

#: Largest sensible value of a port, a count in flight.
MAX_PORT = 65535
MAX_CONCURRENCY = 100_000


def _duration(value: Any, allow_zero: bool) -> float:
    if isinstance(value, (int, float)) and not isinstance(value, bool):   # a declared default
        return float(value)
    return parse_duration_s(str(value), allow_zero=allow_zero)


def parse_duration(value: Any) -> float:
    """The one parser of duration options: ``5``, ``5s``, ``500ms``, ``2m``, ``1.5h``,
    ``1d`` as seconds (:mod:`netsurvey.durations`); finite and positive."""
    return _duration(value, allow_zero=False)


def parse_duration_or_zero(value: Any) -> float:
    """As :func:`parse_duration`, zero allowed (an interval of 0: no wait)."""
    return _duration(value, allow_zero=True)


def parse_rate(value: Any) -> float:
    """Packets per second: a finite number greater than 0."""
    v = float(value)
    if not math.isfinite(v) or v <= 0:
        raise ValueError(f"{value!r}: a rate must be a finite number of packets per second, greater than 0")
    return v


# -- targets ---------------------------------------------------------------------------
def list_option(help: str = "Target list to scan (newest import; see 'netsurvey targets list').") -> Any:
    return typer.Option(None, "--list", help=help)


def top_option(help: str = "Only the first N ranks of --list.") -> Any:
    return typer.Option(None, "--top", min=1, help=help)


def target_option(help: str = "Ad-hoc target HOST or HOST=ADDRESS (repeatable).") -> Any:
    return typer.Option([], "--target", help=help)


def port_option(default: int = 443, help: str = "TCP port.") -> Any:
    return typer.Option(default, "--port", min=1, max=MAX_PORT, help=help)


def ipv6_option(default: bool = True) -> Any:
    return typer.Option(default, "--ipv6/--no-ipv6", help="Also probe IPv6 addresses.")


def check_targets(list_name: Optional[str], top: Optional[int], targets: Any = (), *,
                  required: bool = True, what: str = "--target HOST[=ADDRESS]") -> None:
    """The rules the target options share: ``--top`` only with ``--list``; a list name is
    not empty; with ``required``, at least one of ``--list`` and ``--target``."""
    if list_name is not None and not list_name.strip():
        raise UsageError("--list: give a list name (see 'netsurvey targets list')")
    if top is not None and not list_name:
        raise UsageError("--top needs --list")
    if required and not list_name and not targets:
        raise UsageError(f"give --list NAME or at least one {what}")


# -- probing ---------------------------------------------------------------------------
def timeout_option(default_s: float, help: str = "Per connection / read.") -> Any:
    return typer.Option(default_s, "--timeout", parser=parse_duration,
                        help=f"{help} A duration: seconds, or 500ms / 5s / 2m.")


def deadline_option(help: str = "How long one whole probe may take.") -> Any:
    return typer.Option(None, "--deadline", parser=parse_duration,
                        help=f"{help} A duration: seconds, or 500ms / 5s / 2m.")


def duration_option(default: Any, *names: str, help: str, allow_zero: bool = False) -> Any:
    return typer.Option(default, *names, parser=parse_duration_or_zero if allow_zero else parse_duration,
                        help=f"{help} A duration: seconds, or 500ms / 5s / 2m / 24h / 1d.")


def concurrency_option(default: int, help: str = "Targets in flight.") -> Any:
    return typer.Option(default, "--concurrency", min=1, max=MAX_CONCURRENCY, help=help)


def rate_option(default: Optional[float] = None,
                help: str = "Packets per second (default: etiquette.rate_pps; may only lower it).") -> Any:
    return typer.Option(default, "--rate", parser=parse_rate, help=help)


# -- output ----------------------------------------------------------------------------
def json_option(help: str = "Print the summary as JSON.") -> Any:
    return typer.Option(False, "--json", help=help)


def out_option(default: Any = None, help: str = "Write to this file.", *names: str) -> Any:
    return typer.Option(default, *(names or ("--out",)), dir_okay=False, help=help)


#: Each shared option: the annotation its value has (typer's, without Optional), the
#: parser it goes through (None: typer's own), its bounds. tests/core/test_options.py checks every command against it.
SHARED: dict[str, dict[str, Any]] = {
    "--list": {"annotation": str, "parser": None},
    "--top": {"annotation": int, "parser": None, "min": 1, "max": None},
    "--port": {"annotation": int, "parser": None, "min": 1, "max": MAX_PORT},
    "--timeout": {"annotation": float, "parser": parse_duration},
    "--deadline": {"annotation": float, "parser": parse_duration},
    "--concurrency": {"annotation": int, "parser": None, "min": 1, "max": MAX_CONCURRENCY},
    "--rate": {"annotation": float, "parser": parse_rate},
    "--json": {"annotation": bool, "parser": None},
}
