"""WebKit (WebKitGTK MiniBrowser) page-load log from the page's own Resource Timing API:
WebKitWebDriver offers neither a DevTools performance log nor WebDriver BiDi, so the logger
reads ``performance.getEntriesByType('navigation' | 'resource')`` of the top-level
document after the load event, until no new entry appeared for ``idle_s``.

What this gives, and what it does not:

* one entry per completed fetch of the top-level document (an entry is added when its
  response ends): URL, ``initiatorType`` (navigation, script, link, css, img, iframe, fetch,
  xmlhttprequest, other), startTime, fetchStart, connectStart/End, requestStart,
  responseStart, responseEnd (ms since the navigation started), nextHopProtocol,
  transferSize / encodedBodySize, responseStatus;
* no redirect hops (the navigation entry is the final URL; its redirect time is
  ``redirectStart..redirectEnd``): a redirected root is one resource, ``redirected_from_no``
  stays NULL;
* no initiator: every subresource hangs off the root document (a resource loaded by a
  script or stylesheet is attributed to the document, as for Firefox);
* resources loaded *inside* iframes are in the iframe's own timeline, not the top-level
  one: only the iframe document itself is logged;
* cross-origin entries without ``Timing-Allow-Origin`` have zero connect/request/response
  start times (the spec's privacy rule): those events are NULL, connection reuse unknown;
* requests still in flight and failed requests leave no entry: ``pending`` is always empty
  and ``failed`` NULL; no remote address, no connection id.

BLAST events: created = startTime, dispatched = fetchStart, first byte sent = requestStart,
first byte received = responseStart, last byte = responseEnd.
"""
from __future__ import annotations

from typing import Optional
from urllib.parse import urlsplit

from .tree import Resource

JS_ENTRIES = """
const pick = e => ({name: e.name, initiatorType: e.initiatorType, entryType: e.entryType,
  startTime: e.startTime, fetchStart: e.fetchStart, connectStart: e.connectStart, connectEnd: e.connectEnd,
  requestStart: e.requestStart, responseStart: e.responseStart, responseEnd: e.responseEnd,
  redirectStart: e.redirectStart, redirectEnd: e.redirectEnd, nextHopProtocol: e.nextHopProtocol,
  transferSize: e.transferSize, encodedBodySize: e.encodedBodySize,
  responseStatus: (e.responseStatus === undefined ? null : e.responseStatus)});
return performance.getEntriesByType('navigation').map(pick)
  .concat(performance.getEntriesByType('resource').map(pick));
"""


def _ms(x) -> Optional[float]:
    return None if not x else round(float(x), 3)


def resources_from_timing(entries: list[dict], root_url: str) -> tuple[list[Resource], dict]:
    """Resources of one visit from the Resource Timing entries of its top-level document."""
    nav = [e for e in entries if e.get("entryType") == "navigation"]
    res_entries = [e for e in entries if e.get("entryType") == "resource" and str(e.get("name", "")).startswith("http")]
    if not nav:
        return [], {"final_url": None, "pending": []}
    root = nav[0]
    out: list[Resource] = []
    for i, e in enumerate([root] + sorted(res_entries, key=lambda e: e.get("startTime") or 0)):
        url = e["name"]
        cs, ce = e.get("connectStart") or 0, e.get("connectEnd") or 0
        timed = bool(e.get("requestStart") or e.get("responseStart"))
        size = e.get("transferSize")
        out.append(Resource(
            no=i, parent_no=None if i == 0 else 0, redirected_from_no=None, url=url,
            hostname=(urlsplit(url).hostname or "").lower() or None,
            resource_type="document" if i == 0 else e.get("initiatorType"),
            initiator_type=None if i == 0 else e.get("initiatorType"), method=None,
            http_status=e.get("responseStatus") or None, protocol=e.get("nextHopProtocol") or None,
            connection_id=None, connection_reused=(cs == ce) if timed else None,
            from_cache=(size == 0 and (e.get("encodedBodySize") or 0) > 0) if size is not None else None,
            remote_address=None, remote_port=None,
            created_ms=round(float(e.get("startTime") or 0.0), 3), dispatched_ms=_ms(e.get("fetchStart")),
            first_byte_sent_ms=_ms(e.get("requestStart")), first_byte_received_ms=_ms(e.get("responseStart")),
            last_byte_received_ms=_ms(e.get("responseEnd")), encoded_bytes=size if size else None, failed=None,
            ended_ms=_ms(e.get("responseEnd"))))
    return out, {"final_url": root["name"], "pending": []}
