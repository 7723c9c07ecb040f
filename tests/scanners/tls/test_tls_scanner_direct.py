"""The TLS scanner called directly, with no database, no run and no command line
(netsurvey.scanning.scan_server, after sslyze's scan_server()): against a local TLS
listener in well under a second; the etiquette still decides what may be contacted."""
from __future__ import annotations

import socket
import ssl
import threading

import pytest

from netsurvey.config import EtiquetteConfig
from netsurvey.scanning import ScanStatus, ScanTarget, scan_server
from scanners.tls.results import TlsOptions
from scanners.tls.survey import TlsScanner

pytestmark = pytest.mark.unit   # no database, no CLI, no testbed, no root: a loopback listener


@pytest.fixture
def tls_listener(tmp_path):
    """A Python/OpenSSL TLS 1.2+1.3 server on 127.0.0.1 answering HTTP; counts connections."""
    from testbed.pki import issue_cert

    cert, key = issue_cert(tmp_path / "pki", "direct", ["direct.test"])
    sctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    sctx.load_cert_chain(cert, key)
    sctx.minimum_version = ssl.TLSVersion.TLSv1_2
    srv = socket.create_server(("127.0.0.1", 0))
    srv.settimeout(0.2)
    seen = {"connections": 0}
    stop = threading.Event()

    def serve():
        while not stop.is_set():
            try:
                raw, _ = srv.accept()
            except OSError:
                continue
            seen["connections"] += 1
            threading.Thread(target=one, args=(raw,), daemon=True).start()

    def one(raw):
        try:
            with sctx.wrap_socket(raw, server_side=True) as s:
                s.settimeout(2)
                if s.recv(4096):
                    s.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
        except (OSError, ssl.SSLError):
            pass

    t = threading.Thread(target=serve, daemon=True)
    t.start()
    yield srv.getsockname()[1], seen
    stop.set()
    t.join(2)
    srv.close()


def _opts(port: int) -> TlsOptions:
    return TlsOptions(versions=("1.2", "1.3"), port=port, timeout=2.0, deadline=None, verify=False,
                      check_resumption=True, ipv6=False, tls13_request="HEAD")


def test_scan_server_probes_a_local_listener(tls_listener):
    port, seen = tls_listener
    out = scan_server(TlsScanner(), _opts(port), ScanTarget("direct.test", "127.0.0.1", port),
                      etiquette=EtiquetteConfig(allow=["127.0.0.1/32"]))
    assert out.status is ScanStatus.SUCCESS, out
    by_version = {o.version: o for o in out.result.observations}
    assert set(by_version) == {"1.2", "1.3"}
    assert all(o.status == "success" for o in by_version.values()), by_version
    assert len(by_version["1.3"].tickets) >= 1       # OpenSSL sends TLS 1.3 tickets by default
    assert by_version["1.2"].id_resumed is not None   # the immediate resumption checks ran
    assert by_version["1.2"].ticket_resumed is True   # OpenSSL servers issue and accept tickets by default (SSL_OP_NO_TICKET unset)
    assert "direct.test" in (by_version["1.2"].cert_sans or ())
    assert seen["connections"] >= 2


def test_scan_server_keeps_the_etiquette(tls_listener):
    """The default etiquette allows only the testbed's ranges: loopback is refused, and the
    listener sees no connection."""
    port, seen = tls_listener
    out = scan_server(TlsScanner(), _opts(port), ScanTarget("direct.test", "127.0.0.1", port))
    assert out.status is ScanStatus.BLOCKED and seen["connections"] == 0
