"""RTT_Server: ICMP echo from the test server (where the campaign runs) to each resolver
egress address, as a :class:`netsurvey.scanning.Scanner` so the allow/block policy, rate
limits and progress bars apply as for every scanner."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from netsurvey.scanning import Scanner, ScanOutcome, ScanStatus, ScanTarget


@dataclass(frozen=True)
class ServerPingOptions:
    """:ivar packets: echo requests per address (5, as the thesis).
    :ivar interval_s: seconds between requests. :ivar timeout_s: wait per reply (seconds).
    :ivar privileged: raw ICMP sockets (root) instead of unprivileged datagram sockets."""

    packets: int = 5
    interval_s: float = 0.2
    timeout_s: float = 1.0
    privileged: bool = True


@dataclass(frozen=True)
class ServerPing:
    """Echo statistics for one address. RTTs in ms; ``avg_ms`` is None without replies."""

    address: str
    sent: int
    rcvd: int
    avg_ms: Optional[float]
    min_ms: Optional[float]
    max_ms: Optional[float]
    rtts_ms: tuple


async def _echo(address: str, o: ServerPingOptions) -> ServerPing:
    from icmplib import async_ping

    h = await async_ping(address, count=o.packets, interval=o.interval_s, timeout=o.timeout_s,
                         privileged=o.privileged)
    rtts = tuple(round(x, 3) for x in h.rtts)
    got = bool(rtts)
    return ServerPing(address, h.packets_sent, h.packets_received,
                      round(sum(rtts) / len(rtts), 3) if got else None,
                      min(rtts) if got else None, max(rtts) if got else None, rtts)


class ServerPingScanner(Scanner):
    """Pings every target address ``packets`` times from this host."""

    name = "atlas-server-ping"

    async def scan(self, target: ScanTarget) -> ScanOutcome:
        r = await _echo(target.address, self.options)
        if r.rcvd == 0:
            return ScanOutcome(target, ScanStatus.CONNECTION_TIMEOUT, r, "no-reply")
        return ScanOutcome(target, ScanStatus.SUCCESS, r)
