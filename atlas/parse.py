"""RIPE Atlas results -> typed rows, through ripe.atlas.sagan (no I/O here).

DNS results of ``use_probe_resolver`` measurements become one :class:`DnsObservation` per
resolver response (timeouts and errors kept); ping results one :class:`PingObservation`.
"""
from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from typing import Optional

from ripe.atlas.sagan import DnsResult, PingResult, Result

_SAGAN = {"on_malformation": Result.ACTION_IGNORE, "on_error": Result.ACTION_IGNORE}


@dataclass(frozen=True)
class DnsObservation:
    """One DNS query of a probe through one of its own resolvers.

    :ivar msm_id: measurement id. :ivar prb_id: probe id. :ivar ts: result timestamp (s).
    :ivar subid: position of the resolver in the probe's list (1-based; 0 = whole result).
    :ivar af: address family. :ivar resolver_addr: local resolver (dst_addr), maybe private.
    :ivar src_addr: probe's source address. :ivar qname: name queried.
    :ivar rt_ms: response time (ms), None on failure.
    :ivar egress_addr: whoami answer = the resolver's egress address (None if none).
    :ivar error: None on success, else timeout / no-resolver / no-answer / malformed / text.
    """

    msm_id: int
    prb_id: int
    ts: int
    subid: int
    af: Optional[int]
    resolver_addr: Optional[str]
    src_addr: Optional[str]
    qname: Optional[str]
    rt_ms: Optional[float]
    egress_addr: Optional[str]
    error: Optional[str]


@dataclass(frozen=True)
class PingObservation:
    """One ping result of a probe.

    :ivar sent / rcvd: echo requests sent / replies received.
    :ivar avg_ms / min_ms / max_ms: RTT statistics of the replies (ms), None if none.
    :ivar rtts_ms: per-packet RTTs (ms), None for a lost packet (``{"x": "*"}``).
    :ivar error: None if a reply arrived, else no-reply or the probe's error text.
    """

    msm_id: int
    prb_id: int
    ts: int
    af: Optional[int]
    dst_addr: Optional[str]
    dst_name: Optional[str]
    sent: Optional[int]
    rcvd: Optional[int]
    avg_ms: Optional[float]
    min_ms: Optional[float]
    max_ms: Optional[float]
    rtts_ms: tuple
    error: Optional[str]


def is_private(address: str) -> bool:
    """Private, CGNAT, link-local, ULA or loopback: not reachable from the Internet."""
    ip = ipaddress.ip_address(address)
    if ip.version == 4 and ip in ipaddress.ip_network("100.64.0.0/10"):
        return True
    if ip.version == 4 and ip in ipaddress.ip_network("198.18.0.0/15"):
        return False  # benchmarking range: the testbed's "public" Internet
    return ip.is_private or ip.is_link_local or ip.is_loopback


def _error_text(err) -> str:
    if isinstance(err, dict):
        if "timeout" in err:
            return "timeout"
        k, v = next(iter(err.items()), ("error", ""))
        return f"{k}: {v}"[:200]
    return str(err)[:200]


def _egress(response) -> tuple[Optional[str], Optional[str]]:
    """(egress address, qname) from a sagan DNS response's answer (A/AAAA/TXT whoami)."""
    abuf = response.abuf
    if abuf is None:
        return None, None
    qname = abuf.questions[0].name.rstrip(".").lower() if abuf.questions else None
    for ans in abuf.answers:
        addr = getattr(ans, "address", None)
        if addr is None and getattr(ans, "type", None) == "TXT":
            data = getattr(ans, "data", None) or []
            addr = "".join(data).strip('"') if data else None
        if addr:
            try:
                return str(ipaddress.ip_address(addr)), qname
            except ValueError:
                continue
    return None, qname


def parse_dns(raw: dict) -> list[DnsObservation]:
    """Rows of one DNS result (``use_probe_resolver``: one per resolver in ``resultset``)."""
    base = dict(msm_id=int(raw["msm_id"]), prb_id=int(raw["prb_id"]), ts=int(raw["timestamp"]))
    if "resultset" not in raw:
        err = raw.get("error")
        return [DnsObservation(**base, subid=0, af=raw.get("af"), resolver_addr=raw.get("dst_addr"),
                               src_addr=raw.get("src_addr"), qname=None, rt_ms=None,
                               egress_addr=None,
                               error=("no-resolver" if isinstance(err, dict) and "nameserver" in err
                                      else _error_text(err) if err else "malformed"))]
    parsed = DnsResult(raw, **_SAGAN)
    out = []
    for k, (entry, resp) in enumerate(zip(raw["resultset"], parsed.responses), 1):
        subid = int(entry.get("subid", k))
        if entry.get("error"):
            out.append(DnsObservation(**base, subid=subid, af=entry.get("af"),
                                      resolver_addr=entry.get("dst_addr"),
                                      src_addr=entry.get("src_addr"), qname=None, rt_ms=None,
                                      egress_addr=None, error=_error_text(entry["error"])))
            continue
        egress, qname = _egress(resp)
        out.append(DnsObservation(
            **base, subid=subid, af=resp.af or entry.get("af"),
            resolver_addr=resp.destination_address, src_addr=resp.source_address, qname=qname,
            rt_ms=resp.response_time, egress_addr=egress,
            error=None if egress else ("malformed" if resp.is_malformed else "no-answer")))
    return out


def parse_ping(raw: dict) -> PingObservation:
    """The row of one ping result (lost packets as None, ``avg: -1`` as None)."""
    p = PingResult(raw, **_SAGAN)
    rtts = tuple(pk.rtt for pk in p.packets)
    got = [x for x in rtts if x is not None]
    err = None
    if raw.get("dnserr"):
        err = f"dnserr: {raw['dnserr']}"[:200]
    elif raw.get("error"):
        err = _error_text(raw["error"])
    elif not got:
        err = "no-reply"
    return PingObservation(
        msm_id=int(raw["msm_id"]), prb_id=int(raw["prb_id"]), ts=int(raw["timestamp"]),
        af=p.af, dst_addr=p.destination_address, dst_name=p.destination_name,
        sent=p.packets_sent, rcvd=p.packets_received,
        avg_ms=p.rtt_average if got else None, min_ms=p.rtt_min if got else None,
        max_ms=p.rtt_max if got else None, rtts_ms=rtts, error=err)
