"""One duration rule for every option, schedule entry and model input: a finite,
non-negative number with an optional unit — ``ms``, ``s``, ``m``, ``h``, ``d`` — or plain
seconds: ``500ms`` = 0.5, ``90`` = ``90s``, ``1.5h`` = 5400. ``inf``, ``nan``, negative
numbers and other units are errors; zero only where the caller allows it."""
from __future__ import annotations

import math
import re

#: ASCII digits and spaces only: \d and \s would take '١٠' (float() reads it as 10) and U+2028
_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?|\.\d+)\s*(ms|s|m|h|d)?\s*$", re.IGNORECASE | re.ASCII)
_UNITS_S = {"ms": 0.001, None: 1.0, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}


def parse_duration_s(text: str, *, allow_zero: bool = False) -> float:
    """``text`` as seconds; ValueError (with the reason) if it is not a duration."""
    m = _DURATION.match(str(text or ""))
    try:
        finite = math.isfinite(float(str(text)))
    except ValueError:
        finite = True
    if not finite:
        raise ValueError(f"{text!r} is not a finite duration")
    if not m:
        raise ValueError(f"{text!r} is not a duration such as 500ms, 30s, 45m, 2h, 1d or plain seconds")
    v = float(m.group(1)) * _UNITS_S[m.group(2).lower() if m.group(2) else None]
    if not math.isfinite(v) or v < 0 or (v == 0 and not allow_zero):
        raise ValueError(f"{text!r}: a duration must be {'non-negative' if allow_zero else 'positive'}")
    return v


def duration_option_s(text: str, option: str, *, allow_zero: bool = False) -> float:
    """For command-line options: a one-line UsageError naming the option."""
    from .errors import UsageError

    try:
        return parse_duration_s(text, allow_zero=allow_zero)
    except ValueError as exc:
        raise UsageError(f"{option}: {exc}") from None
