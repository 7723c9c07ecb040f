"""The event loop scanners run on: uvloop (libuv, its loop and callbacks in Cython) when
installed, else asyncio's own. The DNS engine spends ~10-15 % less CPU per query on uvloop
(bench/bench_dns.py); ``NETSURVEY_EVENT_LOOP=asyncio`` forces asyncio's loop (to compare,
or to rule uvloop out when debugging)."""
from __future__ import annotations

import asyncio
import os
from typing import Any, Coroutine


def loop_name() -> str:
    """'uvloop' or 'asyncio': the loop :func:`run` uses."""
    if os.environ.get("NETSURVEY_EVENT_LOOP", "").lower() == "asyncio":
        return "asyncio"
    try:
        import uvloop  # noqa: F401
    except ImportError:
        return "asyncio"
    return "uvloop"


def run(coro: Coroutine[Any, Any, Any]) -> Any:
    """``asyncio.run(coro)`` on the loop of :func:`loop_name`."""
    if loop_name() == "uvloop":
        import uvloop

        return uvloop.run(coro)
    return asyncio.run(coro)
