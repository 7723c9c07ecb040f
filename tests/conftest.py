"""Shared fixtures: a real PostgreSQL (embedded pgserver, or $NETSURVEY_DSN) with one fresh
database per test. No database mocks."""
from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path
from typing import Optional

import psycopg
import pytest
from psycopg.conninfo import make_conninfo

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from netsurvey.db import Database  # noqa: E402


@pytest.fixture(scope="session")
def server_dsn(tmp_path_factory) -> str:
    """DSN of the test server: $NETSURVEY_DSN, else an embedded server in a temp dir."""
    if os.environ.get("NETSURVEY_DSN"):
        yield os.environ["NETSURVEY_DSN"]  # a generator fixture: yield, not return
        return
    import tempfile

    # Not under pytest's basetemp: concurrent pytest sessions prune each other's old
    # basetemp directories, which would delete a running server's data directory.
    root = Path(tempfile.mkdtemp(prefix="netsurvey-test-pg-"))
    root.chmod(0o711)  # as root the server runs as netsurvey-db, which must enter it (netsurvey chmods nothing)
    data_dir = root / "pgdata"
    db = Database.resolve(None, data_dir)
    yield db.dsn
    from netsurvey.db import stop_embedded

    stop_embedded(data_dir)
    shutil.rmtree(root, ignore_errors=True)


def _create_database(server_dsn: str) -> str:
    name = "t_" + uuid.uuid4().hex[:12]
    with psycopg.connect(server_dsn, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    return make_conninfo(server_dsn, dbname=name)


@pytest.fixture
def empty_db(server_dsn) -> Database:
    """A fresh, empty database (no migrations)."""
    return Database(dsn=_create_database(server_dsn))


@pytest.fixture
def db(empty_db) -> Database:
    """A fresh database with every migration applied."""
    empty_db.migrate()
    return empty_db


def run_cli(*args: str, dsn: str | None = None, cwd: Path | None = None, env: dict | None = None,
            timeout: float = 120, netns: str | None = None) -> subprocess.CompletedProcess:
    """Run the real `netsurvey` command (python -m netsurvey.cli) and capture its output;
    with ``netns`` inside that network namespace (e.g. the ``routes_ns`` fixture's)."""
    e = dict(os.environ)
    e.pop("NETSURVEY_DSN", None)
    if dsn:
        e["NETSURVEY_DSN"] = dsn
    # the code of this checkout, also when cwd is elsewhere (an installed copy may differ)
    e["PYTHONPATH"] = os.pathsep.join([str(REPO), *filter(None, [e.get("PYTHONPATH")])])
    e.update(env or {})
    pre = ["ip", "netns", "exec", netns] if netns else []
    return subprocess.run([*pre, sys.executable, "-m", "netsurvey.cli", *args], cwd=cwd or REPO, env=e,
                          capture_output=True, text=True, timeout=timeout)


@pytest.fixture
def server_reachable_dir():
    """A fresh directory the embedded server's user can enter (as root it runs as
    netsurvey-db; pytest's basetemp is 0700 and netsurvey changes no permissions).
    Embedded servers started below it are stopped at the end."""
    import tempfile

    root = Path(tempfile.mkdtemp(prefix="netsurvey-test-cwd-"))
    root.chmod(0o711)
    yield root
    from netsurvey.db import stop_embedded

    for pid_file in root.rglob("postmaster.pid"):
        try:
            stop_embedded(pid_file.parent)
        except Exception:
            pass
    shutil.rmtree(root, ignore_errors=True)


def needs_root():
    return pytest.mark.skipif(os.geteuid() != 0 or shutil.which("ip") is None,
                              reason="needs root and iproute2 (network namespaces)")


@pytest.fixture(scope="session")
def _testbed_session():
    """Brings the machine-wide testbed up once. It is left running at the end (other
    test sessions or a developer may be using it); set NETSURVEY_TESTBED_TEARDOWN=1 to
    take it down at the end if this session brought it up."""
    if os.geteuid() != 0:
        pytest.skip("the testbed needs root")
    from testbed.manager import State, Testbed, down
    from testbed.model import DEFAULT_TESTBED_CONFIG, load_testbed_config

    tb = Testbed(load_testbed_config(DEFAULT_TESTBED_CONFIG), DEFAULT_TESTBED_CONFIG)
    st = State.load()
    was_up = bool(st and st.complete and tb.healthy(st))
    yield tb
    if not was_up and os.environ.get("NETSURVEY_TESTBED_TEARDOWN"):
        down(log=lambda *_: None)


@pytest.fixture
def testbed(_testbed_session):
    """The testbed, up (idempotent, ~ms when already up). Returns the Testbed; its ground
    truth is ``testbed.status()["ground_truth"]``. Run code in the vantage namespace with
    ``run_cli("testbed", "exec", "--", ...)`` or ``testbed.exec_argv([...])``."""
    _testbed_session.up(log=lambda *_: None)
    return _testbed_session


@pytest.fixture
def routes_as_in_testbed(monkeypatch):
    """For in-process tests of the run path that contact nothing: the policy's route check
    (netsurvey/routes.py) sees routes as inside the testbed's vantage (the testbed ranges
    over a veth, not the default route), wherever the test process runs. Commands run as
    subprocesses still read their namespace's real routes."""
    import ipaddress as _ip

    from netsurvey.routes import Route, RouteTable

    table = RouteTable([Route(_ip.ip_network("198.18.0.0/15"), "unicast", "tbv0", ""),
                        Route(_ip.ip_network("2001:2::/48"), "unicast", "tbv0", ""),
                        Route(_ip.ip_network("0.0.0.0/0"), "unicast", "eth0", "192.0.2.1")])
    monkeypatch.setattr(RouteTable, "snapshot", classmethod(lambda cls: table))
    return table


@pytest.fixture(scope="session")
def routes_ns():
    """A network namespace whose routes to the testbed ranges go into a veth pair with both
    ends inside it (packets sent there vanish on this machine): for dry runs and bad-input checks of commands aimed
    at testbed addresses, which the policy refuses over a default route (routes.py) and
    which must never run from the root namespace, where those addresses leave the machine."""
    if os.geteuid() != 0 or shutil.which("ip") is None:
        pytest.skip("needs root and iproute2 (network namespaces)")
    ns = f"nsrt31-{os.getpid()}"

    def sh(*argv):
        subprocess.run(["ip", "netns", "exec", ns, *argv], check=True, capture_output=True)

    subprocess.run(["ip", "netns", "add", ns], check=True, capture_output=True)
    try:
        sh("ip", "link", "set", "lo", "up")
        sh("ip", "link", "add", "rt0", "type", "veth", "peer", "name", "rt1")   # both ends in here
        sh("ip", "link", "set", "rt0", "up")
        sh("ip", "link", "set", "rt1", "up")
        sh("ip", "route", "add", "198.18.0.0/15", "dev", "rt0")
        sh("ip", "-6", "route", "add", "2001:2::/48", "dev", "rt0")
        yield ns
    finally:
        subprocess.run(["ip", "netns", "del", ns], capture_output=True)


# -- running the suite on several workers (pytest-xdist: `make test` passes -n) -------------
#: Tests that use the machine-wide testbed share its servers, bridges and logs. A test uses
#: it when it takes one of TESTBED_FIXTURES, or its file reaches it without them
#: (REACHES_TESTBED: `testbed up/down/exec`, its namespaces, a sniffer, the demo, the zoo);
#: tests marked ``unit`` never do. Every other test (its own database, files, namespace) is
#: spread over the workers one by one.
#: Testbed tests hold the testbed while they run, through a lock shared by the workers:
#: shared for one test at a time (module fixtures hold it while they set up), exclusive for
#: the whole of a file in EXCLUSIVE (it takes the testbed down, sniffs a bridge other tests
#: send on, or times the testbed's delays). The exclusive files run first, one after
#: another, on one worker, while the others run the tests that need no testbed; then the
#: shared ones run side by side, by file (by directory where files share more than the
#: testbed: the browsers' observing servers, the promise lab, the testbed's own tests and
#: zoo servers). Time spent waiting for the lock does not count against a test's timeout.
#: Workers decide what uses the testbed (they see the fixtures) and leave the answer for
#: the controller's scheduler in a directory named after it (xdist's own ``--dist
#: loadgroup`` marks are ignored under pytest 9, which no longer reads the node id xdist
#: rewrites).
TESTBED_FIXTURES = frozenset({"_testbed_session", "_lab_session", "routes_ns", "testbed", "lab"})
REACHES_TESTBED = re.compile(
    r"""["']testbed["'],\s*["'](?:up|down|exec|status)|testbed\.(?:manager|zoo|cli)|import testbed|from testbed"""
    r"""|nstb-|netns|sniff|["']demo["']|exec_argv|vexec""")
#: one scope per directory (or group of files): these share servers or namespaces
SHARED_SCOPES = ("tests/browser_probes/", "tests/promises/", "tests/testbed/", "tests/core/test_route_guard")
#: files that must have the testbed to themselves: they take it down, sniff a bridge or a
#: server's namespace that other tests' traffic crosses, or measure the testbed's delays
EXCLUSIVE = frozenset({
    "tests/testbed/test_testbed.py", "tests/testbed/test_zoo_quic.py",
    "tests/browser_probes/test_browser_revisit.py", "tests/browser_probes/test_browser_tracking_delay.py",
    "tests/core/test_stream_tls_quic.py",
    "tests/scanners/quic/test_scan_quic.py", "tests/scanners/tfo/test_scan_tfo.py",
    "tests/scanners/tls/test_tls_lifetime_schedule.py",
    "tests/scanners/handshake_timing/test_scan_handshake_timing.py",
})
_file_reaches: dict[str, bool] = {}
_testbed_files: set[str] = set()
_held = False   # this worker holds the testbed lock


def _rel(path) -> str:
    return Path(path).resolve().relative_to(REPO).as_posix()


def uses_testbed(item) -> bool:
    if item.get_closest_marker("unit"):
        return False
    if TESTBED_FIXTURES & set(getattr(item, "fixturenames", ())):
        return True
    path = str(item.path)
    if path not in _file_reaches:
        _file_reaches[path] = bool(REACHES_TESTBED.search(Path(path).read_text(errors="replace")))
    return _file_reaches[path]


def _scopes_dir(controller_pid: int) -> Path:
    return Path(tempfile.gettempdir()) / f"netsurvey-xdist-scopes-{controller_pid}"


def pytest_collection_modifyitems(config, items):
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    if not worker:
        return
    uses = {it.nodeid: uses_testbed(it) for it in items}
    # exclusive files first, then the tests that need no testbed (the other workers run them
    # meanwhile), then the shared testbed tests, largest scope first (the promise matrix
    # last would be the tail); stable, so the same order on every worker
    size: dict[str, int] = {}
    for it in items:
        size[_scope(it.nodeid, uses[it.nodeid])] = size.get(_scope(it.nodeid, uses[it.nodeid]), 0) + 1
    items.sort(key=lambda it: (0, 0) if _rel(it.path) in EXCLUSIVE else (1, 0) if not uses[it.nodeid]
               else (2, -size[_scope(it.nodeid, True)]))
    _testbed_files.update(_rel(it.path) for it in items if uses[it.nodeid])
    d = _scopes_dir(os.getppid())
    d.mkdir(exist_ok=True)
    tmp = d / f".{worker}.json"
    tmp.write_text(json.dumps(uses))
    tmp.rename(d / f"{worker}.json")


def _scope(nodeid: str, uses: bool) -> str:
    if not uses:
        return nodeid
    path = nodeid.split("::", 1)[0]
    if path in EXCLUSIVE:
        return "testbed:exclusive"
    return "testbed:" + next((d for d in SHARED_SCOPES if path.startswith(d)), path)


def pytest_xdist_make_scheduler(config, log):
    from xdist.scheduler import LoadScopeScheduling

    d = _scopes_dir(os.getpid())
    shutil.rmtree(d, ignore_errors=True)
    config.option.loadscopereorder = False   # the order of the collection (above), not largest scope first

    class TestbedScopes(LoadScopeScheduling):
        """Scopes as described above; a test no worker described counts as using the testbed."""

        _uses: Optional[dict] = None

        def _split_scope(self, nodeid: str) -> str:
            if self._uses is None:
                self._uses = {}
                for f in sorted(d.glob("gw*.json")):
                    self._uses.update(json.loads(f.read_text()))
                shutil.rmtree(d, ignore_errors=True)
            return _scope(nodeid, self._uses.get(nodeid, True))

    return TestbedScopes(config, log)


@contextlib.contextmanager
def hold_testbed(exclusive: bool = False):
    """Under xdist: hold the shared testbed, shared or exclusively, for the ``with`` block
    (nothing if this worker holds it already, or outside xdist). Writers go first: a reader
    passes a turnstile that a waiting writer holds. The test's timeout (pytest-timeout's
    interval timer) is stopped while waiting."""
    global _held
    if not os.environ.get("PYTEST_XDIST_WORKER") or _held:
        yield
        return
    import fcntl
    import signal

    base = Path(tempfile.gettempdir()) / f"netsurvey-xdist-testbed-{os.getppid()}"
    with open(f"{base}.turnstile", "a") as turnstile, open(f"{base}.lock", "a") as lock:
        timer = signal.setitimer(signal.ITIMER_REAL, 0)
        try:
            fcntl.flock(turnstile, fcntl.LOCK_EX)
            if exclusive:
                fcntl.flock(lock, fcntl.LOCK_EX)
            else:
                fcntl.flock(lock, fcntl.LOCK_SH)
                fcntl.flock(turnstile, fcntl.LOCK_UN)
        finally:
            if timer[0] > 0:
                signal.setitimer(signal.ITIMER_REAL, *timer)
        _held = True
        try:
            yield
        finally:
            _held = False
            fcntl.flock(lock, fcntl.LOCK_UN)
            fcntl.flock(turnstile, fcntl.LOCK_UN)


@pytest.fixture(scope="module", autouse=True)
def _testbed_file_lock(request):
    """A file in EXCLUSIVE holds the testbed exclusively while it runs, module fixtures included."""
    if _rel(request.path) in EXCLUSIVE and _rel(request.path) in _testbed_files:
        with hold_testbed(exclusive=True):
            yield
    else:
        yield


@pytest.fixture(autouse=True)
def _testbed_test_lock(request):
    """Any other testbed test holds it shared while it runs."""
    if _rel(request.path) in _testbed_files:
        with hold_testbed():
            yield
    else:
        yield


@pytest.hookimpl(wrapper=True)
def pytest_fixture_setup(fixturedef, request):
    """Module and session fixtures of testbed files set up holding the testbed shared."""
    item = getattr(request, "_pyfuncitem", None)   # the test the fixture is set up for
    if fixturedef.scope in ("module", "session") and fixturedef.argname not in (
            "_testbed_file_lock", "server_dsn") and item is not None and _rel(item.path) in _testbed_files:
        with hold_testbed():
            return (yield)
    return (yield)
