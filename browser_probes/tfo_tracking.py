"""TCP Fast Open across applications (Sy 2019, Table 3.2 "TFO" rows; cross-application
tracking): the kernel keeps one TFO cookie per (client address, server address) for every
application, so a cookie one program obtained is presented by the next.

Steps, all in the vantage namespace against a TFO-enabled testbed web server
(www.example.test, nginx ``fastopen``), seen by the server-side observer:

1. the vantage kernel's cached TCP metrics for the server are deleted (``ip tcp_metrics
   delete``) so the first application must request a fresh cookie;
2. ``curl --tcp-fastopen`` (application 1) fetches the page: its SYN carries an empty TFO
   option (cookie request) and the SYN-ACK issues the cookie;
3. the browser visits the same server (application 2);
4. a second, independent ``curl --tcp-fastopen`` process (application 3) fetches again.

Verdicts: ``tfo-cookie`` (the browser's SYNs carried the cookie of application 1; n/a when
they carry no TFO option at all: the browser has no TFO) and ``tfo-cookie-kernel``
(application 3 presented application 1's cookie: cross-application linkage by the kernel).
curl's connections are recognised by a reserved source-port range, the browser's by its
sockets (:mod:`~browser_probes.owner`).
"""
from __future__ import annotations

import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Callable, Optional

from .drivers import BrowserOptions, start_browser
from .owner import SocketOwners, attribute
from .tracking import ObserverProcess, Verdict, _service_pid

TFO_HOST = "www.example.test"
CURL_PORTS = {"curl-1": (47101, 47120), "curl-2": (47121, 47140)}


def tfo_addresses(truth: dict) -> set[str]:
    """IPv4 and IPv6 addresses of the TFO web server (the observer watches both)."""
    return set(next(h["addresses"] for h in truth["tls_hosts"] if h["hostname"] == TFO_HOST))


def _curl(step: str, ca_file: Optional[str]) -> None:
    lo, hi = CURL_PORTS[step]
    cmd = ["curl", "-s", "-o", "/dev/null", "--max-time", "5", "--tcp-fastopen", "--http1.1",
           "--local-port", f"{lo}-{hi}", f"https://{TFO_HOST}/"]
    cmd[1:1] = ["--cacert", ca_file] if ca_file else ["-k"]
    subprocess.run(cmd, check=False, timeout=10)


def _in_range(r: dict, step: str) -> bool:
    lo, hi = CURL_PORTS[step]
    return lo <= r["client_port"] <= hi


def judge_cross_app(wait_s: float, curl1: list[dict], browser: list[dict], curl2: list[dict]) -> list[Verdict]:
    cookies = {r["issued_tfo_cookie"] for r in curl1 if r.get("issued_tfo_cookie")}
    cookies |= {r["tfo_cookie"] for r in curl1 if r.get("tfo_cookie")}
    out = []
    if not cookies:
        detail = f"application 1 (curl) obtained no TFO cookie ({len(curl1)} connections)"
        return [Verdict("cross-app", m, wait_s, None, None, None, "n/a", detail)
                for m in ("tfo-cookie", "tfo-cookie-kernel")]
    with_opt = [r for r in browser if r.get("tfo_cookie") is not None]
    if not browser:
        out.append(Verdict("cross-app", "tfo-cookie", wait_s, None, None, None, "n/a",
                           "no browser connection observed"))
    elif not with_opt:
        out.append(Verdict("cross-app", "tfo-cookie", wait_s, None, None, None, "n/a",
                           f"not supported: none of the browser's {len(browser)} SYNs carried a TFO option "
                           "(TCP option 34)"))
    else:
        hits = [r for r in with_opt if r["tfo_cookie"] in cookies]
        out.append(Verdict("cross-app", "tfo-cookie", wait_s, None, bool(hits), None,
                           "viable" if hits else "blocked",
                           f"{len(with_opt)}/{len(browser)} browser SYNs with TFO option, {len(hits)} with curl's cookie"))
    hits = [r for r in curl2 if r.get("tfo_cookie") in cookies]
    out.append(Verdict("cross-app", "tfo-cookie-kernel", wait_s, None, bool(hits) if curl2 else None, None,
                       ("viable" if hits else "blocked") if curl2 else "n/a",
                       f"curl 1 got cookie {sorted(cookies)[0]}; second curl process: {len(curl2)} SYNs, "
                       f"{len(hits)} presenting it"))
    return out


def run_cross_app(browser: str, obs: ObserverProcess, addresses: set[str], ca_file: Optional[str],
                  on_connections: Callable[[str, list[dict]], None] = lambda step, recs: None,
                  wait_s: float = 0.0, profile_root: Optional[Path] = None) -> tuple[list[Verdict], str]:
    for a in addresses:
        subprocess.run(["ip", "tcp_metrics", "delete", a], capture_output=True, check=False)
    t0 = time.time()
    _curl("curl-1", ca_file)
    time.sleep(wait_s)
    prof = Path(tempfile.mkdtemp(prefix=f"tfo-{browser}-", dir=profile_root))
    owners = SocketOwners(addresses)
    b = None
    try:
        b = start_browser(BrowserOptions(browser=browser, profile_dir=prof))
        owners.add_root(_service_pid(b))
        version = b.version
        b.driver.get(f"https://{TFO_HOST}/")
        time.sleep(0.3)
    finally:
        if b is not None:
            b.quit()
        owners.close()
        shutil.rmtree(prof, ignore_errors=True)
    _curl("curl-2", ca_file)
    time.sleep(1.6)
    recs = obs.since(t0, time.time())
    curl1 = [dict(r, client_app="curl") for r in recs if _in_range(r, "curl-1")]
    curl2 = [dict(r, client_app="curl") for r in recs if _in_range(r, "curl-2")]
    mine = attribute([r for r in recs if not _in_range(r, "curl-1") and not _in_range(r, "curl-2")],
                     owners.ports("tcp"))
    brow = [dict(r, client_app=browser) for r in mine]
    on_connections("curl-1", curl1)
    on_connections("browser", brow)
    on_connections("curl-2", curl2)
    return judge_cross_app(wait_s, curl1, brow, curl2), version
