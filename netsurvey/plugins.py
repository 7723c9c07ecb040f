"""Plugins: the packages that add commands, measurements, demo steps and figures. The core
imports none of them by name: they are found through the ``netsurvey.plugins`` entry
points of the installed distributions (pyproject.toml), plus modules named in
``$NETSURVEY_PLUGINS`` (comma-separated; tests use it).

A plugin module has ``register(app, scan_app)`` (add typer commands; declare measurements
with :func:`netsurvey.measure.measurement`) and may have ``demo_steps() -> [(order, title,
run)]`` (``run(state, out) -> str``, one line of result; steps run by ``order``).
"""
from __future__ import annotations

import importlib
import os
from importlib import metadata
from types import ModuleType
from typing import Callable, Iterable

GROUP = "netsurvey.plugins"


def import_present(modules: Iterable[str]) -> list[ModuleType]:
    """Import each module that exists, in order; re-raise errors from inside a module."""
    out = []
    for name in modules:
        try:
            out.append(importlib.import_module(name))
        except ModuleNotFoundError as exc:
            if exc.name != name and not name.startswith(f"{exc.name}."):
                raise
    return out


def plugin_names() -> list[str]:
    """Module names of every plugin: entry points (by name), then $NETSURVEY_PLUGINS."""
    eps = sorted(metadata.entry_points(group=GROUP), key=lambda ep: ep.name)
    names = [ep.value for ep in eps]
    names += [m for m in os.environ.get("NETSURVEY_PLUGINS", "").split(",") if m]
    return list(dict.fromkeys(names))


_loaded: list[ModuleType] | None = None


def plugins() -> list[ModuleType]:
    """The plugin modules present in this installation (imported once)."""
    global _loaded
    if _loaded is None:
        _loaded = import_present(plugin_names())
    return _loaded


def demo_steps() -> list[tuple[str, Callable]]:
    """Every plugin's demo steps, by their order."""
    steps = []
    for m in plugins():
        steps += list(getattr(m, "demo_steps", lambda: [])())
    return [(title, run) for _, title, run in sorted(steps, key=lambda s: s[0])]
