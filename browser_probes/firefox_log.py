"""Firefox page-load log over WebDriver BiDi: ``network.beforeRequestSent``,
``network.responseCompleted`` and ``network.fetchError`` turned into the same
:class:`~browser_probes.tree.Resource` records as the Chromium logger.

What Firefox ESR 153 gives, and what it does not:

* request id (kept across redirects, with ``redirectCount``), browsing context (an iframe has
  its own), navigation id for document loads, destination (document, iframe, script, style,
  image), the request headers (``Referer``), protocol, status, fromCache, bytes received and
  the fetch timings (absolute epoch ms): requestTime, fetchStart, connectStart/End,
  requestStart, responseStart, responseEnd.
* no initiator (always ``{"type": "other"}``; ``initiatorType`` names the element kind only:
  script, link, iframe, img, which is stored as ``initiator_type``): the parent of a subresource is the document
  of its browsing context (a resource loaded by a script is attributed to the script's
  document, not to the script); the parent of an iframe document is the document whose URL
  (or, for cross-origin referrers, origin) equals its ``Referer``; a redirect hop's parent is
  the hop that redirected.
* no remote address and no connection id: ``connection_reused`` is derived from the timings
  (no connect phase = reused connection); address and id stay NULL.

BLAST events: created = beforeRequestSent ``timings.requestTime``, dispatched =
``fetchStart``, first byte sent = ``requestStart``, first byte received = ``responseStart``,
last byte = ``responseEnd`` (a timing of 0 = did not happen; cache hits carry none, their
last byte is the responseCompleted event's timestamp), all relative to the root.
"""
from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Optional
from urllib.parse import urlsplit

from .tree import Resource

EVENTS = ("before_request_sent", "response_completed", "fetch_error")


def _d(p) -> dict:
    return p if isinstance(p, dict) else dict(p.__dict__)


class BidiRecorder:
    """Subscribes once per browser; ``take()`` returns and clears the events so far."""

    def __init__(self, driver):
        self._lock = threading.Lock()
        self._events: list[tuple[str, dict]] = []
        for name in EVENTS:
            driver.network.add_event_handler(name, lambda p, n=name: self._add(n, p))

    def _add(self, name: str, p) -> None:
        with self._lock:
            self._events.append((name, _d(p)))

    def take(self) -> list[tuple[str, dict]]:
        with self._lock:
            ev, self._events = self._events, []
        return ev


def _origin(u: str) -> str:
    s = urlsplit(u)
    return f"{s.scheme}://{s.netloc}/"


def _referer(req: dict) -> Optional[str]:
    for h in req.get("headers") or []:
        if h.get("name", "").lower() == "referer":
            v = h.get("value")
            return v.get("value") if isinstance(v, dict) else v
    return None


@dataclass
class _Hop:
    rid: str
    hop: int
    url: str
    context: str
    destination: Optional[str]
    method: Optional[str]
    referer: Optional[str]
    is_navigation: bool
    request_time: Optional[float]
    initiator_type: Optional[str] = None
    done: Optional[dict] = None
    done_ts: Optional[float] = None
    failed: Optional[str] = None
    timings: dict = field(default_factory=dict)


def resources_from_bidi(events: list[tuple[str, dict]], root_url: str) -> tuple[list[Resource], dict]:
    """Resources of the visit to ``root_url`` (events before its root request are ignored)."""
    hops: list[_Hop] = []
    by_key: dict[tuple[str, int], _Hop] = {}
    started = False
    for name, p in events:
        req = p.get("request") or {}
        url = req.get("url", "")
        rid, n = req.get("request"), int(p.get("redirectCount", p.get("redirect_count")) or 0)
        if name == "before_request_sent":
            if not started:
                if not (p.get("navigation") and url.rstrip("/") == root_url.rstrip("/")):
                    continue
                started = True
            if not url.startswith("http"):
                continue
            h = _Hop(rid, n, url, p.get("context"), req.get("destination"), req.get("method"), _referer(req),
                     bool(p.get("navigation")), (req.get("timings") or {}).get("requestTime"),
                     req.get("initiatorType"))
            hops.append(h)
            by_key[(rid, n)] = h
        elif started and (rid, n) in by_key:
            h = by_key[(rid, n)]
            h.timings = req.get("timings") or {}
            h.done_ts = p.get("timestamp")
            if name == "response_completed":
                h.done = p.get("response") or {}
            else:
                h.failed = p.get("error_text") or p.get("errorText") or "failed"
    if not hops:
        return [], {"final_url": None, "pending": []}
    t0 = hops[0].request_time or 0.0

    def rel(x) -> Optional[float]:
        return None if not x else round(x - t0, 3)

    doc_of_context: dict[str, int] = {}
    docs: list[tuple[str, int]] = []        # (url, resource no) of document hops
    res: list[Resource] = []
    for i, h in enumerate(hops):
        prev = by_key.get((h.rid, h.hop - 1)) if h.hop > 0 else None
        redirected_from = hops.index(prev) if prev is not None else None
        if i == 0:
            parent = None
        elif redirected_from is not None:
            parent = redirected_from
        elif h.is_navigation or h.destination in ("document", "iframe"):
            parent = next((no for u, no in reversed(docs) if h.referer and u == h.referer), None)
            if parent is None and h.referer:
                parent = next((no for u, no in reversed(docs) if _origin(u) == _origin(h.referer)), None)
            parent = 0 if parent is None else parent
        else:
            parent = doc_of_context.get(h.context, 0)
        if h.is_navigation or h.destination in ("document", "iframe"):
            doc_of_context[h.context] = i     # the final hop wins (later hops overwrite)
            docs.append((h.url, i))
        t = h.timings
        resp = h.done or {}
        status = resp.get("status")
        ended = t.get("responseEnd") or h.done_ts or None    # cache hits carry no timings
        last = ended if h.done is not None and not h.failed else None
        res.append(Resource(
            no=i, parent_no=parent, redirected_from_no=redirected_from, url=h.url,
            hostname=(urlsplit(h.url).hostname or "").lower() or None, resource_type=h.destination,
            initiator_type="redirect" if redirected_from is not None else h.initiator_type,
            method=h.method, http_status=status, protocol=resp.get("protocol"), connection_id=None,
            connection_reused=None if h.done is None and not h.failed else not bool(t.get("connectStart")),
            from_cache=resp.get("fromCache"), remote_address=None, remote_port=None,
            created_ms=rel(h.request_time), dispatched_ms=rel(t.get("fetchStart")),
            first_byte_sent_ms=rel(t.get("requestStart")), first_byte_received_ms=rel(t.get("responseStart")),
            last_byte_received_ms=rel(last), encoded_bytes=resp.get("bytesReceived"), failed=h.failed,
            ended_ms=rel(ended) if ended else (rel(h.request_time) if h.failed else None)))
    final = next((h.url for h in reversed(hops) if h.context == hops[0].context and h.is_navigation), hops[0].url)
    pending = [h.url for h in hops if h.done is None and h.failed is None]
    return res, {"final_url": final, "pending": pending}
