"""The time a browser saves on a revisit with state (issue 25, item 4).

A fresh browser profile visits the timing testbed's server (``timing.test``, behind the
delay line of ``netsurvey testbed timing``), its connections are closed, and it visits again:
the second visit can resume (TLS 1.2 session ticket or ID, TLS 1.3 PSK, perhaps with early
data, QUIC with 0-RTT). Each visit's phases come from the page's own Navigation Timing entry
(W3C Navigation Timing Level 2: connectStart, secureConnectionStart, connectEnd,
requestStart, responseStart, relative to the navigation's start), the same in all three
engines; whether the server really resumed, and with early data, comes from the server's own
log (nginx's ``$ssl_session_reused`` / ``$ssl_early_data``; the QUIC server's ``connection``
events), matched by a per-visit nonce in the URL, which also keeps the HTTP cache out of it.

Transports (what the second visit can save, in round trips, at the link's RTT):

* ``tls12``: ``https://timing.test:8443/``, a TLS 1.2-only server: a full handshake takes
  two round trips, an abbreviated one (ticket or session ID) one: 1 RTT saved.
* ``tls13``: ``https://timing.test/`` over TCP: a full TLS 1.3 handshake and a PSK one both
  take one round trip (no saving in RTTs, RFC 8446 section 2.2), unless the browser sends
  the request as early data (0-RTT, section 2.3): then 1 RTT saved.
* ``quic``: the same origin forced onto HTTP/3: a resumed QUIC connection with 0-RTT sends
  the request in its first flight: 1 RTT saved (RFC 9001 section 4.6.1).

The numbers are only meaningful under a delay profile (``netsurvey testbed profile lte
--class timing``); the run records the profile the delay line applied.
"""
from __future__ import annotations

import json
import secrets
import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Optional

from .drivers import NO_HTTP3, BrowserOptions, start_browser

TRANSPORTS = ("tls12", "tls13", "quic")

#: Visited before the first visit (no network): a fresh browser's first navigation carries
#: start-up costs (renderer, caches) that would be counted as the first visit's.
WARM_UP_URL = "data:text/html,<title>warm-up</title>"

#: The page's Navigation Timing entry, as plain numbers (ms from the navigation's start).
NAV_TIMING_JS = ("var e = performance.getEntriesByType('navigation')[0];"
                 "if (!e) return null;"
                 "return {connectStart: e.connectStart, secureConnectionStart: e.secureConnectionStart,"
                 " connectEnd: e.connectEnd, requestStart: e.requestStart, responseStart: e.responseStart,"
                 " responseEnd: e.responseEnd, nextHopProtocol: e.nextHopProtocol || ''};")


@dataclass(frozen=True)
class VisitTiming:
    """One visit of the timing server, as the page and the server saw it.

    :ivar browser: chromium, firefox or webkit; :ivar browser_version: as WebDriver reports it.
    :ivar transport: tls12, tls13 or quic (see the module's docstring).
    :ivar repetition: which pair of visits (0, 1, ...); :ivar visit: ``first`` or ``revisit``.
    :ivar url: the URL visited (with its nonce).
    :ivar next_hop_protocol: Navigation Timing's nextHopProtocol (``http/1.1``, ``h2``, ``h3``).
    :ivar connect_ms: connectEnd - connectStart [ms] (TCP and TLS, or the QUIC handshake);
        0 when the browser reused a connection.
    :ivar tls_ms: connectEnd - secureConnectionStart [ms] (TLS part; None if not reported).
    :ivar ttfb_ms: responseStart [ms from the navigation's start]: time to the first byte.
    :ivar response_end_ms: responseEnd [ms from the navigation's start].
    :ivar server_protocol: TLS version the server logged (``TLSv1.2``, ``TLSv1.3``, ``quic``).
    :ivar server_resumed: the server resumed the session (None: no server record found).
    :ivar server_early_data: the request arrived as early data / 0-RTT (None: unknown).
    :ivar error: why the visit has no timing (None when it has).
    """

    browser: str
    browser_version: str
    transport: str
    repetition: int
    visit: str
    url: str
    next_hop_protocol: Optional[str] = None
    connect_ms: Optional[float] = None
    tls_ms: Optional[float] = None
    ttfb_ms: Optional[float] = None
    response_end_ms: Optional[float] = None
    server_protocol: Optional[str] = None
    server_resumed: Optional[bool] = None
    server_early_data: Optional[bool] = None
    error: Optional[str] = None


@dataclass(frozen=True)
class RevisitServer:
    """Where the timing testbed serves (from ``testbed.timing.status``)."""

    hostname: str
    tls12_port: int
    nginx_log: Path
    quic_log: Path
    quic_certfile: Path


def measure_revisits(server: RevisitServer, browsers: list[str], transports: list[str], repetitions: int,
                     emit: Callable[[VisitTiming], None], profile_root: Optional[Path] = None,
                     log: Callable[[str], None] = lambda m: None) -> None:
    """For each browser, transport and repetition: a fresh profile, a first visit, the
    connections closed, a revisit; ``emit`` gets both visits."""
    for b in browsers:
        for t in transports:
            for r in range(repetitions):
                for v in _pair(server, b, t, r, profile_root):
                    emit(v)
                log(f"{b} {t} #{r}: done")


def _pair(server: RevisitServer, browser: str, transport: str, rep: int,
          profile_root: Optional[Path]) -> list[VisitTiming]:
    from testbed.pki import spki_sha256_b64

    from .lifetime import WEBDRIVER_ERRORS, _close_connections, _first_line

    port = f":{server.tls12_port}" if transport == "tls12" else ""
    urls = {v: f"https://{server.hostname}{port}/?visit={v}-{rep}-{secrets.token_hex(6)}" for v in ("first", "revisit")}
    if transport == "quic" and browser in NO_HTTP3:
        return [VisitTiming(browser, "", transport, rep, v, urls[v], error="n/a: " + NO_HTTP3[browser])
                for v in urls]
    prof = Path(tempfile.mkdtemp(prefix=f"revisit-{browser}-", dir=profile_root))
    quic = transport == "quic"
    opts = BrowserOptions(browser=browser, profile_dir=prof / "p",
                          quic_origins=(f"{server.hostname}:443",) if quic else (),
                          spki_hashes=(spki_sha256_b64(server.quic_certfile),) if quic else ())
    b = None
    version = ""
    # the servers' logs grow for ever: read only what this pair's visits appended
    since = {log: _size(log) for log in (server.nginx_log, server.quic_log)}
    seen: dict[str, dict] = {}
    errors: dict[str, str] = {}
    try:
        b = start_browser(opts)
        version = b.version
        b.driver.get(WARM_UP_URL)   # the first navigation of a fresh browser is slow for reasons of its own
        for v in ("first", "revisit"):
            try:
                if v == "revisit":
                    _close_connections(b, server.hostname)
                b.driver.get(urls[v])
                seen[v] = b.driver.execute_script(NAV_TIMING_JS) or {}
            except WEBDRIVER_ERRORS as exc:
                errors[v] = f"the browser failed: {_first_line(exc)}"
    except WEBDRIVER_ERRORS as exc:
        for v in urls:
            errors.setdefault(v, f"the browser failed: {_first_line(exc)}")
    finally:
        if b is not None:
            b.quit()
        shutil.rmtree(prof, ignore_errors=True)
    time.sleep(0.2)   # the server's log line follows the response
    # a browser may fall back from HTTP/3 to TCP (Firefox does on revisits under delay): the
    # TCP server's log then has the visit
    evidence = {**_nginx_evidence(_appended(server.nginx_log, since[server.nginx_log]), urls),
                **(_quic_evidence(_appended(server.quic_log, since[server.quic_log]), urls) if quic else {})}
    out = []
    for v, url in urls.items():
        nav = seen.get(v)
        ev = evidence.get(url, {})
        if not nav:
            out.append(VisitTiming(browser, version, transport, rep, v, url, error=errors.get(v, "no navigation timing")))
            continue
        cs, ce, ss = nav.get("connectStart"), nav.get("connectEnd"), nav.get("secureConnectionStart")
        out.append(VisitTiming(
            browser, version, transport, rep, v, url, next_hop_protocol=nav.get("nextHopProtocol") or None,
            connect_ms=_ms(ce - cs) if cs is not None and ce is not None else None,
            tls_ms=_ms(ce - ss) if ss and ce is not None else None,
            ttfb_ms=_ms(nav.get("responseStart")), response_end_ms=_ms(nav.get("responseEnd")),
            server_protocol=ev.get("protocol"), server_resumed=ev.get("resumed"),
            server_early_data=ev.get("early_data"),
            error=None if ev else "no server record of this visit"))
    return out


def _ms(x) -> Optional[float]:
    return None if x is None else round(float(x), 3)


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def _appended(path: Path, offset: int) -> list[str]:
    """The lines ``path`` gained since it was ``offset`` bytes long."""
    try:
        with open(path, "rb") as f:
            f.seek(offset)
            return f.read().decode(errors="replace").splitlines()
    except OSError:
        return []


def _nginx_evidence(lines: list[str], urls: dict[str, str]) -> dict[str, dict]:
    """url -> what nginx logged for its request (the timing testbed's ``revisit`` log format:
    JSON with protocol, session_reused 'r' or '.', early_data '1' or '')."""
    want = {"/" + u.split("/", 3)[3]: u for u in urls.values()}
    out: dict[str, dict] = {}
    for ln in lines:
        try:
            rec = json.loads(ln)
        except ValueError:
            continue
        if not isinstance(rec, dict):
            continue
        url = want.get(rec.get("uri", ""))
        if url and url not in out:
            out[url] = {"protocol": rec.get("protocol") or None, "resumed": rec.get("reused") == "r",
                        "early_data": rec.get("early_data") == "1"}
    return out


def _quic_evidence(lines: list[str], urls: dict[str, str]) -> dict[str, dict]:
    """url -> the QUIC server's account: the request event with the URL's path, and the
    connection event of the same client port (resumed, 0-RTT accepted)."""
    want = {"/" + u.split("/", 3)[3]: u for u in urls.values()}
    events = []
    for ln in lines:
        try:
            events.append(json.loads(ln))
        except ValueError:
            continue
    conns = {}
    events = [e for e in events if isinstance(e, dict)]
    for e in events:
        if e.get("event") == "connection":
            conns[(e.get("client_address"), e.get("client_port"))] = e
    out: dict[str, dict] = {}
    for e in events:
        url = want.get(e.get("path", "")) if e.get("event") == "request" else None
        if url and url not in out:
            c = conns.get((e.get("client_address"), e.get("client_port")), {})
            out[url] = {"protocol": "quic", "resumed": c.get("session_resumed"),
                        "early_data": c.get("early_data_accepted")}
    return out
