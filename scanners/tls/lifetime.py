"""The lifetime probe (``netsurvey scan tls-lifetime``): how long a server accepts a session.

Default (as the thesis, ch. 4.4.1): for each age a = step, 2*step, ..., max_age a fresh
initial handshake is made at the start and its session is presented exactly once, a
seconds after that handshake completed; a resumption never prolongs the tested session.
All initial handshakes happen up front, so the probe takes max_age (or the first refusal
plus nothing, with stop_on_refusal) rather than the sum of the ages.

``chain``: one initial handshake; at every step the session of the latest successful
handshake is presented (measures prolongation by renewed tickets / cache refresh); ages
count from the initial handshake.
"""
from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from typing import Callable, Optional

from netsurvey.scanning import ScanStatus, ScanTarget

from .engine import Handshake, PacedHandshakes
from .results import ResumptionAttempt


@dataclass(frozen=True)
class LifetimeOptions:
    """Options of the lifetime probe.

    :ivar max_age: largest age tried, seconds.
    :ivar step: spacing of ages, seconds.
    :ivar mechanisms: 'id' (TLS 1.2 only, client tickets disabled) and/or 'ticket'.
    :ivar versions: TLS versions, each probed separately.
    :ivar chain: measure prolongation (see module docstring).
    :ivar stop_on_refusal: after the first refused resumption of a (host, mechanism,
        version), skip its larger ages.
    :ivar timeout: seconds per connect/read; each handshake is also bounded overall by
        2 x timeout (engine.default_deadline).
    :ivar verify: verify certificates.
    """

    max_age: float
    step: float
    mechanisms: tuple[str, ...] = ("id", "ticket")
    versions: tuple[str, ...] = ("1.2", "1.3")
    chain: bool = False
    stop_on_refusal: bool = True
    timeout: float = 5.0
    verify: bool = True

    @property
    def ages(self) -> list[float]:
        n = int(self.max_age // self.step + 1e-9)
        return [self.step * k for k in range(1, n + 1)]


class LifetimeProbe(PacedHandshakes):
    """Runs the probe for many targets concurrently; ``emit`` receives each attempt (the
    run's limiter paces every handshake: :class:`~.engine.PacedHandshakes`)."""

    read_tickets = True

    def __init__(self, options: LifetimeOptions, emit: Callable[[ResumptionAttempt], None], concurrency: int = 100,
                 limiter=None):
        super().__init__(options, emit, concurrency, limiter)

    def _attempt(self, t: ScanTarget, mech: str, version: str, age: float, h: Optional[Handshake], idx: int,
                 key: Optional[bytes], status: Optional[str] = None, error: Optional[str] = None) -> ResumptionAttempt:
        a = ResumptionAttempt(
            mechanism=mech, version=version, origin_host=t.hostname, origin_address=t.address, host=t.hostname,  # type: ignore[arg-type]  # a resolved name
            address=t.address, age=age, resumed=bool(h and h.ok and h.resumed),  # type: ignore[arg-type]  # (as above)
            status=status or (h.status.value if h else ScanStatus.UNKNOWN_ERROR.value),
            error=error if status else (h.error if h else None), chain_index=idx, key_name=key)
        self.emit(a)
        return a

    @staticmethod
    def _offered(h: Handshake, mech: str) -> bool:
        if not h.ok or h.session is None:
            return False
        if mech == "id":
            return bool(h.session_id)
        return bool(h.tickets) or (h.negotiated == "TLSv1.2" and h.session.has_ticket)

    async def probe(self, t: ScanTarget) -> None:
        jobs = []
        for v in self.o.versions:
            for m in self.o.mechanisms:
                if m == "id" and v == "1.3":
                    continue      # TLS 1.3 has no session IDs (stateful tickets count as 'ticket')
                jobs.append((self._chain if self.o.chain else self._independent)(t, m, v))
        await asyncio.gather(*jobs)

    async def _initial(self, t: ScanTarget, mech: str, version: str) -> Optional[Handshake]:
        h = await self._hs(t, self.contexts[(version, mech)])
        if not h.ok:
            self._attempt(t, mech, version, 0.0, h, 0, None)
            return None
        if not self._offered(h, mech):
            self._attempt(t, mech, version, 0.0, h, 0, None, status=ScanStatus.APPLICATION_ERROR.value,
                          error=h.session_error or "not-offered")
            return None
        return h

    @staticmethod
    def _key(h: Handshake) -> Optional[bytes]:
        return h.tickets[-1].key_name if h.tickets else None

    async def _independent(self, t: ScanTarget, mech: str, version: str) -> None:
        ages = self.o.ages
        initials = await asyncio.gather(*(self._hs(t, self.contexts[(version, mech)]) for _ in ages))
        good = [h for h in initials if self._offered(h, mech)]
        if not good:
            h = initials[0]
            self._attempt(t, mech, version, 0.0, h, 0, None, status=None if not h.ok else
                          ScanStatus.APPLICATION_ERROR.value,
                          error=None if not h.ok else (h.session_error or "not-offered"))
            return
        refused = asyncio.Event()

        async def attempt(h: Handshake, age: float) -> None:
            delay = h.completed_at + age - time.monotonic()  # type: ignore[operator]  # offered: a completed handshake
            if delay > 0:
                try:
                    await asyncio.wait_for(refused.wait(), delay)
                    if self.o.stop_on_refusal:
                        return
                except asyncio.TimeoutError:
                    pass
            elif refused.is_set() and self.o.stop_on_refusal:
                return
            r = await self._hs(t, self.contexts[(version, mech)], session=h.session)
            real_age = (time.monotonic() - h.completed_at) if r.completed_at is None else (  # type: ignore[operator]  # (as above)
                r.completed_at - (r.handshake_ms or 0) / 1000 - h.completed_at)  # type: ignore[operator]  # (as above)
            self._attempt(t, mech, version, round(real_age, 3), r, 0, self._key(h) if mech == "ticket" else None)
            if r.ok and not r.resumed:
                refused.set()

        await asyncio.gather(*(attempt(h, a) for h, a in zip(good, ages)))

    async def _chain(self, t: ScanTarget, mech: str, version: str) -> None:
        h0 = await self._initial(t, mech, version)
        if h0 is None:
            return
        cur = h0
        for idx, age in enumerate(self.o.ages):
            await asyncio.sleep(max(0.0, h0.completed_at + age - time.monotonic()))
            r = await self._hs(t, self.contexts[(version, mech)], session=cur.session)
            self._attempt(t, mech, version, round(time.monotonic() - h0.completed_at, 3), r, idx,  # type: ignore[operator]  # (as above)
                          self._key(cur) if mech == "ticket" else None)
            if r.ok and r.resumed:
                if r.session is not None:
                    cur = r
            elif self.o.stop_on_refusal:
                return

    def close(self) -> None:
        self.keylog.close()


