"""Start real browsers under Selenium: Chromium (Debian chromium + chromedriver),
Firefox ESR (geckodriver from crates.io) and WebKit (Debian webkit2gtk-driver:
WebKitWebDriver driving MiniBrowser, under a private Xvfb: it hangs headless). No Selenium
Manager (it cannot download here).

Browsers run in the caller's network namespace (the testbed vantage for every probe).
"""
from __future__ import annotations

import hashlib
import os
import shutil
import struct
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

from netsurvey.errors import UsageError

BROWSERS = ("chromium", "firefox", "webkit")
CHROMIUM_BINARY = "/usr/lib/chromium/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
FIREFOX_BINARY = "/usr/lib/firefox-esr/firefox-esr"
WEBKIT_BINARY = "/usr/lib/x86_64-linux-gnu/webkit2gtk-4.1/MiniBrowser"
WEBKITDRIVER = "/usr/bin/WebKitWebDriver"
XVFB = "/usr/bin/Xvfb"
# every process of a browser carries this variable (kill by profile: procs.py)
PROFILE_ENV = "NETSURVEY_BROWSER_PROFILE"


#: Engines without HTTP/3, and why (their QUIC experiments are n/a with this reason).
NO_HTTP3 = {"webkit": "WebKitGTK 2.50 has no HTTP/3 (libsoup 3 speaks HTTP/1.1 and HTTP/2 only)"}


def geckodriver_path() -> Optional[str]:
    for p in (shutil.which("geckodriver"), os.path.expanduser("~/.cargo/bin/geckodriver")):
        if p and os.path.exists(p):
            return p
    return None


@dataclass(frozen=True)
class BrowserOptions:
    """How to start one browser.

    :ivar browser: ``chromium``, ``firefox`` or ``webkit``.
    :ivar profile_dir: profile / user-data directory (None = a fresh temporary one).
    :ivar private: incognito (Chromium) / private browsing (Firefox).
    :ivar page_timeout_s: page-load timeout in seconds.
    :ivar performance_log: Chromium: record the DevTools performance log (page-load logger).
    :ivar bidi: Firefox: enable WebDriver BiDi (page-load logger).
    :ivar faketime: file holding the browser clock's offset (:func:`set_clock_offset`; the
        browser runs with clockshift.c preloaded, its wall clock moves at once when the file
        changes). None = real time.
    :ivar shift_monotonic: WebKit: its monotonic clocks jump with the wall clock (glib-networking
        expires TLS sessions by the monotonic clock).
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
    shift_monotonic: bool = False


@dataclass
class Browser:
    """A running browser: the Selenium driver, its version and the profile it uses."""

    driver: object
    name: str
    version: str
    profile_dir: Path
    recorder: object = None          # Firefox page-load logger: the BiDi event recorder
    _tmp: Optional[tempfile.TemporaryDirectory] = field(default=None, repr=False)
    xvfb: Optional[subprocess.Popen] = field(default=None, repr=False)   # WebKit's display

    def quit(self) -> None:
        try:
            self.driver.quit()
        except Exception:
            pass
        if self.xvfb is not None:
            self.xvfb.terminate()
            try:
                self.xvfb.wait(5)
            except subprocess.TimeoutExpired:
                self.xvfb.kill()
            self.xvfb = None
        if self._tmp is not None:
            # Firefox may still write to its profile for a moment after quit()
            shutil.rmtree(self._tmp.name, ignore_errors=True)
            try:
                self._tmp.cleanup()
            except OSError:
                pass
            self._tmp = None


CLOCK_SETTLE_S = 0.0      # a moved clock takes effect at once (clockshift maps the offset file)
CLOCKSHIFT_SOURCE = Path(__file__).with_name("clockshift.c")
CLOCK_FILE_BYTES = 4096


def set_clock_offset(spec_file: Path, offset_s: float) -> None:
    """Move the browser's wall clock to real time + ``offset_s`` (at once, in every process of
    the browser: clockshift.c maps this file; it is written in place, never replaced)."""
    off_ns = int(round(offset_s * 1e9))
    fd = os.open(spec_file, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        if os.fstat(fd).st_size < CLOCK_FILE_BYTES:
            os.ftruncate(fd, CLOCK_FILE_BYTES)
        os.pwrite(fd, struct.pack("=q", off_ns), 0)
    finally:
        os.close(fd)


def clock_offset(spec_file: Path) -> float:
    """The offset (seconds) a clock file holds."""
    with open(spec_file, "rb") as f:
        return struct.unpack("=q", f.read(8))[0] / 1e9


def clockshift_library() -> Path:
    """clockshift.c built once per source version (gcc, scripts/install.sh) into the cache."""
    src = CLOCKSHIFT_SOURCE.read_bytes()
    tag = hashlib.sha256(src).hexdigest()[:12]
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "netsurvey"
    lib = cache / f"clockshift-{tag}.so"
    if lib.exists():
        return lib
    cc = shutil.which("gcc") or shutil.which("cc")
    if not cc:
        raise UsageError("moving a browser's clock needs gcc (scripts/install.sh) to build clockshift.c")
    cache.mkdir(parents=True, exist_ok=True)
    tmp = lib.with_suffix(f".{os.getpid()}.tmp")
    r = subprocess.run([cc, "-shared", "-fPIC", "-O2", "-o", str(tmp), str(CLOCKSHIFT_SOURCE), "-ldl"],
                       capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError("building clockshift.c failed: " + (r.stderr.strip().splitlines() or ["?"])[-1])
    os.replace(tmp, lib)
    return lib


def _faketime_wrapper(binary: str, spec_file: Path, out_dir: Path, shift_monotonic: bool = False) -> str:
    """A script that runs ``binary`` with clockshift.c preloaded: its wall clock (REALTIME,
    gettimeofday, time) = real time + the offset in ``spec_file``, movable at any moment
    (:func:`set_clock_offset`); monotonic clocks stay real unless ``shift_monotonic`` (they
    then jump by the same offset: WebKit, whose TLS session cache in glib-networking 2.74 expires
    by g_get_monotonic_time, tls/gnutls/gtlsbackend-gnutls.c:182,200,245).

    Not libfaketime 0.9.10 (tried here): Firefox ESR 153 hangs at start under it (even
    ``--version``, FAKETIME=+0, real or faked monotonic clocks), and Chromium 156 started only
    with its monotonic clock faked as well (its zygote stopped answering otherwise), which made
    every jump a jump of its monotonic clock too and its results irreproducible."""
    if not spec_file.exists():
        set_clock_offset(spec_file, 0)
    lib = clockshift_library()
    w = out_dir / f"{Path(binary).name}-clockshift.sh"
    w.write_text("#!/bin/sh\n"
                 f"export LD_PRELOAD={lib} NETSURVEY_CLOCK_FILE={spec_file}"
                 + (" NETSURVEY_CLOCK_MONOTONIC=1" if shift_monotonic else "") + "\n"
                 f"exec {binary} \"$@\"\n")
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
    xvfb = None
    try:
        if opts.browser == "chromium":
            drv = _start_chromium(opts, profile)
        elif opts.browser == "firefox":
            drv = _start_firefox(opts, profile)
        else:
            drv, xvfb = _start_webkit(opts, profile)
        version = drv.capabilities.get("browserVersion", "?")
    except Exception:
        if xvfb is not None:
            xvfb.kill()
        if tmp is not None:
            tmp.cleanup()
        raise
    drv.set_page_load_timeout(opts.page_timeout_s)
    return Browser(drv, opts.browser, version, profile, tmp, xvfb=xvfb)


def _start_xvfb() -> tuple[subprocess.Popen, str]:
    """A private X server on a free display (Xvfb picks it: -displayfd)."""
    r, w = os.pipe()
    try:
        x = subprocess.Popen([XVFB, "-displayfd", str(w), "-nolisten", "tcp", "-screen", "0", "1280x900x24"],
                             pass_fds=(w,), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    finally:
        os.close(w)
    with os.fdopen(r) as f:
        disp = f.readline().strip()
    if not disp:
        x.kill()
        raise RuntimeError("Xvfb did not start")
    return x, ":" + disp


def _start_webkit(opts: BrowserOptions, profile: Path):
    """WebKitGTK: WebKitWebDriver starts MiniBrowser --automation (an ephemeral automation
    session: no profile on disk; ``profile`` only names the processes for kill_browser)."""
    from selenium import webdriver
    from selenium.webdriver.webkitgtk.options import Options
    from selenium.webdriver.webkitgtk.service import Service

    if not all(os.path.exists(p) for p in (WEBKIT_BINARY, WEBKITDRIVER, XVFB)):
        raise UsageError("webkit2gtk-driver / xvfb are not installed (scripts/install.sh)")
    x, display = _start_xvfb()
    try:
        o = Options()
        o.binary_location = (_faketime_wrapper(WEBKIT_BINARY, opts.faketime, profile.parent,
                                               shift_monotonic=opts.shift_monotonic)
                             if opts.faketime else WEBKIT_BINARY)
        o.add_argument("--automation")
        o.accept_insecure_certs = True
        env = dict(os.environ, DISPLAY=display, **{PROFILE_ENV: str(profile)})
        env.pop("WAYLAND_DISPLAY", None)
        drv = webdriver.WebKitGTK(service=Service(executable_path=WEBKITDRIVER, env=env,
                                                  log_output=os.devnull), options=o)
    except Exception:
        x.kill()
        raise
    return drv, x


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
    # connections are closed from the chrome context (quic_tracking._flush_connections: the
    # QUIC experiments, the lifetime probes and the revisit timing)
    args = ["--allow-system-access"]
    return webdriver.Firefox(service=Service(gd, log_output=os.devnull, service_args=args), options=o)
