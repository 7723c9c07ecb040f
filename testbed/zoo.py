"""The server zoo (issue 24): TLS implementations other than our own nginx/OpenSSL, each
run with its STOCK defaults, and their ground truth taken from the implementation's own
source (file + function / constant), not from a configuration we wrote.

Hosts (namespaces and DNS names in config/testbed.toml):

- ``gotls.zoo.test`` (ns ``zoogo``, 198.18.124.10 / 2001:2:0:124::10): a net/http HTTPS
  server whose tls.Config sets only the certificate (testbed/zoo/gotls/main.go), built
  by scripts/build_zoo.sh with the machine's Go (its version is in the ground truth).
- ``gnutls.zoo.test`` (ns ``zoognutls``, 198.18.125.10 / 2001:2:0:125::10):
  ``gnutls-serv --http`` of Debian's gnutls-bin (3.7.9), no option touching sessions.

Each server runs under ``python3 -m testbed.zoo serve``, which puts the host's addresses
on the namespace's loopback and then runs the server as its child (the manager records
the wrapper's PID; stopping it stops the child).

Time: the rotation periods here are hours (Go 24 h, GnuTLS 18 h); the tests check only
what is visible within seconds (key id constant within a period, layout, counts,
lifetimes). Accelerated-time checks of the rotation itself are not done yet (issue 24).
"""
from __future__ import annotations

import argparse
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
GO_BIN = ROOT / "tools" / "go" / "bin" / "zoo-gotls"


@dataclass(frozen=True)
class ZooHost:
    label: str
    hostname: str
    namespace: str
    addresses: tuple[str, ...]
    port: int = 443


HOSTS = (
    ZooHost("gotls", "gotls.zoo.test", "zoogo", ("198.18.124.10", "2001:2:0:124::10")),
    ZooHost("gnutls", "gnutls.zoo.test", "zoognutls", ("198.18.125.10", "2001:2:0:125::10")),
)


def host(label: str) -> ZooHost:
    return next(h for h in HOSTS if h.label == label)


def _enabled(cfg, h: ZooHost) -> bool:
    return any(n.name == h.namespace for n in cfg.namespaces)


def _go_version() -> str | None:
    go = shutil.which("go")
    if not go:
        return None
    r = subprocess.run([go, "env", "GOVERSION"], capture_output=True, text=True)
    return r.stdout.strip() or None


def _gnutls_version() -> str | None:
    exe = shutil.which("gnutls-serv")
    if not exe:
        return None
    r = subprocess.run([exe, "--version"], capture_output=True, text=True)
    m = re.search(r"(\d+\.\d+\.\d+)", r.stdout)
    return m.group(1) if m else None


def available(label: str) -> bool:
    """The zoo host's server program is installed (scripts/install.sh)."""
    if label == "gotls":
        return GO_BIN.exists()
    if label == "gnutls":
        return shutil.which("gnutls-serv") is not None
    return False


def render_zoo(cfg, pki_dir: Path) -> list:
    """Process specs of the zoo hosts whose namespace config/testbed.toml declares and
    whose program is installed."""
    from .pki import issue_cert
    from .procs import ProcSpec

    specs = []
    env = {"PYTHONPATH": str(ROOT)}
    wrap = [sys.executable, "-m", "testbed.zoo", "serve"]
    for h in HOSTS:
        if not _enabled(cfg, h) or not available(h.label):
            continue
        cert, key = issue_cert(pki_dir, h.hostname, [h.hostname])
        adds = [x for a in h.addresses for x in ("--add", a)]
        if h.label == "gotls":
            listen = [x for a in h.addresses
                      for x in ("-listen", f"[{a}]:{h.port}" if ":" in a else f"{a}:{h.port}")]
            server = [str(GO_BIN), "-cert", str(cert), "-key", str(key), *listen]
        else:
            # stock gnutls-serv: only the port, the credentials and HTTP mode (so a request
            # gets an answer); no --noticket/--nodb/--priority (gnutls-serv(1)).
            server = [shutil.which("gnutls-serv"), "--http", "-p", str(h.port),
                      "--x509certfile", str(cert), "--x509keyfile", str(key)]
        specs.append(ProcSpec(name=f"zoo-{h.label}", namespace=h.namespace, argv=[*wrap, *adds, "--", *server],
                              env=env, ready_tcp=(h.addresses[0], h.port)))
    return specs


# Facts the scanners must recover, each with where the implementation states it. Facts
# are per TLS version; ``None`` = not applicable.
GO_FACTS = {
    "implementation": "Go crypto/tls (net/http server, tls.Config with only Certificates)",
    "session_ids": {"value": False, "source": "src/crypto/tls/handshake_server.go: the ServerHello session_id "
                    "is only set in doResumeHandshake() (echoing the client's); a full TLS 1.2 handshake "
                    "sends an empty one and the server keeps no session cache"},
    "tickets": {"value": True, "source": "src/crypto/tls/common.go Config.SessionTicketsDisabled (default "
                "false); handshake_server.go sendSessionTicket()"},
    "tls12_lifetime_hint_s": {"value": 0, "source": "src/crypto/tls/handshake_messages.go "
                              "newSessionTicketMsg.marshal(): the ticket_lifetime_hint bytes are never "
                              "written (0 = unspecified, RFC 5077 3.3)"},
    "tls13_ticket_lifetime_s": {"value": 604800, "source": "src/crypto/tls/handshake_server_tls13.go "
                                "sendSessionTicket(): m.lifetime = maxSessionTicketLifetime (common.go: "
                                "7 * 24 h)"},
    "tls13_ticket_count": {"value": 1, "source": "src/crypto/tls/handshake_server_tls13.go "
                           "sendSessionTickets() calls sendSessionTicket() once (ticket_nonce 'always "
                           "left at zero because we only ever send one ticket per connection')"},
    "tls13_max_early_data": {"value": None, "source": "handshake_server_tls13.go sendSessionTicket(false, "
                             "nil): earlyData false, no early_data extension"},
    "ticket_family": {"value": "go", "source": "src/crypto/tls/ticket.go Config.encryptTicket(): "
                      "iv[aes.BlockSize] | AES-CTR(state) | HMAC-SHA256[32], no key name (Go >= 1.21)"},
    "ticket_key_id_len": {"value": 0, "source": "src/crypto/tls/ticket.go decryptTicket() tries every "
                          "key: there is no key id"},
    "tls12_ticket_len_bytes": {"value": None, "source": "16 + len(SessionState.Bytes()) + 32 (ticket.go); "
                               "the state length depends on the certificate, not checked"},
    "key_rotation_s": {"value": 86400, "source": "src/crypto/tls/common.go ticketKeyRotation = 24 h; keys "
                       "are accepted for ticketKeyLifetime = 7 days (Config.ticketKeys()); not observable "
                       "from the tickets (no key id)"},
    "tls12_ticket_renewed_on_resumption": {"value": True, "source": "handshake_server.go doResumeHandshake(): "
                                           "'We always send a new session ticket'"},
}

GNUTLS_FACTS = {
    "implementation": "GnuTLS gnutls-serv (Debian gnutls-bin), --http, no session options",
    "session_ids": {"value": True, "source": "src/serv.c: gnutls_db_set_{retrieve,store,remove}_function("
                    "wrap_db_*) unless --nodb (a session cache: resumption by ID)"},
    "tickets": {"value": True, "source": "src/serv.c: gnutls_session_ticket_enable_server() unless "
                "--noticket"},
    "tls12_lifetime_hint_s": {"value": 21600, "source": "lib/ext/session_ticket.c "
                              "_gnutls_send_new_session_ticket(): lifetime hint = internals.expire_time; "
                              "lib/state.c gnutls_init(): expire_time = DEFAULT_EXPIRE_TIME (lib/gnutls_int.h: "
                              "21600); gnutls-serv never calls gnutls_db_set_cache_expiration()"},
    "tls13_ticket_lifetime_s": {"value": 21600, "source": "lib/tls13/session_ticket.c "
                                "generate_session_ticket(): ticket->lifetime = internals.expire_time"},
    "tls13_ticket_count": {"value": 2, "source": "lib/handshake-defs.h TLS13_TICKETS_TO_SEND 2 "
                           "(lib/handshake-tls13.c _gnutls13_send_session_ticket(session, "
                           "TLS13_TICKETS_TO_SEND, ...))"},
    "tls13_max_early_data": {"value": None, "source": "src/serv.c: GNUTLS_ENABLE_EARLY_DATA only with "
                             "--earlydata"},
    "ticket_family": {"value": "gnutls", "source": "lib/ext/session_ticket.c pack_ticket(): key_name[16] "
                      "IV[16] uint16 len encrypted_state MAC; lib/gnutls_int.h TICKET_KEY_NAME_SIZE 16, "
                      "TICKET_IV_SIZE 16, TICKET_CIPHER AES-256-CBC, TICKET_MAC_ALGO SHA1, TICKET_MAC_SIZE 20"},
    "ticket_key_id_len": {"value": 16, "source": "lib/gnutls_int.h TICKET_KEY_NAME_SIZE 16"},
    "key_rotation_s": {"value": 3 * 21600, "source": "lib/stek.c T(): the key (and its name, the first 16 "
                       "bytes of SHA3-512(T || master key)) changes when floor(now / (expire_time * "
                       "STEK_ROTATION_PERIOD_PRODUCT)) does; lib/gnutls_int.h STEK_ROTATION_PERIOD_PRODUCT 3 "
                       "-> every 64800 s, at multiples of 64800 s since the Unix epoch"},
}


def zoo_ground_truth(cfg=None) -> dict:
    """Ground truth of the zoo hosts (``testbed status --json`` -> ground_truth.zoo)."""
    out = {}
    now = time.time()
    for h in HOSTS:
        if cfg is not None and not _enabled(cfg, h):
            continue
        facts = dict(GO_FACTS if h.label == "gotls" else GNUTLS_FACTS)
        entry = {"hostname": h.hostname, "namespace": h.namespace, "addresses": list(h.addresses),
                 "port": h.port, "installed": available(h.label), "facts": facts}
        if h.label == "gotls":
            entry["version"] = _go_version()
        else:
            entry["version"] = _gnutls_version()
            period = facts["key_rotation_s"]["value"]
            entry["next_key_rotation_at"] = (int(now) // period + 1) * period
        out[h.label] = entry
    return out


# ------------------------------------------------------------------------ the wrapper
def _serve(addresses: list[str], argv: list[str]) -> int:
    for a in addresses:
        cidr = f"{a}/128" if ":" in a else f"{a}/32"
        cmd = ["ip", "addr", "add", cidr, "dev", "lo"] + (["nodad"] if ":" in a else [])
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode != 0 and "File exists" not in r.stderr:
            print(f"zoo: {' '.join(cmd)}: {r.stderr.strip()}", file=sys.stderr)
            return 1
    child = subprocess.Popen(argv, stdin=subprocess.DEVNULL)

    def stop(signum, _frame):
        # only signal here: the main thread's child.wait() returns once the child is gone
        # (a wait inside the handler would contend with it for Popen's wait lock)
        child.terminate()
        signal.signal(signal.SIGALRM, lambda *_: child.kill())
        signal.alarm(3)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    rc = child.wait()
    return 0 if rc in (-signal.SIGTERM, -signal.SIGKILL) else rc


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python3 -m testbed.zoo")
    sub = ap.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("serve", help="put addresses on lo, then run the server (after --)")
    s.add_argument("--add", action="append", default=[])
    s.add_argument("server", nargs=argparse.REMAINDER)
    a = ap.parse_args(argv)
    server = a.server[1:] if a.server[:1] == ["--"] else a.server
    if not server:
        print("zoo: no server command", file=sys.stderr)
        return 2
    os.environ.pop("PYTHONPATH", None)
    return _serve(a.add, server)


if __name__ == "__main__":
    sys.exit(main())
