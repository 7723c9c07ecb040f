"""The scanners, one package per protocol. Each package with a ``cli`` module (with
``register(app, scan_app)``) is a plugin of the command line, found here by existing: a new
scanner is its own package, nothing else is edited (see docs/adding-a-measurement.md). A
package's ``demo`` module (``STEP``, ``run``, optional ``ORDER``) adds a demo step."""
from __future__ import annotations

import importlib
import pkgutil


def _packages() -> list[str]:
    return sorted(m.name for m in pkgutil.iter_modules(__path__) if m.ispkg)


def _optional(module: str):
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as exc:
        if exc.name != module:
            raise
        return None


def register(app, scan_app) -> None:
    for pkg in _packages():
        cli = _optional(f"{__name__}.{pkg}.cli")
        if cli is not None:
            cli.register(app, scan_app)


#: demo order of the scanners that existed first; new packages follow, alphabetically
_DEMO_ORDER = {"tfo": 20, "tls": 30, "quic": 40, "dns": 50}


def demo_steps():
    out = []
    for k, pkg in enumerate(_packages()):
        demo = _optional(f"{__name__}.{pkg}.demo")
        if demo is not None:
            out.append((getattr(demo, "ORDER", _DEMO_ORDER.get(pkg, 55 + k / 100)), demo.STEP, demo.run))
    return out
