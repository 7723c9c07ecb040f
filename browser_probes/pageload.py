"""The page-load logger (BLAST): visit pages with N parallel real browsers, log every
resource with its parent and the five BLAST events, derive page load time, tree height,
domain tree and the longest path of new connections, and store it all.

A visit whose browser hangs (page-load timeout, or a watchdog when WebDriver itself stops
answering) or crashes is stored with status ``incomplete`` and the error, the browser is
killed and restarted, and the run goes on with the next page: nothing is lost silently.
"""
from __future__ import annotations

import datetime as dt
import queue
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Optional, Sequence

from .chromium_log import network_events, resources_from_events
from .drivers import Browser, BrowserOptions, start_browser
from .firefox_log import resources_from_bidi
from .procs import kill_browser
from .tree import DomainEdge, Resource, domain_tree, longest_new_connection_path, page_load_time_ms, tree_height
from .webkit_log import JS_ENTRIES, resources_from_timing


@dataclass(frozen=True)
class PageLoadOptions:
    """Options of one page-load run.

    :ivar browser: chromium (DevTools performance log), firefox (WebDriver BiDi events) or
        webkit (the page's Resource Timing entries, webkit_log.py).
    :ivar browsers: parallel browser instances (one worker thread each).
    :ivar page_timeout_s: page-load timeout per visit, seconds.
    :ivar idle_s: the visit ends when no network event arrived for this long (s) after load.
    :ivar settle_max_s: at most this long (s) waiting for network idle after the load event.
    :ivar profile_root: where fresh browser profiles are created (None = system temp).
    """

    browser: str = "chromium"
    browsers: int = 1
    page_timeout_s: float = 15.0
    idle_s: float = 0.3
    settle_max_s: float = 5.0
    profile_root: Optional[Path] = None


@dataclass(frozen=True)
class VisitResult:
    """One visit: what was asked, how it ended, the resources and the derived metrics.

    :ivar status: ``complete`` or ``incomplete`` (then ``error`` says why).
    :ivar page_load_time_ms: BLAST page load time (95% of resources loaded), ms.
    :ivar tree_height: resources on the longest root-to-leaf path.
    :ivar longest_new_conn_path: new connections on the worst root-to-leaf path.
    """

    url: str
    worker: int
    browser: str
    browser_version: str
    started_at: dt.datetime
    duration_s: float
    status: str
    error: Optional[str]
    final_url: Optional[str]
    resources: tuple[Resource, ...] = ()
    domain_edges: tuple[DomainEdge, ...] = ()
    page_load_time_ms: Optional[float] = None
    tree_height: Optional[int] = None
    longest_new_conn_path: Optional[int] = None


class BrowserCrashed(Exception):
    pass


def _collect(browser: Browser, opts: PageLoadOptions, deadline: float) -> list[dict]:
    """Read the performance log until the network is idle (or ``deadline``)."""
    events: list[dict] = []
    open_ids: set[str] = set()
    last_new = time.monotonic()
    while True:
        new = network_events(browser.driver.get_log("performance"))
        now = time.monotonic()
        for m in new:
            p = m.get("params", {})
            if m["method"] == "Network.requestWillBeSent" and p["request"]["url"].startswith("http"):
                open_ids.add(p["requestId"])
            elif m["method"] in ("Network.loadingFinished", "Network.loadingFailed"):
                open_ids.discard(p.get("requestId"))
        if new:
            events += new
            last_new = now
        if (now - last_new >= opts.idle_s and not open_ids) or now >= deadline:
            return events
        time.sleep(0.05)


def _collect_bidi(browser: Browser, opts: PageLoadOptions, deadline: float) -> list:
    """Firefox: read BiDi network events until no request is open and none arrived for idle_s."""
    events: list = []
    open_ids: set = set()
    last_new = time.monotonic()
    while True:
        new = browser.recorder.take()
        now = time.monotonic()
        for name, p in new:
            rid = (p.get("request") or {}).get("request")
            if name == "before_request_sent":
                open_ids.add(rid)
            else:
                open_ids.discard(rid)
        if new:
            events += new
            last_new = now
        if (now - last_new >= opts.idle_s and not open_ids) or now >= deadline:
            return events
        time.sleep(0.05)


def _collect_timing(browser: Browser, opts: PageLoadOptions, deadline: float) -> list[dict]:
    """WebKit: read the page's Resource Timing entries until none was added for idle_s."""
    entries: list[dict] = []
    last_new = time.monotonic()
    while True:
        now_entries = browser.driver.execute_script(JS_ENTRIES) or []
        now = time.monotonic()
        if len(now_entries) != len(entries):
            entries, last_new = now_entries, now
        if now - last_new >= opts.idle_s or now >= deadline:
            return entries
        time.sleep(0.05)


def _derive(browser: Browser, url: str, events: list) -> tuple[list[Resource], dict]:
    if browser.name == "firefox":
        return resources_from_bidi(events, url)
    if browser.name == "webkit":
        return resources_from_timing(events, url)
    return resources_from_events(events, url)


def visit(browser: Browser, url: str, worker: int, opts: PageLoadOptions) -> VisitResult:
    """Visit ``url`` in ``browser`` and log it. Raises BrowserCrashed (with a partial
    VisitResult as its argument) when the browser hangs or dies."""
    from selenium.common.exceptions import TimeoutException, WebDriverException

    drv = browser.driver
    firefox = browser.name == "firefox"
    webkit = browser.name == "webkit"
    drv.get("about:blank")
    if firefox:
        browser.recorder.take()
    elif not webkit:                         # WebKit: the new document's timeline starts empty
        drv.get_log("performance")           # drop the new-tab page and earlier visits
    started = dt.datetime.now(dt.timezone.utc)
    t0 = time.monotonic()
    events: list[dict] = []
    error = None
    crashed = False
    try:
        drv.get(url)
    except TimeoutException:
        error = f"timeout: page not loaded within {opts.page_timeout_s:g} s"
    except WebDriverException as exc:
        crashed = True
        error = f"browser failed: {(exc.msg or type(exc).__name__).splitlines()[0][:200]}"
    if not crashed:
        try:
            collect = _collect_bidi if firefox else (_collect_timing if webkit else _collect)
            events = collect(browser, opts, time.monotonic() + opts.settle_max_s)
        except WebDriverException as exc:
            crashed = True
            error = error or f"browser failed: {(exc.msg or type(exc).__name__).splitlines()[0][:200]}"
    res, facts = _derive(browser, url, events)
    if error is None and not res:
        error = "no request was logged"
    if error is None and facts["pending"]:
        error = f"{len(facts['pending'])} requests still pending: {facts['pending'][0]}"
    result = VisitResult(
        url=url, worker=worker, browser=browser.name, browser_version=browser.version, started_at=started,
        duration_s=round(time.monotonic() - t0, 3), status="complete" if error is None else "incomplete",
        error=error, final_url=facts.get("final_url"), resources=tuple(res), domain_edges=tuple(domain_tree(res)),
        page_load_time_ms=page_load_time_ms(res), tree_height=tree_height(res) if res else None,
        longest_new_conn_path=longest_new_connection_path(res) if res else None)
    if crashed or (error or "").startswith("timeout"):
        raise BrowserCrashed(result)
    return result


def run_pageload(urls: Sequence[str], opts: PageLoadOptions, store: Callable[[VisitResult], None],
                 progress: Callable[[], None] = lambda: None) -> dict[str, int]:
    """Visit every URL once with ``opts.browsers`` parallel browsers; ``store`` gets every
    visit (complete or incomplete). Returns counts per status plus restarts."""
    work: "queue.Queue[str]" = queue.Queue()
    for u in urls:
        work.put(u)
    counts = {"complete": 0, "incomplete": 0, "restarts": 0}
    lock = threading.Lock()
    errors: list[BaseException] = []

    def bopts() -> BrowserOptions:
        prof = None
        if opts.profile_root is not None:
            import tempfile
            opts.profile_root.mkdir(parents=True, exist_ok=True)
            prof = Path(tempfile.mkdtemp(prefix=f"{opts.browser}-", dir=opts.profile_root))
        return BrowserOptions(browser=opts.browser, profile_dir=prof, page_timeout_s=opts.page_timeout_s,
                              performance_log=opts.browser == "chromium", bidi=opts.browser == "firefox")

    def start() -> Browser:
        b = start_browser(bopts())
        if b.name == "firefox":
            from .firefox_log import BidiRecorder
            b.recorder = BidiRecorder(b.driver)
        return b

    def worker(i: int) -> None:
        browser: Optional[Browser] = None
        try:
            while True:
                try:
                    url = work.get_nowait()
                except queue.Empty:
                    return
                if browser is None:
                    browser = start()
                # watchdog: WebDriver itself may stop answering; kill the browser then
                wd = threading.Timer(opts.page_timeout_s + opts.settle_max_s + 20, kill_browser, (browser.profile_dir,))
                wd.daemon = True
                wd.start()
                try:
                    result = visit(browser, url, i, opts)
                except BrowserCrashed as bc:
                    result = bc.args[0]
                    kill_browser(browser.profile_dir)
                    browser.quit()
                    browser = None
                    with lock:
                        counts["restarts"] += 1
                finally:
                    wd.cancel()
                with lock:
                    store(result)
                    counts[result.status] += 1
                progress()
        except Exception as exc:  # surfaced by the caller
            errors.append(exc)
        finally:
            if browser is not None:
                browser.quit()

    threads = [threading.Thread(target=worker, args=(i,), daemon=True) for i in range(max(1, opts.browsers))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
    return counts
