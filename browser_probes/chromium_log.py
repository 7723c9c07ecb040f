"""Turn Chromium's DevTools performance log (Network.* events) of one visit into
:class:`~browser_probes.tree.Resource` records with parents and the five BLAST events.

Parents: a redirect target's parent is the hop that redirected to it (same requestId,
``redirectResponse``); otherwise the initiator: ``parser`` -> the document with the
initiator URL, ``script`` -> the script at the top of the initiator's stack; a document
whose initiator is ``other`` is the root (the navigation). Events of pages other than the
visited one (the new-tab page) are dropped: only http(s) requests created after the root
document request count.
"""
from __future__ import annotations

import json
from typing import Any, Iterable, Optional
from urllib.parse import urlsplit

from .tree import Resource


def _hostname(url: str) -> Optional[str]:
    try:
        h = urlsplit(url).hostname
    except ValueError:
        return None
    return h.lower() if h else None


def _initiator_url(init: dict) -> Optional[str]:
    if init.get("url"):
        return init["url"]
    stack = init.get("stack")
    while stack:
        frames = stack.get("callFrames") or []
        for f in frames:
            if f.get("url"):
                return f["url"]
        stack = stack.get("parent")
    return None


class _Hop:
    __slots__ = ("no", "request_id", "url", "method", "rtype", "init_type", "init_url", "created",
                 "redirected_from", "response", "finished", "failed", "encoded", "frame", "failed_at")

    def __init__(self, no, request_id, url, method, rtype, init_type, init_url, created, frame):
        self.no, self.request_id, self.url, self.method = no, request_id, url, method
        self.rtype, self.init_type, self.init_url, self.created = rtype, init_type, init_url, created
        self.redirected_from: Optional[_Hop] = None
        self.response: Optional[dict] = None
        self.finished: Optional[float] = None
        self.failed: Optional[str] = None
        self.failed_at: Optional[float] = None
        self.encoded: Optional[int] = None
        self.frame = frame


def network_events(raw_log: Iterable[dict]) -> list[dict]:
    """The Network.* messages of a ``driver.get_log('performance')`` result, in order."""
    out = []
    for entry in raw_log:
        m = json.loads(entry["message"])["message"]
        if m.get("method", "").startswith("Network."):
            out.append(m)
    return out


def resources_from_events(events: list[dict], root_url: str) -> tuple[list[Resource], dict[str, Any]]:
    """Resources of the visit to ``root_url`` and facts about it (``final_url``, ``pending``:
    requests that never finished or failed). ``events`` are Network.* messages in order."""
    hops: list[_Hop] = []
    current: dict[str, _Hop] = {}     # requestId -> latest hop
    started = False
    for m in events:
        meth, p = m["method"], m.get("params", {})
        rid = p.get("requestId")
        if meth == "Network.requestWillBeSent":
            url = p["request"]["url"]
            if not url.startswith(("http://", "https://")):
                continue
            init = p.get("initiator") or {}
            if not started:
                if p.get("type") != "Document" or init.get("type") != "other":
                    continue
                started = True
            prev = current.get(rid)
            if prev is not None and "redirectResponse" in p:
                prev.response = p["redirectResponse"]
                prev.finished = p["timestamp"]
            hop = _Hop(len(hops), rid, url, p["request"].get("method"), p.get("type"), init.get("type"),
                       _initiator_url(init), p["timestamp"], p.get("frameId"))
            if prev is not None and "redirectResponse" in p:
                hop.redirected_from = prev
                hop.init_type = "redirect"
            current[rid] = hop
            hops.append(hop)
        elif not started or rid not in current:
            continue
        elif meth == "Network.responseReceived":
            current[rid].response = p["response"]
        elif meth == "Network.loadingFinished":
            current[rid].finished = p["timestamp"]
            current[rid].encoded = int(p.get("encodedDataLength") or 0)
        elif meth == "Network.loadingFailed":
            current[rid].failed = p.get("errorText") or "failed"
            current[rid].failed_at = p.get("timestamp")
            current[rid].finished = None

    # parent by initiator URL: the latest document/script hop with that URL created before
    by_url: dict[str, _Hop] = {}
    parent: dict[int, Optional[int]] = {}
    for h in hops:
        if h.redirected_from is not None:
            parent[h.no] = h.redirected_from.no
        elif h.no == 0:
            parent[h.no] = None
        else:
            ph = by_url.get(h.init_url) if h.init_url else None
            # initiator 'other' (favicon, ...) and unknown initiators hang off the root
            parent[h.no] = ph.no if ph is not None else 0
        by_url[h.url] = h
    t0 = hops[0].created if hops else 0.0
    res = []
    for h in hops:
        r = h.response or {}
        timing = r.get("timing") or {}
        base = timing.get("requestTime")

        def rel(x: Optional[float]) -> Optional[float]:
            return None if x is None else round((x - t0) * 1000.0, 3)

        def at(key: str, alt: Optional[str] = None) -> Optional[float]:
            if base is None:
                return None
            v = timing.get(key, -1)
            if (v is None or v < 0) and alt:
                v = timing.get(alt, -1)
            return None if v is None or v < 0 else rel(base + v / 1000.0)

        from_cache = bool(r.get("fromDiskCache") or r.get("fromPrefetchCache") or r.get("fromServiceWorker")
                          or r.get("fromMemoryCache"))
        res.append(Resource(
            no=h.no, parent_no=parent[h.no], redirected_from_no=h.redirected_from.no if h.redirected_from else None,
            url=h.url, hostname=_hostname(h.url), resource_type=h.rtype, initiator_type=h.init_type,
            method=h.method, http_status=r.get("status"), protocol=r.get("protocol"),
            connection_id=int(r["connectionId"]) if r.get("connectionId") not in (None, "") else None,
            connection_reused=r.get("connectionReused") if r else None,
            from_cache=from_cache if r else None,
            remote_address=r.get("remoteIPAddress") or None, remote_port=r.get("remotePort"),
            created_ms=rel(h.created), dispatched_ms=rel(base),
            first_byte_sent_ms=at("sendStart"), first_byte_received_ms=at("receiveHeadersStart", "receiveHeadersEnd"),
            last_byte_received_ms=rel(h.finished), encoded_bytes=h.encoded, failed=h.failed,
            ended_ms=rel(h.finished if h.finished is not None else h.failed_at)))
    final = None
    for h in hops:
        if h.rtype == "Document" and (h.no == 0 or h.redirected_from is not None and parent[h.no] is not None
                                      and _root_chain(h)):
            final = h.url
    pending = [h.url for h in hops if h.finished is None and h.failed is None]
    return res, {"final_url": final, "pending": pending}


def _root_chain(h: _Hop) -> bool:
    while h.redirected_from is not None:
        h = h.redirected_from
    return h.no == 0
