"""The QUIC scanners on the shared contract (netsurvey.scanning):

* :class:`QuicDiscoverScanner` (``quic-discover``): Version Negotiation probe, Alt-Svc, HTTPS RR.
* :class:`QuicHandshakeScanner` (``quic``): a fresh connection, then one presenting the
  token and ticket it received (resumption, 0-RTT).
``quic-turnover`` is a scheduler of its own (schedule.py, turnover_run.py), not a per-target scanner.
"""
from __future__ import annotations

import asyncio
import datetime as dt
from dataclasses import dataclass
from typing import Optional

from netsurvey.etiquette import user_agent
from netsurvey.resolve import system_resolver
from netsurvey.scanning import Scanner, ScanOutcome, ScanStatus, ScanTarget

from .discover import fetch_alt_svc, https_record_alpn, parse_alt_svc
from .handshake import HandshakeFailed, quic_connect
from .records import ConnectOptions, DiscoveryResult, HandshakeResult
from .store import Presented, QuicStore
from .vn import probe_versions


def failure_status(exc: HandshakeFailed) -> ScanStatus:
    """ScanStatus for a connection without handshake."""
    if exc.kind == "refused":
        return ScanStatus.CONNECTION_REFUSED
    if exc.kind == "timeout":
        return ScanStatus.CONNECTION_TIMEOUT
    if exc.kind in ("version-negotiation", "error"):
        return ScanStatus.PROTOCOL_ERROR
    if exc.kind == "closed":
        return ScanStatus.APPLICATION_ERROR if exc.code is not None and 0x100 <= exc.code <= 0x1FF \
            else ScanStatus.PROTOCOL_ERROR
    return ScanStatus.UNKNOWN_ERROR


@dataclass(frozen=True)
class DiscoverOptions:
    """:ivar timeout_s: per probe (VN attempt, HTTPS request), s. :ivar port: UDP/TCP port."""

    timeout_s: float = 2.0
    port: int = 443


#: Names whose HTTPS record QuicDiscoverScanner keeps (oldest dropped first).
HTTPS_CACHE = 4096


class QuicDiscoverScanner(Scanner):
    name = "quic-discover"

    def init(self, options: DiscoverOptions, ctx) -> None:
        super().init(options, ctx)
        self._resolver = system_resolver()
        self._resolver.lifetime = options.timeout_s
        self._https_cache: dict[str, asyncio.Future] = {}
        self._ua = user_agent(ctx.config.etiquette)

    async def _https_rr(self, hostname: str):
        """The name's HTTPS record, asked once for all its addresses (a name's addresses come
        together from the stream; the cache keeps the last ``HTTPS_CACHE`` names: bounded
        memory over a whole list, issue 26)."""
        answer = self._https_cache.get(hostname)
        if answer is None:   # the question in flight is kept: its name's other addresses await it too
            if len(self._https_cache) >= HTTPS_CACHE:
                self._https_cache.pop(next(iter(self._https_cache)))
            answer = self._https_cache[hostname] = asyncio.ensure_future(https_record_alpn(self._resolver, hostname))
        return await asyncio.shield(answer)   # one probe stopped does not cancel the others' answer

    async def scan(self, target: ScanTarget) -> ScanOutcome:
        o = self.options
        started = dt.datetime.now(dt.timezone.utc)
        probe = await probe_versions(target.address, target.port, timeout_s=o.timeout_s)  # type: ignore[arg-type]  # resolved
        err: Optional[str]
        status, alt, err = (None, None, "no-hostname")
        alpn, no_default, rr_err = None, False, "no-hostname"
        if target.hostname:
            status, alt, err = await fetch_alt_svc(target.hostname, target.address, target.port,  # type: ignore[arg-type]  # resolved
                                                   timeout_s=o.timeout_s, user_agent=self._ua)
            alpn, no_default, rr_err = await self._https_rr(target.hostname)
        h3, ma = parse_alt_svc(alt)
        res = DiscoveryResult(alt, h3, ma, err, status, alpn, no_default, rr_err, probe, started)
        st = ScanStatus.PROTOCOL_ERROR if probe.answer == "garbage" else ScanStatus.SUCCESS
        return ScanOutcome(target, st, res, "garbage reply to the version probe" if probe.answer == "garbage" else None)


@dataclass(frozen=True)
class HandshakeScanResult:
    """``fresh``: connection without state; ``resumed``: the next connection presenting the
    token and ticket ``fresh`` received (None if it received neither or failed)."""

    fresh: HandshakeResult
    resumed: Optional[HandshakeResult]
    resumed_status: Optional[ScanStatus] = None
    resumed_error: Optional[str] = None


class QuicHandshakeScanner(Scanner):
    name = "quic"

    def init(self, options: tuple[ConnectOptions, bool], ctx) -> None:
        super().init(options, ctx)
        self.connect_options, self.resume = options

    async def scan(self, target: ScanTarget) -> ScanOutcome:
        try:
            fresh, raw = await quic_connect(target.hostname, target.address, target.port, self.connect_options)  # type: ignore[arg-type]  # resolved
        except HandshakeFailed as exc:
            return ScanOutcome(target, failure_status(exc), HandshakeScanResult(exc.partial, None), str(exc))
        resumed = st = err = None
        if self.resume and (fresh.tokens or raw):
            await self.ctx.limiter.acquire(target.address)
            try:
                resumed, _ = await quic_connect(target.hostname, target.address, target.port, self.connect_options,  # type: ignore[arg-type]  # resolved
                                                token=fresh.tokens[-1].token if fresh.tokens else None,
                                                ticket=raw[-1] if raw else None)
                st = ScanStatus.SUCCESS
            except HandshakeFailed as exc:
                resumed, st, err = exc.partial, failure_status(exc), str(exc)
        return ScanOutcome(target, ScanStatus.SUCCESS, HandshakeScanResult(fresh, resumed, st, err))


def store_handshake(store: QuicStore, o: ScanOutcome) -> None:
    """quic_connection/token/ticket rows of one ``quic`` outcome (blocked targets included)."""
    t = o.target
    r: Optional[HandshakeScanResult] = o.result
    if r is None:
        h = HandshakeResult(t.hostname, t.address or "", t.port, dt.datetime.now(dt.timezone.utc))
        store.write_connection(store.next_conn_id(), rank=t.rank, purpose="fresh", round_no=None,
                               status=o.status.value, error=o.error, h=h)
        return
    cid = store.next_conn_id()
    store.write_connection(cid, rank=t.rank, purpose="fresh", round_no=None, status=o.status.value,
                           error=o.error, h=r.fresh)
    if r.resumed is not None:
        store.write_connection(store.next_conn_id(), rank=t.rank, purpose="resume", round_no=None,
                               status=r.resumed_status.value, error=r.resumed_error, h=r.resumed,  # type: ignore[union-attr]  # set with resumed
                               presented=Presented(cid if r.fresh.tokens else None, None,
                                                   cid if r.fresh.tickets else None, None))
