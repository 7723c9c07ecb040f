"""TFO/TLS versus TCP FOP/TLS on revisits of a website (thesis ch. 3.4.3, Table 3.6).

The site is one primary host, then ``secondary`` hosts connected in parallel (thesis: 19).
On revisit k each host's cached TFO cookie is unusable with probability ``f_k`` (the
connection lands on an address the client holds no cookie for: the TFO load-balancing
survey, Fig 3.3), independently per host. TFO/TLS saves one RTT at the primary host if its
cookie works, and one more RTT only if *all* secondary hosts' cookies work (they run in
parallel, so the slowest decides). TCP FOP/TLS binds cookies to hostnames, so it always
saves both RTTs. Per revisit:

    P(save 2) = q^(1+s),  P(save 0) = (1-q)(1-q^s),  P(save 1) = 1 - P(save 0) - P(save 2)

with q = 1 - f_k and s secondary hosts; mean delay saved = RTT · (P1 + 2·P2).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence


@dataclass(frozen=True)
class RevisitOptions:
    """``rtt_ms``: round-trip time (ms; thesis: 60, US LTE); ``secondary_hosts``: hosts
    fetched in parallel after the primary host (thesis: 19)."""

    rtt_ms: float = 60.0
    secondary_hosts: int = 19


def revisit(failure_rate: float, opts: RevisitOptions = RevisitOptions()) -> dict:
    """One revisit with cookie failure probability ``failure_rate`` (0..1) per host."""
    if not 0.0 <= failure_rate <= 1.0:
        raise ValueError(f"failure rate {failure_rate} is not within 0..1")
    q = 1.0 - failure_rate
    qs = q ** opts.secondary_hosts
    p2 = q * qs
    p0 = (1.0 - q) * (1.0 - qs)
    p1 = max(0.0, 1.0 - p0 - p2)
    return {
        "failure_rate": failure_rate,
        "tfo_tls": {"p_save_0_rtt": p0, "p_save_1_rtt": p1, "p_save_2_rtt": p2,
                    "mean_delay_saved_ms": opts.rtt_ms * (p1 + 2 * p2)},
        "tcp_fop_tls": {"p_save_0_rtt": 0.0, "p_save_1_rtt": 0.0, "p_save_2_rtt": 1.0,
                        "mean_delay_saved_ms": 2 * opts.rtt_ms},
    }


def tfo_revisits(failure_rates: Sequence[float], opts: RevisitOptions = RevisitOptions()) -> dict:
    """Table 3.6: one entry per revisit k = 1..len(failure_rates)."""
    if not failure_rates:
        raise ValueError("no failure rates given")
    return {"model": "tfo-revisits", "rtt_ms": opts.rtt_ms, "hosts": 1 + opts.secondary_hosts,
            "revisits": [{"revisit": k, **revisit(f, opts)} for k, f in enumerate(failure_rates, 1)]}
