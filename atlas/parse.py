"""RIPE Atlas results -> typed rows, through ripe.atlas.sagan (no I/O here).

DNS results of ``use_probe_resolver`` measurements become one :class:`DnsObservation` per
resolver response (timeouts and errors kept); ping results one :class:`PingObservation`.

A result object the parser cannot use (missing or ill-typed fields, values out of range,
sagan's ResultParseError) does not raise: it becomes one failure row with error
``malformed-result: <why>``, identified as far as the object allows (the fetched
measurement's id; probe id / timestamp 0 when the object has no usable one), so one bad
result never aborts a campaign and still shows in ``atlas_failure``.
"""
from __future__ import annotations

import dataclasses
import ipaddress
import math
from dataclasses import dataclass
from typing import Optional

from ripe.atlas.sagan import DnsResult, PingResult, Result, ResultParseError

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


class MalformedResult(ValueError):
    """A result object that cannot be turned into rows (the message says why)."""


#: What parsing an ill-formed result object raises (sagan's own error and Python's on
#: missing keys, wrong types, non-finite numbers; OSError/OverflowError from sagan's
#: datetime.fromtimestamp on times far outside the epoch range).
_PARSE_ERRORS = (MalformedResult, ResultParseError, KeyError, IndexError, TypeError, ValueError, OverflowError,
                 AttributeError, OSError)

#: Exclusive upper bounds of integer fields (their columns; ts: datetime's year 9999).
_INT_RANGE = {"msm_id": 2**63, "prb_id": 2**31, "ts": 253402300800, "subid": 2**31, "sent": 2**31,
              "rcvd": 2**31}


def _int_field(raw: dict, key: str, name: str) -> int:
    """An integer field (a float is truncated, digits in a string accepted, as int() did)."""
    if not isinstance(raw, dict):
        raise MalformedResult(f"not a JSON object ({type(raw).__name__})")
    v = raw.get(key)
    if isinstance(v, str) and v.isascii() and v.isdigit():
        v = int(v)
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
        raise MalformedResult(f"{key}: missing" if v is None else f"{key}: not a finite integer ({v!r:.30})")
    if not 0 <= v < _INT_RANGE[name]:
        raise MalformedResult(f"{key}: {v} out of range")
    return int(v)


def result_key(raw: dict, msm_id: Optional[int] = None) -> tuple[int, int, int]:
    """(msm_id, prb_id, timestamp) of a result object, falling back to ``msm_id`` (the
    measurement it was fetched from) and 0 for what the object lacks or has unusable."""
    out = []
    for key, name, default in (("msm_id", "msm_id", msm_id), ("prb_id", "prb_id", 0), ("timestamp", "ts", 0)):
        try:
            out.append(_int_field(raw, key, name))
        except MalformedResult:
            out.append(default if default is not None else 0)
    return out[0], out[1], out[2]


def _valid(obs):
    """``obs`` if every field fits its column (addresses, ranges, no NUL); else MalformedResult."""
    for f in dataclasses.fields(obs):
        v = getattr(obs, f.name)
        if v is None:
            continue
        if f.type == "Optional[str]" and not isinstance(v, str):
            raise MalformedResult(f"{f.name}: expected a string, got {type(v).__name__}")
        if f.name in _INT_RANGE and (isinstance(v, bool) or not isinstance(v, int) or not 0 <= v < _INT_RANGE[f.name]):
            raise MalformedResult(f"{f.name}: {v!r:.40} not a valid integer")
        if f.name == "af" and v not in (4, 6):
            raise MalformedResult(f"af: {v!r:.20}")
        if f.name.endswith("_addr"):
            try:
                ipaddress.ip_address(v)
            except ValueError:
                raise MalformedResult(f"{f.name}: {v!r:.60} is not an address") from None
        if f.name.endswith("_ms") and f.name != "rtts_ms" and (isinstance(v, bool) or not isinstance(v, (int, float))):
            raise MalformedResult(f"{f.name}: {v!r:.40} not a number")
        if f.name == "rtts_ms" and not all(x is None or (isinstance(x, (int, float)) and not isinstance(x, bool))
                                           for x in v):
            raise MalformedResult("rtts: not numbers")
        if isinstance(v, str) and "\x00" in v:
            raise MalformedResult(f"{f.name}: NUL character")
    return obs


def _why(exc: BaseException) -> str:
    return f"malformed-result: {exc if isinstance(exc, MalformedResult) else f'{type(exc).__name__}: {exc}'}"[:200]


def parse_dns(raw: dict, msm_id: Optional[int] = None) -> list[DnsObservation]:
    """Rows of one DNS result (``use_probe_resolver``: one per resolver in ``resultset``).
    Never raises: an unusable object gives one row (subid 0) with error
    ``malformed-result: ...``; ``msm_id`` (the measurement fetched) identifies it if the
    object does not."""
    try:
        return [_valid(o) for o in _parse_dns(raw)]
    except _PARSE_ERRORS as exc:
        m, prb, ts = result_key(raw, msm_id)
        return [DnsObservation(m, prb, ts, 0, None, None, None, None, None, None, _why(exc))]


def parse_ping(raw: dict, msm_id: Optional[int] = None) -> PingObservation:
    """The row of one ping result (lost packets as None, ``avg: -1`` as None). Never
    raises: an unusable object gives a row with only its identity and error
    ``malformed-result: ...``."""
    try:
        return _valid(_parse_ping(raw))
    except _PARSE_ERRORS as exc:
        m, prb, ts = result_key(raw, msm_id)
        return PingObservation(m, prb, ts, None, None, None, None, None, None, None, None, (), _why(exc))


def _parse_dns(raw: dict) -> list[DnsObservation]:
    base = dict(msm_id=_int_field(raw, "msm_id", "msm_id"), prb_id=_int_field(raw, "prb_id", "prb_id"),
                ts=_int_field(raw, "timestamp", "ts"))
    if "resultset" in raw:
        entries = raw["resultset"]
    elif isinstance(raw.get("result"), dict):   # one resolver (not use_probe_resolver): the
        entries = [raw]                          # object is its own entry, as sagan reads it
    else:
        err = raw.get("error")
        return [DnsObservation(**base, subid=0, af=raw.get("af"), resolver_addr=raw.get("dst_addr"),
                               src_addr=raw.get("src_addr"), qname=None, rt_ms=None,
                               egress_addr=None,
                               error=("no-resolver" if isinstance(err, dict) and "nameserver" in err
                                      else _error_text(err) if err else "malformed"))]
    parsed = DnsResult(raw, **_SAGAN)
    out = []
    for k, (entry, resp) in enumerate(zip(entries, parsed.responses), 1):
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


def _parse_ping(raw: dict) -> PingObservation:
    """Measured or a failure with a reason, by sagan's own reading: its summary
    (``rcvd``, ``avg``: -1 becomes None) decides, so a ping whose only replies are
    duplicates (``rcvd`` 0, ``dup`` > 0) is a failure, and an old firmware's result
    without per-packet entries but with ``rcvd`` and ``avg`` is measured. Duplicate
    replies are not packets of their own: ``rtts_ms`` has one entry per echo request."""
    ident = dict(msm_id=_int_field(raw, "msm_id", "msm_id"), prb_id=_int_field(raw, "prb_id", "prb_id"),
                 ts=_int_field(raw, "timestamp", "ts"))
    p = PingResult(raw, **_SAGAN)
    rtts = tuple(pk.rtt for pk in p.packets if not pk.dup)
    got = [x for x in rtts if x is not None]
    avg, lo, hi = p.rtt_average, p.rtt_min, p.rtt_max
    if avg is None and got and p.packets_received is None:   # no summary at all: the packets'
        avg, lo, hi = round(sum(got) / len(got), 3), min(got), max(got)
    measured = avg is not None and (p.packets_received is None or p.packets_received > 0)
    err = None
    if raw.get("dnserr"):
        err = f"dnserr: {raw['dnserr']}"[:200]
    elif raw.get("error"):
        err = _error_text(raw["error"])
    elif not measured:
        err = "no-reply (duplicate replies only)" if p.duplicates else "no-reply"
    return PingObservation(
        **ident, af=p.af, dst_addr=p.destination_address, dst_name=p.destination_name,
        sent=p.packets_sent, rcvd=p.packets_received,
        avg_ms=avg if err is None else None, min_ms=lo if err is None else None,
        max_ms=hi if err is None else None, rtts_ms=rtts, error=err)
