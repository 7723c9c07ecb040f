"""Tracking via QUIC state (Sy 2019, Table 6.1 analogue): does a browser present, after a
wait, the NEW_TOKEN token and the session ticket (TLS 1.3 PSK) a QUIC server gave it earlier?

Server-side truth is the JSON event log of the testbed's QUIC server
(``testbed/quic_server.py``): ``token_issued`` / ``ticket_issued`` per connection and, per
handshake, the token and ticket the client presented with the server's verdict. Only events
of the browser's own UDP sockets count (:mod:`~browser_probes.owner`).

Chromium reaches the testbed over HTTP/3 only with ``--origin-to-force-quic-on`` and the
server certificate's SPKI hash; between the contexts the QUIC session is closed through
``chrome://net-internals`` ("flush socket pools"), otherwise the revisit reuses it (aioquic's
idle timeout is 60 s). Firefox: HTTP/3 enabled with an Alt-Svc test mapping and
``network.http.http3.disable_when_third_party_roots_found`` off (the certificate is accepted
through WebDriver's acceptInsecureCerts); its idle QUIC connection is closed from the chrome
context (observer topic ``net:prune-all-connections``, geckodriver ``--allow-system-access``).
Firefox's QUIC socket is not connected; it is attributed by its local UDP port all the same.

Mechanisms: ``quic-token`` (presented = the exact token bytes issued in context 1;
lifetime = token_max_age, which the server never tells the client) and ``quic-psk``
(presented = a ticket issued in context 1; the client is told ticket_lifetime).
"""
from __future__ import annotations

import json
import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Optional

from .drivers import NO_HTTP3, BrowserOptions, start_browser
from .owner import SocketOwners
from .tracking import Verdict, _close_tab, _service_pid, uncached

QUIC_STATE = Path("/run/netsurvey/testbed/quic")


@dataclass(frozen=True)
class QuicProbe:
    """A testbed QUIC host.

    :ivar token_max_age_s: server-side token validity (not announced), seconds.
    :ivar ticket_lifetime_s: ticket_lifetime announced in NewSessionTicket, seconds.
    """

    host: str
    address: str
    token_max_age_s: float
    ticket_lifetime_s: float
    config_file: Path


def quic_experiments(truth: dict, state_dir: Path = QUIC_STATE) -> dict[str, QuicProbe]:
    """``quic-lifetime`` (quic.track.test, 600 s) and ``quic-hint`` (qhint.track.test, 4 s)."""
    hosts = {h["hostname"]: h for h in truth["quic_hosts"]}

    def probe(name: str) -> QuicProbe:
        h = hosts[name]
        return QuicProbe(name, h["addresses"][0], float(h["token_max_age"]), float(h["ticket_lifetime"]),
                         state_dir / f"{name}.json")

    return {"quic-lifetime": probe("quic.track.test"), "quic-hint": probe("qhint.track.test")}


def _flush_connections(b) -> None:
    """Close the browser's open connections (Chromium: net-internals 'flush socket pools';
    Firefox: the observer topic the network stack closes idle connections on)."""
    if b.name == "chromium":
        b.driver.get("chrome://net-internals/#sockets")
        b.driver.execute_script("var e = document.getElementById('sockets-view-flush-button'); if (e) e.click();")
    else:
        with b.driver.context(b.driver.CONTEXT_CHROME):
            b.driver.execute_script('Services.obs.notifyObservers(null, "net:prune-all-connections");')
    time.sleep(0.2)


def judge_quic(exp: str, probe: QuicProbe, wait_s: float, first: list[dict], second: list[dict]) -> list[Verdict]:
    """Verdicts for quic-token and quic-psk from the server log events of both contexts."""
    tokens = {e["token"] for e in first if e["event"] == "token_issued"}
    tickets = {e["ticket_prefix"] for e in first if e["event"] == "ticket_issued"}
    c1 = [e for e in first if e["event"] == "connection"]
    c2 = [e for e in second if e["event"] == "connection"]
    out = []
    for mech, issued, key, status_key, lifetime in (
            ("quic-token", tokens, "token_presented", "token_status", probe.token_max_age_s),
            ("quic-psk", tickets, "ticket_presented", "ticket_status", probe.ticket_lifetime_s)):
        if not c1:
            out.append(Verdict(exp, mech, wait_s, lifetime, None, None, "n/a",
                               f"no QUIC handshake with {probe.host} in context 1"))
            continue
        if not issued:
            out.append(Verdict(exp, mech, wait_s, lifetime, None, None, "n/a",
                               f"server issued no {mech} in context 1 ({len(c1)} handshakes)"))
            continue
        if not c2:
            out.append(Verdict(exp, mech, wait_s, lifetime, None, None, "n/a",
                               f"no new QUIC handshake with {probe.host} in context 2 (connection reused?)"))
            continue
        hits = [e for e in c2 if e.get(key) and any(e[key].startswith(i) or i.startswith(e[key]) for i in issued)]
        acc = [e for e in hits if e.get(status_key) == "valid"]
        out.append(Verdict(exp, mech, wait_s, lifetime, bool(hits), bool(acc), "viable" if hits else "blocked",
                           f"context 1: {len(c1)} QUIC handshakes, {len(issued)} issued; context 2: {len(c2)} "
                           f"handshakes, {len(hits)} presenting, {len(acc)} accepted by the server"))
    return out


def run_quic_experiment(exp: str, probe: QuicProbe, browser: str, wait_s: float,
                        on_events: Callable[[str, list[dict]], None] = lambda step, ev: None,
                        profile_root: Optional[Path] = None) -> tuple[list[Verdict], str]:
    """Visit over HTTP/3, close the tab and the QUIC session, wait, revisit; judge."""
    from testbed.pki import spki_sha256_b64

    from .tracking import browser_version

    if browser in NO_HTTP3:
        return [Verdict(exp, m, wait_s, lt, None, None, "n/a", NO_HTTP3[browser])
                for m, lt in (("quic-token", probe.token_max_age_s), ("quic-psk", probe.ticket_lifetime_s))], \
            browser_version(browser)
    conf = json.loads(probe.config_file.read_text())
    log = Path(conf["log"])
    prof = Path(tempfile.mkdtemp(prefix=f"quic-{browser}-", dir=profile_root))
    bo = BrowserOptions(browser=browser, profile_dir=prof, quic_origins=(f"{probe.host}:443",),
                        spki_hashes=(spki_sha256_b64(Path(conf["certfile"])),))
    owners = SocketOwners({probe.address})
    b = None
    try:
        b = start_browser(bo)
        owners.add_root(_service_pid(b))
        version = b.version
        off0 = log.stat().st_size
        try:
            b.driver.get(uncached(f"https://{probe.host}/"))
        except Exception as exc:    # e.g. no HTTP/3: the fallback to TCP finds nothing listening
            msg = str(exc).splitlines()[0][:160]
            return [Verdict(exp, m, wait_s, lt, None, None, "n/a", f"no HTTP/3 page load: {msg}")
                    for m, lt in (("quic-token", probe.token_max_age_s), ("quic-psk", probe.ticket_lifetime_s))], version
        time.sleep(0.3)           # NEW_TOKEN follows the handshake by 50 ms
        _flush_connections(b)
        _close_tab(b)
        off1 = log.stat().st_size
        time.sleep(wait_s)
        b.driver.get(uncached(f"https://{probe.host}/"))
        time.sleep(0.5)
        off2 = log.stat().st_size
    finally:
        if b is not None:
            b.quit()
        owners.close()
        shutil.rmtree(prof, ignore_errors=True)
    mine = owners.ports("udp")
    size1 = off1 - off0
    # split by byte offset: events written before the wait belong to context 1
    first, second, pos = [], [], 0
    with open(log, "rb") as f:
        f.seek(off0)
        raw = f.read(off2 - off0).decode("utf-8", "replace")
    for line in raw.splitlines(keepends=True):
        try:
            e = json.loads(line)
        except ValueError:
            pos += len(line.encode())
            continue
        if e.get("client_port") in mine:
            (first if pos < size1 else second).append(e)
        pos += len(line.encode())
    on_events("first", first)
    on_events("second", second)
    return judge_quic(exp, probe, wait_s, first, second), version
