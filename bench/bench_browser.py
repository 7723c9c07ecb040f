"""Page-load logger throughput: visits per minute with full logging (perf log, parents,
five BLAST events, derived metrics; no database) vs. the peer baseline, plain Selenium
``driver.get`` without any logging, both with the same number of parallel Chromium
instances over the testbed's pages (Chromium or Firefox ESR over BiDi). Run inside the
vantage namespace (root):

    netsurvey testbed exec -- python3 bench/bench_browser.py --visits 60 --browsers 2 [--browser firefox]
"""
from __future__ import annotations

import argparse
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from browser_probes.drivers import BrowserOptions, start_browser  # noqa: E402
from browser_probes.pageload import PageLoadOptions, run_pageload  # noqa: E402

PAGES = ["https://tree.track.test/", "https://example.test/", "https://a.test/", "https://b.test/"]


def plain(urls: list[str], n: int, browser: str) -> None:
    it = iter(urls)
    lock = threading.Lock()

    def worker():
        b = start_browser(BrowserOptions(browser=browser))
        try:
            while True:
                with lock:
                    u = next(it, None)
                if u is None:
                    return
                b.driver.get(u)
        finally:
            b.quit()

    ts = [threading.Thread(target=worker) for _ in range(n)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--visits", type=int, default=60)
    ap.add_argument("--browsers", type=int, default=2)
    ap.add_argument("--browser", default="chromium", choices=["chromium", "firefox"])
    a = ap.parse_args()
    urls = [PAGES[i % len(PAGES)] for i in range(a.visits)]
    t = time.perf_counter()
    plain(urls, a.browsers, a.browser)
    t_plain = time.perf_counter() - t
    got = []
    t = time.perf_counter()
    counts = run_pageload(urls, PageLoadOptions(browser=a.browser, browsers=a.browsers), got.append)
    t_log = time.perf_counter() - t
    r_plain, r_log = a.visits / t_plain * 60, a.visits / t_log * 60
    print(f"{a.browser}: {a.visits} visits, {a.browsers} browsers (incl. browser start-up)")
    print(f"plain selenium driver.get (peer): {r_plain:.0f} visits/min")
    print(f"netsurvey pageload, full logging: {r_log:.0f} visits/min ({counts})")
    print(f"ratio logged/plain: {r_log / r_plain:.2f}x; goal >= 30 visits/min: {'met' if r_log >= 30 else 'NOT met'}")


if __name__ == "__main__":
    main()
