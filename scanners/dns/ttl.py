"""TTL survey (thesis 2.4.2, Fig 2.5): A and AAAA of each hostname asked directly at one
of its authoritative nameservers; records TTL, answer, rcode, the server asked and
failures."""
from __future__ import annotations

from dataclasses import dataclass
from typing import AsyncIterator, Iterable, NamedTuple, Optional

from netsurvey.scanning import Scanner, ScanOutcome, ScanStatus, ScanTarget

from .delegation import DelegationWalker, WalkFailed, Zone, in_zone, parent_name, referral_zone
from .engine import EngineOptions, Exchange, QueryEngine
from .wire import AAAA, CNAME, FLAG_AA, A, Reply, build_query

QTYPES = {"A": A, "AAAA": AAAA}


@dataclass(frozen=True)
class TtlOptions:
    """Options of ``scan dns-ttl``.

    :param resolver: (address, port) of the recursive resolver the walk starts from (None with ``nameserver``).
    :param nameserver: (address, port) to ask directly, skipping the walk (None = walk).
    :param family: transport to nameservers: '4', '6' or 'any'.
    :param qtypes: record types asked per hostname.
    :param edns_payload: advertised UDP payload in bytes (None = no EDNS, 512-byte limit).
    :param engine: query engine tuning.
    """

    resolver: Optional[tuple[str, int]]
    nameserver: Optional[tuple[str, int]] = None
    family: str = "any"
    qtypes: tuple[str, ...] = ("A", "AAAA")
    edns_payload: Optional[int] = 1232
    engine: EngineOptions = EngineOptions()

    @property
    def plan_note(self) -> Optional[str]:
        """What a dry run cannot count: the walk finds each name's nameservers by asking the
        resolver and them (the measurement's targets), and the policy judges them then."""
        if self.nameserver is not None:
            return None
        return ("the nameservers the delegation walk finds are judged by the policy when found "
                "(names behind a blocked one are recorded as blocked); not counted here")


class TtlProbe(NamedTuple):
    """One (hostname, type) asked at an authoritative server (an immutable tuple: one is
    built per query on the hot path, ~10x cheaper than a frozen dataclass).

    :param outcome: 'answer', 'cname' (only a CNAME to another zone), 'nodata',
        'nxdomain', 'servfail', 'lame', 'refused', 'timeout', 'malformed', 'blocked',
        'no-nameserver' or 'error'.
    :param ttl: seconds: TTL of the answer RRset (the smallest if records differ), of the
        CNAME for 'cname'; None otherwise.
    :param answers: addresses of the answer RRset, sorted.
    :param zone: the zone the server was asked for; ``nameserver`` its address.
    :param transport: 'udp' or 'tcp'; ``truncated`` = a UDP reply had TC, TCP was used.
    :param rtt_ms: milliseconds for the recorded reply.
    :param authority_count: records in the reply's authority section (a positive answer
        with the zone's NS RRset there: the server does not give minimal responses; issue 24).
    """

    qtype: str
    outcome: str
    rcode: Optional[str] = None
    authoritative: Optional[bool] = None
    ttl: Optional[int] = None
    answers: tuple[str, ...] = ()
    cname: Optional[str] = None
    zone: Optional[str] = None
    nameserver: Optional[str] = None
    transport: Optional[str] = None
    truncated: bool = False
    attempts: int = 0
    rtt_ms: Optional[float] = None
    error: Optional[str] = None
    authority_count: Optional[int] = None


@dataclass(frozen=True)
class TtlResult:
    """Every probe of one hostname."""

    hostname: str
    probes: tuple[TtlProbe, ...]


_STATUS = {"answer": ScanStatus.SUCCESS, "cname": ScanStatus.SUCCESS, "nodata": ScanStatus.SUCCESS,
           "nxdomain": ScanStatus.RESOLUTION_FAILED, "timeout": ScanStatus.IO_TIMEOUT,
           "malformed": ScanStatus.PROTOCOL_ERROR, "servfail": ScanStatus.APPLICATION_ERROR,
           "lame": ScanStatus.APPLICATION_ERROR, "refused": ScanStatus.APPLICATION_ERROR,
           "blocked": ScanStatus.BLOCKED}


def classify(qtype: str, name: str, ex: Exchange, zone: Optional[str], direct: bool = False) -> TtlProbe:
    """Turn the final exchange for (name, qtype) into a probe record. ``direct``: the server
    was given (--nameserver), not found by the walk: its REFUSED is 'refused', not 'lame'."""
    if ex.outcome != "reply":
        out = "timeout" if ex.outcome == "timeout" else "malformed" if ex.outcome == "malformed" else "error"
        return TtlProbe(qtype, out, None, None, None, (), None, zone, ex.server, ex.transport, ex.truncated,
                        ex.attempts, ex.rtt_ms, ex.error)
    r: Reply = ex.reply  # type: ignore[assignment]  # outcome 'reply': reply set
    rcode = r.rcode
    aa = bool(r.flags & FLAG_AA)

    def probe(outcome, ttl=None, answers=(), cname=None, error=None) -> TtlProbe:
        return TtlProbe(qtype, outcome, r.rcode_text, aa, ttl, answers, cname, zone, ex.server, ex.transport,
                        ex.truncated, ex.attempts, ex.rtt_ms, error, len(r.authority))

    if rcode != 0:
        if rcode == 3:
            return probe("nxdomain")
        if rcode == 2:
            return probe("servfail")
        if rcode == 5 and direct:  # issue 24: every zoo server REFUSES a name in no zone of its own
            return probe("refused", error="REFUSED by the server given (--nameserver)")
        if rcode == 5:
            return probe("lame", error="REFUSED by a server named for the zone")
        return probe("error", error=f"rcode {r.rcode_text}")
    if not aa:
        return probe("lame", error="answer without authority (AA=0)")
    want = QTYPES[qtype]
    answer = r.answer
    if len(answer) == 1:  # the common case: one record of the type asked for, owned by the name
        rr = answer[0]
        if rr.rtype == want and rr.name == name:
            return probe("answer", rr.ttl, (rr.value,))
    owner, cname_rr = name, None
    for _ in range(16):  # follow a CNAME chain inside this reply
        rrs = [rr for rr in answer if rr.name == owner and rr.rtype == want]
        if rrs:
            return probe("answer", min(rr.ttl for rr in rrs), tuple(sorted(rr.value for rr in rrs)),
                         cname_rr.value if cname_rr else None)
        c = [rr for rr in answer if rr.name == owner and rr.rtype == CNAME]
        if not c:
            break
        cname_rr, owner = c[0], c[0].value
    if cname_rr is not None:
        return probe("cname", cname_rr.ttl, cname=cname_rr.value)
    return probe("nodata")


class TtlScanner(Scanner):
    """``scan dns-ttl``: see module docstring. ``scan`` probes one hostname; the engine,
    walker and their caches are shared by all targets of a run."""

    name = "dns-ttl"
    quiet_gc = True  # few reference cycles, many long-lived targets

    def init(self, options: TtlOptions, ctx) -> None:
        super().init(options, ctx)
        self.engine = QueryEngine(options.engine, ctx.limiter)
        self.walker: Optional[DelegationWalker] = None
        self._direct = Zone("", ("(given)",), (options.nameserver[0],)) if options.nameserver else None

    async def _start(self) -> None:
        await self.engine.start()
        port = self.options.nameserver[1] if self.options.nameserver else 53
        self.walker = DelegationWalker(self.engine, self.options.resolver, family=self.options.family, port=port,
                                       allowed=self.ctx.policy.reason_blocked)

    async def scan_many(self, targets: Iterable[ScanTarget], concurrency: int) -> AsyncIterator[ScanOutcome]:
        await self._start()
        try:
            async for o in super().scan_many(targets, concurrency):
                yield o
        finally:
            self.engine.close()

    async def scan(self, target: ScanTarget) -> ScanOutcome:
        assert target.hostname is not None   # a survey of names
        name = target.hostname.rstrip(".").lower()
        # one type after the other: hostnames in flight (--concurrency) keep the window full,
        # and a task per type would cost more than it saves
        probes = [await self._probe(name, q) for q in self.options.qtypes]
        outs = [p.outcome for p in probes]
        best = next((o for o in ("answer", "cname", "nodata") if o in outs), outs[0])
        status = _STATUS.get(best, ScanStatus.UNKNOWN_ERROR)
        err = None if status == ScanStatus.SUCCESS else "; ".join(f"{p.qtype}: {p.error or p.outcome}" for p in probes)
        return ScanOutcome(target, status, TtlResult(name, tuple(probes)), err)

    async def _probe(self, name: str, qtype: str) -> TtlProbe:
        wire = build_query(name, QTYPES[qtype], rd=False, edns_payload=self.options.edns_payload)
        assert self.walker is not None   # made by _start (scan_many)
        try:
            zone = self._direct or await self.walker.zone_of(parent_name(name) if "." in name else name)
            for _ in range(4):
                server = self.walker.pick(zone)
                ex = await self.engine.query(server, self.walker.port, wire)
                if self._direct:
                    return classify(qtype, name, ex, None, direct=True)
                ref = referral_zone(ex.reply) if ex.outcome == "reply" else None  # type: ignore[arg-type]  # 'reply': set
                if ref is None:
                    return classify(qtype, name, ex, zone.name)
                if ref == zone.name or not in_zone(ref, zone.name) or not in_zone(name, ref):
                    return TtlProbe(qtype, "lame", rcode=ex.reply.rcode_text, authoritative=False, zone=zone.name,  # type: ignore[union-attr]  # a referral: a reply
                                    nameserver=server, transport=ex.transport, attempts=ex.attempts,
                                    rtt_ms=ex.rtt_ms, error=f"{server} named for {zone.name} refers to {ref}")
                zone = await self.walker.from_referral(ref, ex.reply)  # type: ignore[arg-type]  # (as above)
            return TtlProbe(qtype, "error", zone=zone.name, error="delegation chain too long")
        except WalkFailed as exc:
            return TtlProbe(qtype, exc.outcome, zone=exc.zone, nameserver=exc.server, error=str(exc)[:300])

    def close(self) -> None:
        self.engine.close()
