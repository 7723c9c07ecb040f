"""STEK rotation of zoo implementations under accelerated time (issue 24): the periods
are hours, so the server runs under libfaketime (Debian faketime) and `scan tls
--repeat` watches its key names on loopback. The expectation is the implementation's
source (testbed/zoo.py ground truth): GnuTLS changes its key when floor(t / 64800)
changes (lib/stek.c). Not done yet: lighttpd (its STEK check runs only when the clock is
a multiple of 64 s, src/mod_openssl.c mod_openssl_handle_trigger, so a time jump needs
an aligned fake clock), Go (no key id), HAProxy (no rotation)."""
from __future__ import annotations

import datetime as dt
import os
import shutil
import signal
import socket
import subprocess
import time

import pytest

from conftest import run_cli

pytestmark = [pytest.mark.skipif(shutil.which("faketime") is None, reason="faketime not installed"),
              pytest.mark.timeout(180)]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_port(port: int) -> None:
    deadline = time.time() + 10
    while time.time() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return
        except OSError:
            time.sleep(0.05)
    raise AssertionError(f"nothing listens on 127.0.0.1:{port}")


def _scan_key_names(db, tmp_path, hostname: str, port: int, ca: str, rounds: int, interval: float):
    cfg = tmp_path / "survey.toml"
    cfg.write_text('[etiquette]\nallow = ["127.0.0.1/32"]\n')
    r = run_cli("--config", str(cfg), "scan", "tls", "--target", f"{hostname}=127.0.0.1", "--port", str(port),
                "--tls", "1.2", "--no-check-resumption", "--repeat", str(rounds), "--interval", str(interval),
                "--json", dsn=db.dsn, env={"SSL_CERT_FILE": ca}, timeout=120)
    assert r.returncode == 0, r.stderr
    with db.connect() as conn:
        return conn.execute("SELECT observed_at, encode(key_name, 'hex'), ticket_family FROM tls_handshake"
                            " WHERE hostname = %s ORDER BY observed_at", (hostname,)).fetchall()


@pytest.fixture
def pki(tmp_path):
    from testbed.pki import ensure_ca, issue_cert

    ca, _ = ensure_ca(tmp_path / "pki")
    return tmp_path / "pki", str(ca), issue_cert


@pytest.mark.skipif(shutil.which("gnutls-serv") is None, reason="gnutls-bin not installed")
def test_gnutls_key_changes_at_its_epoch_boundary(db, tmp_path, pki):
    from testbed.zoo import GNUTLS_FACTS

    period = GNUTLS_FACTS["key_rotation_s"]["value"]            # 64800 s
    d, ca, issue = pki
    cert, key = issue(d, "gnutls.zoo.test", ["gnutls.zoo.test"])
    boundary = (int(time.time()) // period + 2) * period           # a future multiple of the period
    start = dt.datetime.fromtimestamp(boundary - 4, dt.timezone.utc).strftime("@%Y-%m-%d %H:%M:%S")
    port = _free_port()
    env = dict(os.environ, TZ="UTC")
    p = subprocess.Popen(["faketime", "-f", start, "gnutls-serv", "--http", "-p", str(port), "--x509certfile", str(cert),
                          "--x509keyfile", str(key)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env,
                         start_new_session=True)   # faketime runs gnutls-serv as its child: end the group
    try:
        t0 = time.monotonic()
        _wait_port(port)
        rows = _scan_key_names(db, tmp_path, "gnutls.zoo.test", port, ca, rounds=6, interval=1.5)
    finally:
        os.killpg(p.pid, signal.SIGTERM)
        p.wait(timeout=5)
    names = [k for _, k, _ in rows]
    assert all(f == "gnutls" for _, _, f in rows) and len(rows) == 6, rows
    changes = [i for i in range(1, len(names)) if names[i] != names[i - 1]]
    assert len(changes) == 1, names            # exactly one rotation: at the boundary, ~4 s in
    # the server clock reached the boundary 4 s after its start (+- one probe step of 1.5 s)
    at = (rows[changes[0]][0].timestamp() - (time.time() - (time.monotonic() - t0)))
    assert 4 - 1.5 - 1 <= at <= 4 + 1.5 + 1, at
