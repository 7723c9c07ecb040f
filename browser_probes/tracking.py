"""Tracking-period probes (Sy 2019, Tables 3.2, 4.2, 6.1): does a browser present, in a
later context, an identifier the server gave it in an earlier one?

Each experiment is two contexts: the browser visits pages (context 1), the tab is closed
(or the browser restarted), we wait, and it visits pages again (context 2). The
server-side :mod:`~browser_probes.observer` records every connection's ClientHello and
the server's answer; the verdict per mechanism compares context 2's presented
identifiers with what the server issued in context 1:

* ``tls-session-id`` (TLS 1.2): the ClientHello's session ID equals one the server set;
* ``tls-ticket`` (TLS 1.2): the SessionTicket extension holds a ticket issued in context 1
  (NewSessionTicket is cleartext in TLS 1.2);
* ``tls13-psk``: a pre_shared_key identity is offered before (or without) any full
  handshake in context 2 (a later PSK may be a ticket context 2 itself obtained). TLS 1.3
  tickets travel encrypted, so linking relies on isolation: a fresh profile, hosts contacted
  only in context 1, and only the browser's own connections (:mod:`~browser_probes.owner`).

Every host is a dedicated IPv4-only testbed host (``*.track.test``); the third-party
experiment uses the distinct sites tpa.test / tpb.test embedding tp.track.test.
"""
from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Optional

from .drivers import Browser, BrowserOptions, start_browser
from .owner import SocketOwners, attribute

REPO = Path(__file__).resolve().parent.parent
WEB_NETNS = "nstb-web"


@dataclass(frozen=True)
class Probe:
    """A host whose identifiers of one mechanism are tracked.

    :ivar first_host: host visited in context 1; ``second_host`` in context 2 (differs for
        virtual hosts and third parties); ``address`` their server address.
    :ivar expected_max_s: lifetime the server announces (session timeout / hint), seconds.
    """

    mechanism: str
    first_host: str
    second_host: str
    address: str
    expected_max_s: float


@dataclass(frozen=True)
class Experiment:
    """Two contexts: ``first_urls`` then ``second_urls`` after ``between`` (tab | restart)."""

    name: str
    first_urls: tuple[str, ...]
    second_urls: tuple[str, ...]
    probes: tuple[Probe, ...]
    between: str = "tab"
    private: bool = False
    description: str = ""


def experiments(truth: dict) -> dict[str, Experiment]:
    """The experiments, with addresses and lifetimes taken from the testbed ground truth."""
    hosts = {h["hostname"]: h for h in truth["tls_hosts"]}

    def probe(mech: str, h1: str, h2: Optional[str] = None) -> Probe:
        h = hosts[h1]
        return Probe(mech, h1, h2 or h1, h["addresses"][0], float(h["session_timeout"]))

    own = (probe("tls13-psk", "track.test"), probe("tls-ticket", "tls12.track.test"),
           probe("tls-session-id", "id.track.test"))
    own_urls = tuple(f"https://{p.first_host}/" for p in own)
    return {
        "lifetime": Experiment("lifetime", own_urls, own_urls, own,
                               description="visit, close the tab, wait, revisit"),
        "hint": Experiment("hint", ("https://hint.track.test/",), ("https://hint.track.test/",),
                           (probe("tls13-psk", "hint.track.test"),),
                           description="revisit after the server's lifetime hint expired"),
        "third-party": Experiment("third-party", ("https://tpa.test/",), ("https://tpb.test/",),
                                  (probe("tls13-psk", "tp.track.test"),),
                                  description="tp.track.test embedded by site tpa.test, then by site tpb.test"),
        "restart": Experiment("restart", own_urls, own_urls, own, between="restart",
                              description="same profile after a browser restart"),
        "private": Experiment("private", own_urls, own_urls, own, private=True,
                              description="private/incognito window: close the tab, wait, revisit"),
        "vhost": Experiment("vhost", ("https://vh.track.test/",), ("https://vh2.track.test/",),
                            (probe("tls13-psk", "vh.track.test", "vh2.track.test"),),
                            description="two names on one address and certificate"),
    }


class ObserverProcess:
    """The observer running in the web namespace; collects its JSON lines in a thread."""

    def __init__(self, addresses: set[str], clients: Optional[set[str]] = None):
        """``clients``: keep only connections from these client addresses (the tracking
        vantage's own, behind the delay line: nothing else uses them), else every client."""
        self.clients = clients
        env = dict(os.environ, PYTHONPATH=str(REPO))
        self.proc = subprocess.Popen(
            ["ip", "netns", "exec", WEB_NETNS, sys.executable, "-m", "browser_probes.observer", "--linger", "1.0",
             *[a for addr in sorted(addresses) for a in ("--address", addr)]],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=REPO)
        first = self.proc.stdout.readline().strip()
        if first != "READY":
            err = self.proc.stderr.read()[-300:] if self.proc.poll() is not None else ""
            raise RuntimeError(f"observer did not start: {first!r} {err}")
        self.records: list[dict] = []
        self._lock = threading.Lock()
        self._t = threading.Thread(target=self._read, daemon=True)
        self._t.start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            try:
                rec = json.loads(line)
            except ValueError:
                continue
            with self._lock:
                self.records.append(rec)

    def since(self, t0: float, t1: float) -> list[dict]:
        with self._lock:
            return [r for r in self.records if t0 <= r["ts"] < t1
                    and (self.clients is None or r.get("client") in self.clients)]

    def close(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(5)
        except subprocess.TimeoutExpired:
            self.proc.kill()


@dataclass(frozen=True)
class Verdict:
    """Outcome for one probe: ``presented`` (linkable identifier offered in context 2),
    ``accepted`` (server resumed), ``verdict`` viable/blocked/n/a, and how."""

    experiment: str
    mechanism: str
    wait_s: float
    expected_max_s: float
    presented: Optional[bool]
    accepted: Optional[bool]
    verdict: str
    detail: str


def judge(exp: str, probe: Probe, wait_s: float, first: list[dict], second: list[dict]) -> Verdict:
    """Compare what context 2 presented with what context 1 was issued (see module doc)."""
    c1 = [r for r in first if r.get("sni") == probe.first_host]
    c2 = [r for r in second if r.get("sni") == probe.second_host]
    m = probe.mechanism
    if m == "tls-session-id":
        issued = {r["server_session_id"] for r in c1 if r.get("server_version") == "1.2" and r.get("server_session_id")}
        hits = [r for r in c2 if r.get("session_id") in issued]
        acc = [r for r in hits if r.get("server_session_id") == r.get("session_id")]
    elif m == "tls-ticket":
        issued = {r["issued_ticket"] for r in c1 if r.get("issued_ticket")}
        hits = [r for r in c2 if r.get("ticket") and r["ticket"] in issued]
        acc = [r for r in hits if r.get("server_session_id") and r.get("server_session_id") == r.get("session_id")]
    else:  # tls13-psk
        issued = {"(encrypted)"} if any(r.get("server_version") == "1.3" for r in c1) else set()
        # a PSK offered after a full handshake in context 2 may be that handshake's own ticket:
        # only connections up to the first full handshake of context 2 can link to context 1
        full = [r["ts"] for r in c2 if r.get("server_version") == "1.3" and not r.get("server_accepted_psk")]
        hits = [r for r in c2 if r.get("psk_identities") and (not full or r["ts"] <= min(full))]
        acc = [r for r in hits if r.get("server_accepted_psk")]
    if not c1:
        return Verdict(exp, m, wait_s, probe.expected_max_s, None, None, "n/a",
                       f"no connection to {probe.first_host} in context 1")
    if not c2:   # nothing could be presented: no evidence either way (not 'blocked')
        return Verdict(exp, m, wait_s, probe.expected_max_s, None, None, "n/a",
                       f"inconclusive: no connection to {probe.second_host} in context 2")
    if not issued:
        return Verdict(exp, m, wait_s, probe.expected_max_s, None, None, "n/a",
                       f"server issued no {m} in context 1 ({len(c1)} connections)")
    presented = bool(hits)
    detail = (f"context 1: {len(c1)} connections to {probe.first_host}; context 2: {len(c2)} to "
              f"{probe.second_host}, {len(hits)} presenting, {len(acc)} resumed")
    return Verdict(exp, m, wait_s, probe.expected_max_s, presented, bool(acc) if c2 else None,
                   "viable" if presented else "blocked", detail)


# experiments an engine cannot run, with the reason (n/a, not blocked)
NA_EXPERIMENTS = {"webkit": {
    "private": "MiniBrowser under WebDriver runs only an ephemeral automation session: no private mode to "
               "switch to (WebKitWebDriver has no private-browsing capability)"}}


def browser_version(browser: str) -> str:
    """Installed version without starting the browser (for n/a rows)."""
    import re

    from .drivers import CHROMIUM_BINARY, FIREFOX_BINARY

    if browser == "webkit":
        try:
            out = subprocess.run(["dpkg-query", "-W", "-f=${Version}", "libwebkit2gtk-4.1-0"],
                                 capture_output=True, text=True, timeout=10).stdout
            m = re.match(r"[0-9.]+", out)
            return m.group(0).rstrip(".") if m else "?"
        except (OSError, subprocess.SubprocessError):
            return "?"
    binary = CHROMIUM_BINARY if browser == "chromium" else FIREFOX_BINARY
    try:
        out = subprocess.run([binary, "--version"], capture_output=True, text=True, timeout=20).stdout
    except (OSError, subprocess.SubprocessError):
        return "?"
    m = re.search(r"[0-9]+(\.[0-9]+)+", out)
    return m.group(0) if m else "?"


def uncached(url: str) -> str:
    """``url`` with a fresh nonce in its query: the browser must fetch it from the server.
    Without one, Firefox served a revisit from its HTTP cache and opened no connection at all
    (issue 25: Firefox under lte, tls12.track.test, 3 of 4 runs: "0 connections in context 2",
    no request in nginx's log), which said nothing about its TLS state."""
    import uuid

    return f"{url}{'&' if '?' in url else '?'}nstrack={uuid.uuid4().hex[:12]}"


def _visit_all(b: Browser, urls: tuple[str, ...]) -> None:
    for u in urls:
        b.driver.get(uncached(u))


def _close_tab(b: Browser) -> None:
    old = b.driver.current_window_handle
    b.driver.switch_to.new_window("tab")
    new = b.driver.current_window_handle
    b.driver.switch_to.window(old)
    b.driver.close()
    b.driver.switch_to.window(new)


def _service_pid(b: Browser) -> int:
    return b.driver.service.process.pid


def run_experiment(exp: Experiment, browser: str, wait_s: float, obs: ObserverProcess,
                   on_connections: Callable[[str, list[dict]], None] = lambda step, recs: None,
                   profile_root: Optional[Path] = None) -> tuple[list[Verdict], str]:
    """Run one experiment with one wait; returns the verdicts and the browser version.

    Only connections of this browser count (:mod:`~browser_probes.owner`): others may use
    the shared testbed at the same time."""
    import shutil
    import tempfile

    if browser in NA_EXPERIMENTS and exp.name in NA_EXPERIMENTS[browser]:
        why = NA_EXPERIMENTS[browser][exp.name]
        return [Verdict(exp.name, p.mechanism, wait_s, p.expected_max_s, None, None, "n/a", why)
                for p in exp.probes], browser_version(browser)
    prof = Path(tempfile.mkdtemp(prefix=f"track-{browser}-", dir=profile_root))
    bo = BrowserOptions(browser=browser, profile_dir=prof, private=exp.private)
    owners = SocketOwners({p.address for p in exp.probes})
    b = None
    try:
        b = start_browser(bo)
        owners.add_root(_service_pid(b))
        version = b.version
        t0 = time.time()
        _visit_all(b, exp.first_urls)
        if exp.between == "restart":
            b.quit()
        elif exp.private:
            b.driver.get("about:blank")   # a new tab in headless incognito hangs the renderer
        else:
            _close_tab(b)
        time.sleep(wait_s)
        t1 = time.time()
        if exp.between == "restart":
            b = start_browser(bo)
            owners.add_root(_service_pid(b))
        _visit_all(b, exp.second_urls)
        time.sleep(1.6)     # observer linger + margin
        t2 = time.time()
    finally:
        if b is not None:
            b.quit()
        owners.close()
        shutil.rmtree(prof, ignore_errors=True)
    mine = owners.ports("tcp")
    first, second = attribute(obs.since(t0, t1), mine), attribute(obs.since(t1, t2), mine)
    on_connections("first", first)
    on_connections("second", second)
    return [judge(exp.name, p, wait_s, first, second) for p in exp.probes], version


def os_description() -> str:
    return f"{platform.system()} {platform.release()} ({platform.freedesktop_os_release().get('PRETTY_NAME', '')})" \
        if hasattr(platform, "freedesktop_os_release") else platform.platform()
