"""The browser's own lifetime of resumption state (Sy 2019, Tables 4.2 and 6.1 "lifetime"
columns), measured by moving the browser's clock, not by waiting.

One *probe* = a fresh browser (fresh profile) whose wall clock is moved by clockshift.c, an
LD_PRELOAD shim (:func:`~browser_probes.drivers.set_clock_offset`; libfaketime 0.9.10 could not
run Firefox and only ran Chromium with its monotonic clock faked too): it visits the host (context 1, clock
offset 0), its connections are closed, its clock is moved forward by the probe's age, and it
visits again (context 2). The server runs in real time and is configured never to expire the
state during the experiment (``*.life*.track.test``: 30-day session cache / ticket /
token lifetimes, ticket keys never rotated), so whether context 2 presents context 1's state
depends only on the browser's own limit. The age of a probe is the browser-clock time from
context 1's handshake to context 2's first connection: the offset plus the real seconds in
between.

Evidence comes from the server side, as in :mod:`~browser_probes.tracking`: the observer's
ClientHello/ServerHello records of the browser's own connections (TLS) and the QUIC server's
JSON log (QUIC). "Presented" means: TLS 1.2 session ID / ticket byte-equal to what the
server issued in context 1; TLS 1.3 PSK offered before any full handshake of context 2 (TLS
1.3 tickets travel encrypted, see tracking.py); QUIC token / ticket the server issued in
context 1 (its log).

:func:`bisect_lifetime` finds, per state, the longest presented age between 0 and
``max_age_s`` (30 days by default) to within max(1 % of the age, 60 s): probes at growing
ages until one is not presented (geometric steps while the bracket spans more than a factor
of 4, then halving). It assumes a browser presents state up to its limit and not after.
"""
from __future__ import annotations

import json
import math
import shutil
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Optional

from .drivers import CLOCK_SETTLE_S, NO_HTTP3, BrowserOptions, set_clock_offset, start_browser
from .owner import SocketOwners, attribute
from .tracking import ObserverProcess, Probe, _close_tab, _service_pid, judge

DAY_S = 86400.0
MAX_AGE_S = 30 * DAY_S
# RFC 8446 sec. 4.6.1: "Servers MUST NOT use any value greater than 604800 seconds (7 days)" for a
# TLS 1.3 ticket_lifetime; the testbed's nginx (OpenSSL) announces 604800 s for life.track.test
# (session timeout 30 days; read with Python's ssl, SSLSession.ticket_lifetime_hint, 2026-11-24).
TLS13_MAX_TICKET_LIFETIME_S = 604800.0
CLOCK_MOVER = "clockshift"       # browser_probes/clockshift.c (browser_lifetime_probe.clock_mover)
KEEPALIVE_S = 5.0          # the testbed's nginx keepalive_timeout (testbed/nginx.py)

# state -> (testbed host with never-expiring state, observer mechanism name)
TLS_STATES = {"tls12-session-id": ("lifeid.track.test", "tls-session-id"),
              "tls12-ticket": ("life12.track.test", "tls-ticket"),
              "tls13-psk": ("life.track.test", "tls13-psk")}
QUIC_STATES = {"quic-token": "qlife.track.test", "quic-psk": "qlife.track.test"}
STATES = tuple(TLS_STATES) + tuple(QUIC_STATES)
# a short-lived host of the same kind (tests: the browser must not outlive the server's limit)
SHORT_HOSTS = {"tls13-psk": "hint.track.test"}
# Older testbed configurations lack the life* hosts: the longest-lived host of each kind.
# The server's clock is real, so a probe (seconds of real time) never reaches its limit;
# only what the browser is *told* limits it: nothing for session IDs (no lifetime is sent)
# and QUIC tokens (token max age is never announced), the 600 s hint of tls12.track.test,
# the 1-day ticket lifetime of t.test and the 1-hour QUIC ticket lifetime of www.example.test.
FALLBACK_HOSTS = {"tls12-session-id": "id.track.test", "tls12-ticket": "tls12.track.test",
                  "tls13-psk": "t.test", "quic-token": "www.example.test", "quic-psk": "www.example.test"}
# engines whose clock cannot be moved here: n/a with the reason (none since clockshift.c)
NO_FAKETIME: dict[str, str] = {}
# Engines whose session cache expires by the *monotonic* clock: their monotonic clocks jump with
# the wall clock in a probe (clockshift.c, NETSURVEY_CLOCK_MONOTONIC). glib-networking 2.74
# (WebKitGTK's TLS): SESSION_CACHE_MAX_AGE = 10 min, expiration_time = g_get_monotonic_time() +
# that, checked against g_get_monotonic_time() on lookup (tls/gnutls/gtlsbackend-gnutls.c:182,
# 200, 245). Chromium (base::Time in SSLClientSessionCache, BoringSSL's gettimeofday) and Firefox
# (NSS: ssl_Time = PR_Now) compare wall-clock times only; their monotonic clocks stay real.
SHIFT_MONOTONIC = {"webkit"}
# Engines that use a resumption token once: Firefox's SSLTokensCache::Get removes the record it
# hands out (netwerk/base/SSLTokensCache.cpp, cacheEntry->RemoveWithId), so a second connection
# of the first visit can use up the TLS 1.2 ticket (TLS 1.3 servers issue several).
SINGLE_USE_TOKENS = {"firefox"}
# WebKit (glib-networking) keys its session cache by server *address*, host name, port and
# client certificate (gtlsclientconnection-gnutls.c, g_tls_client_connection_gnutls_compute_session_id:
# "%s/%s/%d/%s"): on a dual-stack host a revisit over the other address family never resumes,
# so its TLS 1.3 lifetime needs an IPv4-only host (t.test is dual-stack).
FALLBACK_BY_BROWSER = {"webkit": {"tls13-psk": "track.test"}}


@dataclass(frozen=True)
class Target:
    """What one probe series measures.

    :ivar state: one of STATES; ``host`` / ``address`` the server; ``server_limit_s`` the
        lifetime the server announces / enforces (session timeout, ticket lifetime, token max age).
    """

    state: str
    host: str
    address: str
    server_limit_s: float
    transport: str = "tcp"
    quic_config: Optional[Path] = None
    addresses: tuple[str, ...] = ()

    @property
    def all_addresses(self) -> set[str]:
        return set(self.addresses) | {self.address}


def targets(truth: dict, short: bool = False, browser: str = "") -> dict[str, Target]:
    """The lifetime targets from the testbed ground truth (``short``: the 4 s hint host for
    tls13-psk, where the answer is known: at most the server's limit)."""
    tls = {h["hostname"]: h for h in truth["tls_hosts"]}
    quic = {h["hostname"]: h for h in truth["quic_hosts"]}
    out = {}
    for st, (host, _m) in TLS_STATES.items():
        host = SHORT_HOSTS.get(st, host) if short else host
        host = host if host in tls else FALLBACK_BY_BROWSER.get(browser, {}).get(st, FALLBACK_HOSTS[st])
        if host in tls:
            a = tuple(tls[host]["addresses"])
            limit = float(tls[host]["session_timeout"])
            if st == "tls13-psk":         # what the server announces in its NewSessionTicket
                limit = min(limit, TLS13_MAX_TICKET_LIFETIME_S)
            out[st] = Target(st, host, a[0], limit, addresses=a)
    from .quic_tracking import QUIC_STATE
    for st, host in QUIC_STATES.items():
        host = host if host in quic else FALLBACK_HOSTS[st]
        if host in quic and not short:
            h = quic[host]
            limit = float(h["token_max_age"] if st == "quic-token" else h["ticket_lifetime"])
            out[st] = Target(st, host, h["addresses"][0], limit, "quic", QUIC_STATE / f"{host}.json",
                             tuple(h["addresses"]))
    return out


@dataclass
class ProbeResult:
    """One probe: the age asked for (clock offset) and measured, and what the server saw.

    :ivar presented: context 2 presented context 1's state (None = n/a, see ``detail``).
    :ivar accepted: the server resumed with it.
    :ivar evidence: server-side facts (client ports, issued / presented identifiers).
    """

    state: str
    host: str
    offset_s: float
    age_s: Optional[float]
    presented: Optional[bool]
    accepted: Optional[bool]
    detail: str
    evidence: dict = field(default_factory=dict)
    browser_version: str = ""


def _close_connections(b, host: str) -> None:
    """Close the browser's connections so context 2 needs a new handshake: Chromium's
    net-internals "flush socket pools" and Firefox's prune-all-connections; WebKit has
    neither: wait out the server's keep-alive (it closes idle connections after 5 s)."""
    from .quic_tracking import _flush_connections

    b.driver.get("about:blank")
    if b.name in ("chromium", "firefox"):
        _flush_connections(b)
        if b.name == "chromium":
            b.driver.get("about:blank")
    else:
        time.sleep(KEEPALIVE_S + 0.7)


try:
    from selenium.common.exceptions import WebDriverException
    WEBDRIVER_ERRORS: tuple = (WebDriverException, RuntimeError, OSError)
except ImportError:          # selenium missing: start_browser reports it
    WEBDRIVER_ERRORS = (RuntimeError, OSError)


def _first_line(exc: BaseException) -> str:
    return (str(getattr(exc, "msg", None) or exc).strip().splitlines() or [type(exc).__name__])[0][:160]


def _get_after_jump(b, url: str) -> None:
    """Visit ``url`` after a clock jump; one retry if WebDriver fails (under libfaketime,
    with its monotonic clock jumping too, Chromium answered the first navigation after a jump
    with "Timed out receiving message from renderer: -0.001"; not seen with clockshift)."""
    try:
        b.driver.get(url)
    except WEBDRIVER_ERRORS:
        time.sleep(0.5)
        b.driver.get(url)


def _evidence(recs: list[dict]) -> list[dict]:
    keep = ("ts", "client_port", "owned", "session_id", "ticket", "psk_identities", "server_version", "server_session_id",
            "server_accepted_psk", "issued_ticket", "issued_ticket_lifetime_s")
    out = []
    for r in recs:
        e = {k: r.get(k) for k in keep if r.get(k) is not None}
        for k in ("session_id", "ticket", "server_session_id", "issued_ticket"):
            if isinstance(e.get(k), str) and len(e[k]) > 32:
                e[k] = e[k][:32] + "..."
        out.append(e)
    return out


def _resumed(r: dict) -> bool:
    """The server resumed this connection (TLS 1.3 PSK accepted, TLS 1.2 ticket presented and
    no new ID, or the client's session ID echoed)."""
    sid = r.get("session_id")
    return bool(r.get("server_accepted_psk") or (sid and sid == r.get("server_session_id"))
                or (r.get("ticket") and r.get("server_version") == "1.2" and not r.get("issued_ticket")))


def probe_tls(browser: str, target: Target, offset_s: float, obs: ObserverProcess,
              profile_root: Optional[Path] = None) -> ProbeResult:
    """One TLS probe at clock offset ``offset_s`` (see the module doc)."""
    mech = TLS_STATES[target.state][1]
    prof = Path(tempfile.mkdtemp(prefix=f"life-{browser}-", dir=profile_root))
    spec = prof / "clock.spec"
    set_clock_offset(spec, 0)
    owners = SocketOwners(target.all_addresses)
    b = None
    version = ""
    url = f"https://{target.host}/"
    try:
        b = start_browser(BrowserOptions(browser=browser, profile_dir=prof / "p", faketime=spec,
                                         shift_monotonic=browser in SHIFT_MONOTONIC))
        owners.add_root(_service_pid(b))
        version = b.version
        t0 = time.time()
        b.driver.get(url)
        time.sleep(0.3)
        _close_connections(b, target.host)
        _close_tab(b)
        set_clock_offset(spec, offset_s)
        time.sleep(CLOCK_SETTLE_S + 0.2)
        t1 = time.time()
        _get_after_jump(b, url)
        time.sleep(1.6)          # observer linger + margin
        t2 = time.time()
    except WEBDRIVER_ERRORS as exc:
        return ProbeResult(target.state, target.host, offset_s, None, None, None,
                           f"inconclusive: the browser failed: {_first_line(exc)}", {}, version)
    finally:
        if b is not None:
            b.quit()
        owners.close()
        shutil.rmtree(prof, ignore_errors=True)
    mine = owners.ports("tcp")
    first = [r for r in attribute(obs.since(t0, t1), mine) if r.get("sni") == target.host]
    second = [r for r in attribute(obs.since(t1, t2), mine) if r.get("sni") == target.host]
    # Attribution by fingerprint also takes other Chromium/Firefox instances on the shared
    # testbed (other tests visit the same hosts): when the browser's own sockets were seen,
    # only they count.
    for recs in (first, second):
        own = [r for r in recs if r.get("client_port") in mine]
        if own:
            recs[:] = own
        for r in recs:
            r["owned"] = r.get("client_port") in mine
    v = judge("lifetime", Probe(mech, target.host, target.host, target.address, target.server_limit_s),
              offset_s, first, second)
    age = None
    if first and second:
        age = offset_s + (min(r["ts"] for r in second) - min(r["ts"] for r in first))
    detail = v.detail
    issued = {r.get("issued_ticket") for r in first if r.get("issued_ticket")}
    if (target.state == "tls12-ticket" and browser in SINGLE_USE_TOKENS and v.presented is False
            and any(_resumed(r) and r.get("ticket") in issued for r in first)):
        # a second connection of context 1 (e.g. after the connections were closed) already
        # resumed with the ticket, and Firefox uses a TLS 1.2 ticket once (seen at 1617 s while
        # 1500, 1700, 3600 s and 1 day presented): not evidence about the age. (TLS 1.3 servers
        # issue several tickets; session IDs are not consumed.)
        return ProbeResult(target.state, target.host, offset_s, age, None, None,
                           "inconclusive: context 1 already resumed its own state on a second connection ("
                           + detail + ")", {"first": _evidence(first), "second": _evidence(second)}, version)
    if v.verdict != "n/a" and not second:
        return ProbeResult(target.state, target.host, offset_s, None, None, None,
                           f"no new connection to {target.host} in context 2 (connection reused?)",
                           {"first": _evidence(first)}, version)
    return ProbeResult(target.state, target.host, offset_s, age, v.presented, v.accepted, detail,
                       {"first": _evidence(first), "second": _evidence(second)}, version)


def probe_quic(browser: str, target: Target, offset_s: float,
               profile_root: Optional[Path] = None) -> ProbeResult:
    """One QUIC probe (token or ticket) at clock offset ``offset_s``; truth = the QUIC
    server's log (quic_tracking.py)."""
    from testbed.pki import spki_sha256_b64

    from .quic_tracking import QuicProbe, _flush_connections, judge_quic

    if browser in NO_HTTP3:
        return ProbeResult(target.state, target.host, offset_s, None, None, None, "n/a: " + NO_HTTP3[browser])
    conf = json.loads(target.quic_config.read_text())
    log = Path(conf["log"])
    prof = Path(tempfile.mkdtemp(prefix=f"qlife-{browser}-", dir=profile_root))
    spec = prof / "clock.spec"
    set_clock_offset(spec, 0)
    bo = BrowserOptions(browser=browser, profile_dir=prof / "p", faketime=spec,
                        quic_origins=(f"{target.host}:443",), spki_hashes=(spki_sha256_b64(Path(conf["certfile"])),))
    owners = SocketOwners(target.all_addresses)
    b = None
    version = ""
    try:
        b = start_browser(bo)
        owners.add_root(_service_pid(b))
        version = b.version
        off0 = log.stat().st_size
        try:
            b.driver.get(f"https://{target.host}/")
        except Exception as exc:
            msg = str(exc).splitlines()[0][:160]
            return ProbeResult(target.state, target.host, offset_s, None, None, None,
                               f"no HTTP/3 page load: {msg}", {}, version)
        time.sleep(0.3)
        _flush_connections(b)
        _close_tab(b)
        off1 = log.stat().st_size
        set_clock_offset(spec, offset_s)
        time.sleep(CLOCK_SETTLE_S + 0.2)
        _get_after_jump(b, f"https://{target.host}/")
        time.sleep(0.5)
        off2 = log.stat().st_size
    except WEBDRIVER_ERRORS as exc:
        return ProbeResult(target.state, target.host, offset_s, None, None, None,
                           f"inconclusive: the browser failed: {_first_line(exc)}", {}, version)
    finally:
        if b is not None:
            b.quit()
        owners.close()
        shutil.rmtree(prof, ignore_errors=True)
    mine = owners.ports("udp")
    first, second = [], []
    with open(log, "rb") as f:
        f.seek(off0)
        raw = f.read(off2 - off0)
    pos = 0
    for line in raw.splitlines(keepends=True):
        try:
            e = json.loads(line)
        except ValueError:
            e = {}
        if e.get("client_port") in mine:
            (first if pos < off1 - off0 else second).append(e)
        pos += len(line)
    qp = QuicProbe(target.host, target.address, target.server_limit_s, target.server_limit_s, target.quic_config)
    mech = "quic-token" if target.state == "quic-token" else "quic-psk"
    v = next(x for x in judge_quic("lifetime", qp, offset_s, first, second) if x.mechanism == mech)
    c1 = [e for e in first if e["event"] == "connection"]
    c2 = [e for e in second if e["event"] == "connection"]
    age = offset_s + (c2[0]["ts"] - c1[0]["ts"]) if c1 and c2 else None
    ev = {"first": [{k: e.get(k) for k in ("event", "ts", "client_port", "token", "ticket_prefix")
                     if e.get(k) is not None} for e in first][:8],
          "second": [{k: e.get(k) for k in ("ts", "client_port", "token_presented", "token_status",
                                            "ticket_presented", "ticket_status", "session_resumed")
                      if e.get(k) is not None} for e in c2][:4]}
    return ProbeResult(target.state, target.host, offset_s, age, v.presented, v.accepted, v.detail, ev, version)


@dataclass
class Bisection:
    """Result of :func:`bisect_lifetime`: every probe, the longest presented age and the
    shortest age not presented (None when never seen)."""

    state: str
    probes: list[ProbeResult]
    longest_presented_s: Optional[float]
    shortest_absent_s: Optional[float]
    status: str          # measured | at-least-max | never-presented | inconsistent | n/a
    detail: str = ""


def resolution_s(age_s: float, rel: float = 0.01, abs_s: float = 60.0) -> float:
    """The bracket width at which the bisection stops: 1 % of the age or one minute."""
    return max(rel * age_s, abs_s)


def bisect_lifetime(probe: Callable[[float], ProbeResult], state: str, max_age_s: float = MAX_AGE_S,
                    rel: float = 0.01, abs_s: float = 60.0, first_offset_s: float = 0.0,
                    on_probe: Callable[[ProbeResult], None] = lambda p: None) -> Bisection:
    """Longest age at which ``probe(offset)`` is still presented, within
    :func:`resolution_s`. Brackets are in clock offsets; results report measured ages."""
    probes: list[ProbeResult] = []

    def run(off: float) -> ProbeResult:
        p = probe(off)
        probes.append(p)
        on_probe(p)
        return p

    p0 = run(first_offset_s)
    if p0.presented is None:
        return Bisection(state, probes, None, None, "n/a", p0.detail)
    if not p0.presented:
        return Bisection(state, probes, None, p0.age_s, "never-presented",
                         "not presented even right after the first visit")
    lo, lo_age = first_offset_s, p0.age_s
    p_hi = run(max_age_s)
    if p_hi.presented is None:
        return Bisection(state, probes, lo_age, None, "n/a", p_hi.detail)
    if p_hi.presented:
        return Bisection(state, probes, p_hi.age_s, None, "at-least-max",
                         f"still presented at the largest age tried ({max_age_s / DAY_S:g} days)")
    hi, hi_age = max_age_s, p_hi.age_s
    n = 0
    while hi - lo > resolution_s(lo, rel, abs_s) and n < 40:
        n += 1
        mid = math.sqrt(max(lo, 1.0) * hi) if hi / max(lo, 1.0) > 4 else (lo + hi) / 2
        p = run(mid)
        if p.presented is None:       # an inconclusive probe: try once more, then stop
            p = run(mid)
            if p.presented is None:
                return Bisection(state, probes, lo_age, hi_age, "n/a", f"inconclusive probe at {mid:g} s: {p.detail}")
        if p.presented:
            lo, lo_age = mid, p.age_s
        else:
            hi, hi_age = mid, p.age_s
    return check_consistent(Bisection(state, probes, lo_age, hi_age, "measured"))


def check_consistent(b: Bisection) -> Bisection:
    """A browser that presents state at some age must present it at every shorter one: if a
    probe presented at an age above one that did not, the bracket means nothing and the
    result is ``inconsistent`` (seen with Chromium under a faked monotonic clock)."""
    yes = [p.age_s for p in b.probes if p.presented and p.age_s is not None]
    no = [p.age_s for p in b.probes if p.presented is False and p.age_s is not None]
    if yes and no and max(yes) > min(no):
        return Bisection(b.state, b.probes, max(yes), min(no), "inconsistent",
                         f"presented at {max(yes):.0f} s but not at {min(no):.0f} s (of {len(b.probes)} probes): "
                         "the browser's presentation is not monotonic in the age")
    return b


def run_lifetime(db, run_id: int, truth: dict, browsers: list[str], states: list[str], max_age_s: float,
                 rel: float, abs_s: float, offsets: list[float], short: bool,
                 log: Optional[Callable[[str], None]] = None) -> list[dict]:
    """Bisect (or probe at ``offsets``) every state for every browser; store every probe in
    browser_lifetime_probe and the results in browser_lifetime. Returns the result rows."""
    from .tracking import os_description

    per_browser = {b: targets(truth, short=short, browser=b) for b in browsers}
    osd = os_description()
    tls_addrs = set().union(*[t.all_addresses for tg in per_browser.values() for s, t in tg.items()
                              if s in states and t.transport == "tcp"])
    obs = ObserverProcess(tls_addrs) if tls_addrs else None
    conn = db.connect()
    counter = [0]
    out = []

    def store(browser: str, t: Target, p: ProbeResult) -> None:
        with conn.transaction():
            conn.execute(
                "INSERT INTO browser_lifetime_probe (run_id, probe_no, browser, browser_version, state, server_name,"
                " server_limit_s, clock_offset_s, age_s, presented, accepted, detail, evidence, clock_mover,"
                " monotonic_shifted) VALUES (%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s)",
                (run_id, counter[0], browser, p.browser_version or None, t.state, t.host, t.server_limit_s,
                 p.offset_s, p.age_s, p.presented, p.accepted, p.detail, json.dumps(p.evidence), CLOCK_MOVER,
                 browser in SHIFT_MONOTONIC))
        counter[0] += 1
        if log:
            log(f"{browser} {t.state} offset {p.offset_s:.0f} s age "
                f"{'-' if p.age_s is None else f'{p.age_s:.1f}'} s: presented={p.presented} ({p.detail})")

    try:
        for browser in browsers:
            tgts = per_browser[browser]
            for st in states:
                if st not in tgts:
                    raise RuntimeError(f"the testbed has no host for {st} (config/testbed.toml: life*.track.test)")
                t = tgts[st]

                def one(off: float, _b=browser, _t=t) -> ProbeResult:
                    if _t.transport == "quic":
                        return probe_quic(_b, _t, off)
                    return probe_tls(_b, _t, off, obs)

                if browser in NO_HTTP3 and t.transport == "quic":
                    res = Bisection(st, [], None, None, "n/a", NO_HTTP3[browser])
                elif browser in NO_FAKETIME:
                    res = Bisection(st, [], None, None, "n/a", NO_FAKETIME[browser])
                elif offsets:
                    ps = []
                    for off in offsets:
                        p = one(off)
                        store(browser, t, p)
                        ps.append(p)
                        if p.presented is None and not p.detail.startswith("n/a"):   # inconclusive: once more
                            p = one(off)
                            store(browser, t, p)
                            ps.append(p)
                    yes = [p.age_s for p in ps if p.presented and p.age_s is not None]
                    no = [p.age_s for p in ps if p.presented is False and p.age_s is not None]
                    top = max(ps, key=lambda p: p.offset_s)
                    if yes and no:
                        status = "measured"
                    elif no and not yes:
                        status = "never-presented"
                    elif yes and top.presented:
                        status = "at-least-max"
                    else:
                        status = "n/a"
                    res = check_consistent(Bisection(
                        st, ps, max(yes) if yes else None, min(no) if no else None, status,
                        "probes at fixed offsets, not a bisection" +
                        ("" if status != "n/a" else f"; inconclusive: {top.detail}")))
                else:
                    res = bisect_lifetime(one, st, max_age_s, rel, abs_s,
                                          on_probe=lambda p, _b=browser, _t=t: store(_b, _t, p))
                version = next((p.browser_version for p in res.probes if p.browser_version), None)
                if version is None:
                    from .tracking import browser_version
                    version = browser_version(browser)
                row = dict(browser=browser, browser_version=version, os=osd, state=st, server_name=t.host,
                           server_limit_s=t.server_limit_s, max_age_s=max_age_s,
                           longest_presented_age_s=res.longest_presented_s,
                           shortest_absent_age_s=res.shortest_absent_s, status=res.status,
                           probes=len(res.probes), detail=res.detail or None)
                with conn.transaction():
                    conn.execute(
                        "INSERT INTO browser_lifetime (run_id, browser, browser_version, os, state, server_name,"
                        " server_limit_s, max_age_s, longest_presented_age_s, shortest_absent_age_s, status, probes,"
                        " detail, clock_mover) VALUES (%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s)",
                        (run_id, *row.values(), CLOCK_MOVER))
                out.append(row)
    finally:
        if obs is not None:
            obs.close()
        conn.close()
    return out
