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
    """``asyncio.run(coro)`` on the loop of :func:`loop_name`. Inside a measurement (main
    thread), SIGTERM and SIGINT cancel the scan through the loop and raise
    :class:`netsurvey.measure.Terminated` here: uvloop would otherwise swallow the
    exception a Python signal handler raises inside its callbacks (the run then ended
    'finished' after a SIGTERM)."""
    main = _interruptible(coro)
    if loop_name() == "uvloop":
        import uvloop

        return uvloop.run(main)
    return asyncio.run(main)


async def _interruptible(coro: Coroutine[Any, Any, Any]) -> Any:
    import signal
    import threading

    from . import runctx

    if threading.current_thread() is not threading.main_thread() or runctx.current() is None:
        return await coro
    loop = asyncio.get_running_loop()
    task = asyncio.current_task()
    assert task is not None   # a coroutine: run by a task
    got: list[int] = []

    def on_signal(signum: int) -> None:
        got.append(signum)
        ctx = runctx.current()
        if ctx is not None:
            ctx.interrupted = True
        task.cancel()

    sigs = (signal.SIGTERM, signal.SIGINT)
    saved = {s: signal.getsignal(s) for s in sigs}  # the run path's handlers, back afterwards
    for s in sigs:
        loop.add_signal_handler(s, on_signal, s)
    try:
        return await coro
    except asyncio.CancelledError:
        if got:
            from .runctx import Terminated

            raise Terminated(got[0]) from None
        raise
    finally:
        for s in sigs:
            loop.remove_signal_handler(s)
            if saved[s] is not None:
                signal.signal(s, saved[s])
