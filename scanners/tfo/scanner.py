"""The TFO support scanner: one SYN with a Fast Open cookie request per target through
the raw engine (``scan_many``), classified into a :class:`TfoProbeResult`."""
from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import AsyncIterator, Iterable, Optional

from netsurvey.scanning import Scanner, ScanOutcome, ScanStatus, ScanTarget

from .engine import EngineOptions, RawEngine, RawReply, RawTarget
from .packets import parse_options


@dataclass(frozen=True)
class TfoOptions:
    """Options of a TFO scan. ``rate``: probes per second (0 = unlimited); ``cooldown``:
    seconds to wait for replies after the last probe; ``seed``: the run's 64-bit matching
    key; ``experimental``: request with option 254/0xF989 instead of 34; ``senders``:
    sending processes, one per CPU (``rate`` is split between them)."""

    rate: float = 10000.0
    cooldown: float = 1.0
    seed: int = 0
    experimental: bool = False
    senders: int = 1


@dataclass(frozen=True)
class TfoProbeResult:
    """What one SYN with a cookie request got back.

    :ivar reply: 'syn-ack', 'rst' or 'timeout'.
    :ivar tfo_kind: 'rfc7413' (option 34), 'experimental' (254/0xF989) or None.
    :ivar cookie: cookie bytes (b'' for an empty option; None without option).
    :ivar options: the reply's other TCP options ('mss=1460' [bytes], 'sackok', 'ws=7', ...).
    :ivar window: advertised receive window [bytes, unscaled]; None on timeout.
    """

    reply: str
    tfo_kind: Optional[str] = None
    cookie: Optional[bytes] = None
    options: tuple[str, ...] = ()
    window: Optional[int] = None

    @property
    def cookie_len(self) -> Optional[int]:
        return None if self.cookie is None else len(self.cookie)

    @property
    def supports_tfo(self) -> bool:
        """A SYN-ACK carrying a non-empty cookie (the thesis's definition)."""
        return self.reply == "syn-ack" and bool(self.cookie)


def classify(target: ScanTarget, reply: Optional[RawReply], error: Optional[str]) -> ScanOutcome:
    """Turn an engine answer into a ScanOutcome (no I/O)."""
    if error is not None:
        return ScanOutcome(target, ScanStatus.UNKNOWN_ERROR, None, f"send failed: {error}")
    if reply is None:
        return ScanOutcome(target, ScanStatus.CONNECTION_TIMEOUT, TfoProbeResult("timeout"), "no reply")
    if reply.is_rst:
        return ScanOutcome(target, ScanStatus.CONNECTION_REFUSED, TfoProbeResult("rst", window=reply.window), "RST")
    p = parse_options(reply.options)
    res = TfoProbeResult("syn-ack", p.tfo_kind, p.cookie, p.others, reply.window)
    return ScanOutcome(target, ScanStatus.SUCCESS, res, "malformed options" if p.malformed else None)


class TfoScanner(Scanner):
    """Raw-socket TFO cookie-request scanner (kind ``tfo``)."""

    name = "tfo"

    async def scan(self, target: ScanTarget) -> ScanOutcome:
        async for o in self.scan_many([target], 1):
            return o
        raise RuntimeError("engine returned nothing")

    #: Targets per engine run: a stream is probed chunk by chunk (issue 26: one engine
    #: run over a 1M-name list held a slot, an index list and a flag per target). Each
    #: chunk waits ``cooldown`` for late replies before the next starts (while the next
    #: names are resolved: the core's ResolvingStream, netsurvey.selection).
    chunk: int = 10_000
    #: The engine sends one SYN per address of a chunk, paced by the global rate: the
    #: names need no interleaving by address (run_scan would hold a window of them).
    spread_by_address = False

    async def scan_many(self, targets: Iterable[ScanTarget], concurrency: int) -> AsyncIterator[ScanOutcome]:
        """One SYN per distinct (address, port): a SYN carries no hostname, so the names of
        one address (many, on a CDN) would get the same probe again - and the address
        those probes at the global rate, over etiquette.per_destination_pps. Every target
        gets the outcome of its address's probe.

        ``targets`` is read ``chunk`` targets at a time; a chunk's addresses are probed in
        one engine run. An address probed in the chunk before is not probed again: its
        names get that probe's outcome (names of one address that a chunk boundary cuts
        apart - they sit together in a top list). An address seen again later than that
        is probed again, at least one chunk and a cooldown after its last SYN (memory: one
        chunk and the previous chunk's outcomes per address)."""
        opt: TfoOptions = self.options
        self.engine = RawEngine(EngineOptions(rate=opt.rate, cooldown=opt.cooldown, seed=opt.seed,
                                              experimental=opt.experimental, senders=opt.senders))
        sent = 0
        previous: dict[tuple[str, int], tuple[Optional[RawReply], Optional[str]]] = {}
        it = iter(targets)
        while True:
            chunk = list(itertools.islice(it, self.chunk))
            if not chunk:
                break
            slot: dict[tuple[str, int], int] = {}
            names: list[list[int]] = []       # probe index -> indices of the targets it answers
            known: list[int] = []             # targets answered by the previous chunk's probe
            for k, t in enumerate(chunk):
                key = (t.address, t.port)
                if key in previous:
                    known.append(k)
                    continue
                i = slot.setdefault(key, len(slot))  # type: ignore[arg-type]  # resolved targets: an address
                if i == len(names):
                    names.append([])
                names[i].append(k)
            for k in known:
                t = chunk[k]
                reply, err = previous[(t.address, t.port)]  # type: ignore[index]  # (as above)
                yield classify(t, reply, err)
            raw = [RawTarget(a, p) for a, p in slot]
            del slot
            answers: dict[tuple[str, int], tuple[Optional[RawReply], Optional[str]]] = {}
            if not raw:   # every address was in the chunk before: keep its outcomes
                continue
            self.engine.sent = 0
            for i, reply, err in self.engine.probe(raw):
                answers[(raw[i].address, raw[i].port)] = (reply, err)
                for k in names[i]:
                    yield classify(chunk[k], reply, err)
            sent += self.engine.sent
            previous = answers
        self.engine.sent = sent
