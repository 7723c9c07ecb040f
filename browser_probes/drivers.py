"""Start real browsers under Selenium: Chromium (Debian chromium + chromedriver) and
Firefox ESR (geckodriver from crates.io). No Selenium Manager (it cannot download here).

Browsers run in the caller's network namespace (the testbed vantage for every probe).
"""
from __future__ import annotations

import os
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

from netsurvey.errors import UsageError

BROWSERS = ("chromium", "firefox")
CHROMIUM_BINARY = "/usr/lib/chromium/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
FIREFOX_BINARY = "/usr/lib/firefox-esr/firefox-esr"


def geckodriver_path() -> Optional[str]:
    for p in (shutil.which("geckodriver"), os.path.expanduser("~/.cargo/bin/geckodriver")):
        if p and os.path.exists(p):
            return p
    return None


@dataclass(frozen=True)
class BrowserOptions:
    """How to start one browser.

    :ivar browser: ``chromium`` or ``firefox``.
    :ivar profile_dir: profile / user-data directory (None = a fresh temporary one).
    :ivar private: incognito (Chromium) / private browsing (Firefox).
    :ivar page_timeout_s: page-load timeout in seconds.
    :ivar performance_log: Chromium: record the DevTools performance log (page-load logger).
    :ivar bidi: Firefox: enable WebDriver BiDi (page-load logger).
    :ivar faketime: libfaketime spec file for the browser's clock (None = real time).
    :ivar quic_origins: ``host:port`` origins forced onto HTTP/3 (Chromium:
        --origin-to-force-quic-on; Firefox: an Alt-Svc test mapping).
    :ivar spki_hashes: Chromium: base64 SHA-256 SPKI hashes accepted without a trusted CA
        (needed for QUIC to the testbed).
    """

    browser: str = "chromium"
    profile_dir: Optional[Path] = None
    private: bool = False
    page_timeout_s: float = 20.0
    performance_log: bool = False
    bidi: bool = False
    faketime: Optional[Path] = None
    quic_origins: tuple[str, ...] = ()
    spki_hashes: tuple[str, ...] = ()


@dataclass
class Browser:
    """A running browser: the Selenium driver, its version and the profile it uses."""

    driver: object
    name: str
    version: str
    profile_dir: Path
    recorder: object = None          # Firefox page-load logger: the BiDi event recorder
    _tmp: Optional[tempfile.TemporaryDirectory] = field(default=None, repr=False)

    def quit(self) -> None:
        try:
            self.driver.quit()
        except Exception:
            pass
        if self._tmp is not None:
            # Firefox may still write to its profile for a moment after quit()
            shutil.rmtree(self._tmp.name, ignore_errors=True)
            try:
                self._tmp.cleanup()
            except OSError:
                pass
            self._tmp = None


def _faketime_wrapper(binary: str, spec_file: Path, out_dir: Path) -> str:
    """A script that runs ``binary`` under libfaketime reading its offset from ``spec_file``
    (re-read on every clock call, so the offset can be moved between visits)."""
    w = out_dir / "browser-faketime.sh"
    w.write_text("#!/bin/sh\n"
                 f"export FAKETIME_TIMESTAMP_FILE={spec_file} FAKETIME_NO_CACHE=1 FAKETIME_DONT_FAKE_MONOTONIC=1\n"
                 f"exec faketime -f \"$(cat {spec_file})\" {binary} \"$@\"\n")
    w.chmod(0o755)
    return str(w)


def start_browser(opts: BrowserOptions) -> Browser:
    """Start the browser described by ``opts``; UsageError if it is not installed."""
    if opts.browser not in BROWSERS:
        raise UsageError(f"--browser must be one of {', '.join(BROWSERS)}, not {opts.browser!r}")
    tmp = None
    profile = opts.profile_dir
    if profile is None:
        tmp = tempfile.TemporaryDirectory(prefix=f"ns-{opts.browser}-")
        profile = Path(tmp.name)
    profile.mkdir(parents=True, exist_ok=True)
    try:
        if opts.browser == "chromium":
            drv = _start_chromium(opts, profile)
            version = drv.capabilities.get("browserVersion", "?")
        else:
            drv = _start_firefox(opts, profile)
            version = drv.capabilities.get("browserVersion", "?")
    except Exception:
        if tmp is not None:
            tmp.cleanup()
        raise
    drv.set_page_load_timeout(opts.page_timeout_s)
    return Browser(drv, opts.browser, version, profile, tmp)


def _start_chromium(opts: BrowserOptions, profile: Path):
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    if not os.path.exists(CHROMIUM_BINARY) or not os.path.exists(CHROMEDRIVER):
        raise UsageError("chromium / chromium-driver are not installed (scripts/install.sh)")
    o = webdriver.ChromeOptions()
    o.binary_location = (_faketime_wrapper(CHROMIUM_BINARY, opts.faketime, profile.parent)
                         if opts.faketime else CHROMIUM_BINARY)
    for a in ("--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run",
              "--disable-background-networking", "--disable-component-update", "--disable-sync",
              "--disable-dev-shm-usage", "--ignore-certificate-errors",
              "--disable-features=IsolateOrigins,site-per-process", "--disable-site-isolation-trials",
              f"--user-data-dir={profile / 'chromium'}"):
        o.add_argument(a)
    if opts.private:
        o.add_argument("--incognito")
    if opts.quic_origins:
        o.add_argument("--enable-quic")
        o.add_argument("--origin-to-force-quic-on=" + ",".join(opts.quic_origins))
    if opts.spki_hashes:
        o.add_argument("--ignore-certificate-errors-spki-list=" + ",".join(opts.spki_hashes))
    if opts.performance_log:
        o.set_capability("goog:loggingPrefs", {"performance": "ALL"})
    return webdriver.Chrome(service=Service(CHROMEDRIVER), options=o)


def _start_firefox(opts: BrowserOptions, profile: Path):
    from selenium import webdriver
    from selenium.webdriver.firefox.service import Service

    gd = geckodriver_path()
    if not os.path.exists(FIREFOX_BINARY) or not gd:
        raise UsageError("firefox-esr / geckodriver are not installed (scripts/install.sh)")
    o = webdriver.FirefoxOptions()
    o.binary_location = (_faketime_wrapper(FIREFOX_BINARY, opts.faketime, profile.parent)
                         if opts.faketime else FIREFOX_BINARY)
    o.add_argument("-headless")
    o.add_argument("-profile")
    o.add_argument(str(profile / "firefox"))
    (profile / "firefox").mkdir(exist_ok=True)
    if opts.private:
        o.add_argument("-private")
        o.set_preference("browser.privatebrowsing.autostart", True)
    o.accept_insecure_certs = True
    o.set_preference("network.http.http3.enable", bool(opts.quic_origins))
    if opts.quic_origins:   # HTTP/3 from the first request: an Alt-Svc mapping for testing
        o.set_preference("network.http.http3.alt-svc-mapping-for-testing",
                         ",".join(f"{o_.split(':')[0]};h3=:{o_.split(':')[1]}" for o_ in opts.quic_origins))
        # Firefox turns HTTP/3 off when a root not built into it is trusted (the testbed CA
        # or Marionette's accept-insecure-certs override): the page then fails over TCP.
        o.set_preference("network.http.http3.disable_when_third_party_roots_found", False)
    o.set_preference("app.update.enabled", False)
    o.set_preference("network.captive-portal-service.enabled", False)
    o.set_preference("network.connectivity-service.enabled", False)
    o.set_preference("browser.safebrowsing.malware.enabled", False)
    o.set_preference("browser.safebrowsing.phishing.enabled", False)
    o.set_preference("datareporting.policy.dataSubmissionEnabled", False)
    o.set_preference("toolkit.telemetry.enabled", False)
    if opts.bidi:
        o.enable_bidi = True
    # QUIC experiments close idle connections from the chrome context (quic_tracking.py)
    args = ["--allow-system-access"] if opts.quic_origins else []
    return webdriver.Firefox(service=Service(gd, log_output=os.devnull, service_args=args), options=o)
