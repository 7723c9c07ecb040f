"""QUIC connection-establishment models: out-of-band address-validation tokens (thesis
ch. 8.3.1, eq. 8.1/8.2, Fig 8.3 and the web-browsing gain) and QuicSocks proxies
(ch. 9.4.1-9.4.2, Tables 9.1, 9.2, Fig 9.7). All times in milliseconds."""
from __future__ import annotations

from dataclasses import dataclass
from statistics import mean
from typing import Sequence


@dataclass(frozen=True)
class OobOptions:
    """``t_proc_ms``: processing time of the handshake (thesis: 40 ms); ``rtt_ms``: RTTs to
    tabulate (Fig 8.3's x axis); ``web_rtt_ms``: RTT of the web-browsing example (thesis:
    90, transatlantic); ``sequential_connections``: mean longest path of sequential
    connections of a site (thesis: 4.04, or computed from domain trees)."""

    t_proc_ms: float = 40.0
    rtt_ms: tuple[float, ...] = tuple(float(r) for r in range(0, 301, 10))
    web_rtt_ms: float = 90.0
    sequential_connections: float = 4.04


def oob_tokens(opts: OobOptions = OobOptions()) -> dict:
    """t_default = t_proc + 2·RTT (Retry), t_proposal = t_proc + RTT (eq. 8.1, 8.2)."""
    rows = [{"rtt_ms": r, "default_ms": opts.t_proc_ms + 2 * r, "proposal_ms": opts.t_proc_ms + r,
             "proposal_share_of_default": (opts.t_proc_ms + r) / (opts.t_proc_ms + 2 * r)
             if opts.t_proc_ms + 2 * r else 1.0} for r in opts.rtt_ms]
    w = opts.web_rtt_ms
    return {"model": "oob-tokens", "t_proc_ms": opts.t_proc_ms, "delay_overhead": rows,
            "at_web_rtt": {"rtt_ms": w, "default_ms": opts.t_proc_ms + 2 * w, "proposal_ms": opts.t_proc_ms + w,
                           "proposal_share_of_default": (opts.t_proc_ms + w) / (opts.t_proc_ms + 2 * w)},
            "web_browsing": {"sequential_connections": opts.sequential_connections, "rtt_ms": w,
                             "delay_saved_until_last_connection_ms": opts.sequential_connections * w}}


@dataclass(frozen=True)
class RttTriplet:
    """RTTs of one client (e.g. a RIPE Atlas probe), ms: to its DNS resolver/QuicSocks proxy
    (``rtt_dns``), proxy to server (``rtt_server``), client to server (``rtt_direct``)."""

    client: str
    rtt_dns: float
    rtt_server: float
    rtt_direct: float


def quicsocks_latency(t: RttTriplet) -> dict:
    """Table 9.1 for one client."""
    return {"status_quo": t.rtt_dns + t.rtt_direct, "proposal": t.rtt_dns + t.rtt_server,
            "status_quo_retry": t.rtt_dns + 2 * t.rtt_direct, "proposal_retry": t.rtt_dns + 2 * t.rtt_server}


def quicsocks(triplets: Sequence[RttTriplet], save_thresholds_ms: Sequence[float] = (5, 10, 15, 30, 40, 50, 60)) -> dict:
    """Table 9.1/9.2 per client, and over many clients the Fig 9.7 distributions and the
    shares of clients saving at least each threshold (without / with Retry)."""
    if not triplets:
        raise ValueError("no RTT triplets")
    per = [{"client": t.client, **quicsocks_latency(t)} for t in triplets]
    n = len(per)
    saved = [p["status_quo"] - p["proposal"] for p in per]
    saved_r = [p["status_quo_retry"] - p["proposal_retry"] for p in per]
    keys = ("status_quo", "proposal", "status_quo_retry", "proposal_retry")
    out = {"model": "quicsocks", "clients": n,
           "mean_latency_ms": {k: mean(p[k] for p in per) for k in keys},
           "share_faster": sum(s > 0 for s in saved) / n,
           "share_saving_at_least_ms": [{"ms": th, "no_retry": sum(s >= th for s in saved) / n,
                                         "retry": sum(s >= 2 * th for s in saved_r) / n} for th in save_thresholds_ms],
           "share_proposal_retry_faster_than_status_quo": sum(p["proposal_retry"] < p["status_quo"] for p in per) / n,
           "cdf_ms": {k: sorted(p[k] for p in per) for k in keys},
           "per_client": per}
    if n == 1:
        p = per[0]
        out["reduction"] = {"no_retry_ms": saved[0], "retry_ms": saved_r[0],
                            "no_retry_share": saved[0] / p["status_quo"] if p["status_quo"] else 0.0,
                            "retry_share": saved_r[0] / p["status_quo_retry"] if p["status_quo_retry"] else 0.0}
    return out
