"""Optional modules: scanners, probes and analysis add CLI commands, demo steps and figures
by existing; a module that is absent is skipped, one that fails to import is an error."""
from __future__ import annotations

import importlib
from types import ModuleType
from typing import Iterable


def import_present(modules: Iterable[str]) -> list[ModuleType]:
    """Import each module that exists, in order; re-raise errors from inside a module."""
    out = []
    for name in modules:
        try:
            out.append(importlib.import_module(name))
        except ModuleNotFoundError as exc:
            if exc.name != name:
                raise
    return out
