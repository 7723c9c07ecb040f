"""ECS survey (thesis 2.4.3): each hostname asked at a recursive resolver (the thesis used
Google Public DNS) with an EDNS Client Subnet option per client subnet; records the
source and scope prefix the reply announces, the answer and its TTL."""
from __future__ import annotations

import asyncio
import ipaddress
import socket
from dataclasses import dataclass
from typing import Any, AsyncIterator, Iterable, Optional

from netsurvey.scanning import Scanner, ScanOutcome, ScanStatus, ScanTarget

from .engine import EngineOptions, QueryEngine
from .ttl import QTYPES
from .wire import EcsOption, build_query

IPNet = ipaddress.IPv4Network | ipaddress.IPv6Network


@dataclass(frozen=True)
class EcsOptions:
    """Options of ``scan dns-ecs``.

    :param resolver: (address, port) of the resolver asked (RD=1).
    :param subnets: client subnets sent, one query per subnet and hostname.
    :param qtype: record type asked ('A' as in the thesis, or 'AAAA').
    :param engine: query engine tuning.
    """

    resolver: tuple[str, int]
    subnets: tuple[IPNet, ...]
    qtype: str = "A"
    engine: EngineOptions = EngineOptions()


@dataclass(frozen=True)
class EcsProbe:
    """One (hostname, subnet) query.

    :param outcome: 'answer', 'nodata', 'nxdomain', 'servfail', 'refused', 'timeout',
        'malformed' or 'error'.
    :param subnet: the client subnet sent (source prefix = its length).
    :param source_prefix: bits of the source prefix echoed in the reply (None = no ECS in reply).
    :param scope_prefix: bits of the scope prefix of the reply: 0 = valid for every client
        (global), None = the reply carried no ECS option.
    :param ecs_address: the address of the ECS option in the reply.
    :param ttl: seconds, of the answer RRset of ``qtype`` (smallest), None without answer.
    :param answers: addresses of the answer, sorted.
    """

    subnet: IPNet
    outcome: str
    rcode: Optional[str] = None
    source_prefix: Optional[int] = None
    scope_prefix: Optional[int] = None
    ecs_address: Optional[str] = None
    ttl: Optional[int] = None
    answers: tuple[str, ...] = ()
    transport: Optional[str] = None
    attempts: int = 0
    rtt_ms: Optional[float] = None
    error: Optional[str] = None


@dataclass(frozen=True)
class EcsResult:
    """Every subnet probe of one hostname at ``resolver``."""

    hostname: str
    resolver: str
    probes: tuple[EcsProbe, ...]


def vantage_subnet(resolver: str, prefix_v4: int = 24, prefix_v6: int = 56) -> IPNet:
    """The /24 (IPv4) or /56 (IPv6) of the local address used to reach ``resolver``
    (a UDP connect sends nothing)."""
    ip = ipaddress.ip_address(resolver)
    with socket.socket(socket.AF_INET if ip.version == 4 else socket.AF_INET6, socket.SOCK_DGRAM) as s:
        s.connect((resolver, 53))
        local = s.getsockname()[0]
    return ipaddress.ip_network(f"{local}/{prefix_v4 if ip.version == 4 else prefix_v6}", strict=False)


class EcsScanner(Scanner):
    """``scan dns-ecs``: see module docstring."""

    name = "dns-ecs"
    quiet_gc = True  # few reference cycles, many long-lived targets
    options: EcsOptions

    def init(self, options: EcsOptions, ctx) -> None:
        super().init(options, ctx)
        self.engine = QueryEngine(options.engine, ctx.limiter)

    async def scan_many(self, targets: Iterable[ScanTarget], concurrency: int) -> AsyncIterator[ScanOutcome]:
        await self.engine.start()
        try:
            async for o in super().scan_many(targets, concurrency):
                yield o
        finally:
            self.engine.close()

    async def scan(self, target: ScanTarget) -> ScanOutcome:
        assert target.hostname is not None   # a survey of names
        name = target.hostname.rstrip(".").lower()
        probes = await asyncio.gather(*(self._probe(name, s) for s in self.options.subnets))
        ok = any(p.outcome in ("answer", "nodata") for p in probes)
        status = ScanStatus.SUCCESS if ok else (
            ScanStatus.IO_TIMEOUT if probes[0].outcome == "timeout" else
            ScanStatus.PROTOCOL_ERROR if probes[0].outcome == "malformed" else
            ScanStatus.RESOLUTION_FAILED if probes[0].outcome == "nxdomain" else ScanStatus.APPLICATION_ERROR)
        err = None if ok else "; ".join(f"{p.subnet}: {p.error or p.outcome}" for p in probes)
        return ScanOutcome(target, status, EcsResult(name, self.options.resolver[0], tuple(probes)), err)

    async def _probe(self, name: str, subnet: IPNet) -> EcsProbe:
        ecs = EcsOption(str(subnet.network_address), subnet.prefixlen)
        wire = build_query(name, QTYPES[self.options.qtype], rd=True, ecs=ecs)
        ex = await self.engine.query(*self.options.resolver, wire)
        base: dict[str, Any] = dict(subnet=subnet, transport=ex.transport, attempts=ex.attempts, rtt_ms=ex.rtt_ms)
        if ex.outcome != "reply":
            return EcsProbe(outcome={"timeout": "timeout", "malformed": "malformed"}.get(ex.outcome, "error"),
                            error=ex.error, **base)
        r = ex.reply
        assert r is not None   # outcome 'reply': reply set
        e = r.ecs
        base.update(rcode=r.rcode_text, source_prefix=e.source if e else None, scope_prefix=e.scope if e else None,
                    ecs_address=e.address if e else None)
        if r.rcode != 0:
            out = {2: "servfail", 3: "nxdomain", 5: "refused"}.get(r.rcode, "error")
            return EcsProbe(outcome=out, **base)
        want = QTYPES[self.options.qtype]
        rrs = [rr for rr in r.answer if rr.rtype == want]
        if not rrs:
            return EcsProbe(outcome="nodata", **base)
        return EcsProbe(outcome="answer", ttl=min(rr.ttl for rr in rrs),
                        answers=tuple(sorted(rr.value for rr in rrs)), **base)

    def close(self) -> None:
        self.engine.close()
