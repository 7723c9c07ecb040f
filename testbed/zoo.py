"""The server zoo (issue 24): TLS implementations other than our own nginx/OpenSSL, each
run with its STOCK defaults, and their ground truth taken from the implementation's own
source (file + function / constant), not from a configuration we wrote.

Hosts (namespaces and DNS names in config/testbed.toml):

- ``gotls.zoo.test`` (ns ``zoogo``, 198.18.124.10 / 2001:2:0:124::10): a net/http HTTPS
  server whose tls.Config sets only the certificate (testbed/zoo/gotls/main.go), built
  by scripts/build_zoo.sh with the machine's Go (its version is in the ground truth).
- ``gnutls.zoo.test`` (ns ``zoognutls``, 198.18.125.10 / 2001:2:0:125::10):
  ``gnutls-serv --http`` of Debian's gnutls-bin (3.7.9), no option touching sessions.
- ``lighttpd.zoo.test`` (ns ``zoolight``, 198.18.126.10 / 2001:2:0:126::10): lighttpd
  1.4.69 with mod_openssl (its own STEK rotation), a config with only addresses and the
  certificate.
- ``haproxy.zoo.test`` (ns ``zoohaproxy``, 198.18.127.10 / 2001:2:0:127::10): HAProxy
  2.6 terminating TLS (``bind ... ssl crt``) and answering itself; no tune.ssl options.
- ``jsse.zoo.test`` (ns ``zoojsse``, 198.18.128.10 / 2001:2:0:128::10): Java's JSSE behind
  com.sun.net.httpserver (testbed/zoo/jsse/ZooJsse.java, run from source by the JDK), with
  ``-Djdk.net.hosts.file`` so the HTTP server's per-connection reverse lookup cannot stall it
  (JSSE_NO_DNS; nothing TLS changes).

Each server runs under ``python3 -m testbed.zoo serve``, which puts the host's addresses
on the namespace's loopback and then runs the server as its child (the manager records
the wrapper's PID; stopping it stops the child).

Time: the rotation periods here are hours (Go 24 h, GnuTLS 18 h, lighttpd 8 h); the tests check only
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
    ZooHost("lighttpd", "lighttpd.zoo.test", "zoolight", ("198.18.126.10", "2001:2:0:126::10")),
    ZooHost("haproxy", "haproxy.zoo.test", "zoohaproxy", ("198.18.127.10", "2001:2:0:127::10")),
    ZooHost("jsse", "jsse.zoo.test", "zoojsse", ("198.18.128.10", "2001:2:0:128::10")),
)
PROGRAMS = {"gnutls": "gnutls-serv", "lighttpd": "lighttpd", "haproxy": "haproxy", "jsse": "java"}
JSSE_SRC = ROOT / "testbed" / "zoo" / "jsse" / "ZooJsse.java"
#: Why the JSSE host runs with -Djdk.net.hosts.file (issue 24, the "open finding" of
#: 2026-11-24): com.sun.net.httpserver builds each connection's SSLEngine with
#: ``sslctx.createSSLEngine(addr.getHostName(), addr.getPort())`` (jdk.httpserver
#: sun/net/httpserver/SSLStreams.java, SSLStreams(); line 64 at openjdk/jdk 1fbd931), i.e. a
#: reverse DNS lookup of the client per connection, and JDK 17 runs that on the single
#: HTTP-Dispatcher thread (ServerImpl.java DefaultExecutor.execute(): task.run()). jstack of
#: the testbed's zoo-jsse (17.0.15) during a stall: HTTP-Dispatcher RUNNABLE in
#: Inet6AddressImpl.getHostByAddr <- InetAddress.getHostName(InetAddress.java:605) <-
#: SSLStreams.<init>(SSLStreams.java:62) <- ServerImpl$Exchange.run(ServerImpl.java:658) <-
#: ServerImpl$DefaultExecutor.execute(ServerImpl.java:201) <- Dispatcher.handle(ServerImpl.java:561).
#: The testbed namespaces inherit the machine's /etc/resolv.conf, whose nameserver is not
#: reachable from them: each lookup waits out glibc's resolver timeout (5 s, resolv.conf(5)
#: RES_TIMEOUT; measured: InetAddress.getHostName() of 198.18.0.1 in nstb-zoojsse takes 0 or 5 s),
#: and the whole server stands still meanwhile. Clients with a read timeout of 5 s (netsurvey's
#: ``scan tls`` default; gnutls-cli runs under the second opinion's 10 s for two handshakes)
#: saw every other connection time out - the resumption attempts among them - while
#: ``openssl s_client -reconnect`` (no timeout) just waited. Nothing TLS: with lookups
#: answered at once every client resumes by ID and ticket (TLS 1.2, 1.3). java/net/InetAddress.java
#: createNameService(): jdk.net.hosts.file selects HostsFileNameService (no DNS; a name not in the
#: file fails at once and getHostName() returns the literal address).
JSSE_NO_DNS = "-Djdk.net.hosts.file"


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


def _version(label: str) -> str | None:
    """Version of the installed server program (Go: the toolchain that builds zoo-gotls)."""
    if label == "gotls":
        return _go_version()
    exe = shutil.which(PROGRAMS[label])
    if not exe:
        return None
    flag = {"gnutls": "--version", "jsse": "-version"}.get(label, "-v")
    r = subprocess.run([exe, flag], capture_output=True, text=True)
    m = re.search(r"(\d+\.\d+\.\d+)", r.stdout + r.stderr)
    return m.group(1) if m else None


def available(label: str) -> bool:
    """The zoo host's server program is installed (scripts/install.sh)."""
    if label == "gotls":
        return GO_BIN.exists()
    if label == "lighttpd":
        return shutil.which("lighttpd") is not None and Path("/usr/lib/lighttpd/mod_openssl.so").exists()
    if label in PROGRAMS:
        return shutil.which(PROGRAMS[label]) is not None
    return False


def _addr_port(a: str, port: int) -> str:
    return f"[{a}]:{port}" if ":" in a else f"{a}:{port}"


def _lighttpd_conf(h: ZooHost, cert: Path, key: Path, d: Path) -> Path:
    """The smallest lighttpd.conf that serves TLS: addresses, certificate, mod_openssl.
    Nothing about sessions, tickets or STEKs (mod_openssl's defaults)."""
    (d / "www").mkdir(parents=True, exist_ok=True)
    (d / "www" / "index.html").write_text("zoo-lighttpd\n")
    v4, v6 = h.addresses
    conf = d / "lighttpd.conf"
    conf.write_text(f"""server.document-root = "{d / 'www'}"
server.modules += ("mod_openssl")
server.bind = "{v4}"
server.port = {h.port}
server.errorlog = "{d / 'error.log'}"
ssl.engine = "enable"
ssl.pemfile = "{cert}"
ssl.privkey = "{key}"
$SERVER["socket"] == "[{v6}]:{h.port}" {{ ssl.engine = "enable" }}
""")
    return conf


def _haproxy_conf(h: ZooHost, cert: Path, key: Path, d: Path) -> Path:
    """A frontend that terminates TLS and answers every request itself; nothing about
    sessions, tickets or ticket keys (HAProxy's defaults)."""
    d.mkdir(parents=True, exist_ok=True)
    pem = d / "crt.pem"
    pem.write_bytes(cert.read_bytes() + key.read_bytes())
    binds = "".join(f"    bind {_addr_port(a, h.port)} ssl crt {pem}\n" for a in h.addresses)
    conf = d / "haproxy.cfg"
    conf.write_text(f"""global
    log stderr format raw local0 warning
defaults
    mode http
    timeout connect 5s
    timeout client 10s
    timeout server 10s
frontend zoo
{binds}    http-request return status 200 content-type text/plain string "zoo-haproxy"
""")
    return conf


def render_zoo(cfg, pki_dir: Path, state_dir: Path | None = None) -> list:
    """Process specs of the zoo hosts whose namespace config/testbed.toml declares and
    whose program is installed (configuration files under ``state_dir``/zoo)."""
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
        elif h.label == "jsse":
            d = Path(state_dir or pki_dir.parent) / "zoo" / h.label
            d.mkdir(parents=True, exist_ok=True)
            p12 = d / "keystore.p12"
            subprocess.run(["openssl", "pkcs12", "-export", "-in", str(cert), "-inkey", str(key), "-out", str(p12),
                            "-passout", "pass:zoo", "-name", "zoo"], check=True, capture_output=True)
            # a name service of its own: com.sun.net.httpserver looks up every client's
            # name (JSSE_NO_DNS); a hosts file with only localhost answers at once
            hosts = d / "hosts"
            hosts.write_text("127.0.0.1 localhost\n::1 localhost\n")
            server = [shutil.which("java"), f"{JSSE_NO_DNS}={hosts}", str(JSSE_SRC), str(p12), "zoo",
                      *h.addresses]
        elif h.label in ("lighttpd", "haproxy"):
            d = Path(state_dir or pki_dir.parent) / "zoo" / h.label
            d.mkdir(parents=True, exist_ok=True)
            if h.label == "lighttpd":
                server = [shutil.which("lighttpd"), "-D", "-f", str(_lighttpd_conf(h, cert, key, d))]
            else:
                server = [shutil.which("haproxy"), "-db", "-f", str(_haproxy_conf(h, cert, key, d))]
        else:
            # stock gnutls-serv: only the port, the credentials and HTTP mode (so a request
            # gets an answer); no --noticket/--nodb/--priority (gnutls-serv(1)).
            server = [shutil.which("gnutls-serv"), "--http", "-p", str(h.port),
                      "--x509certfile", str(cert), "--x509keyfile", str(key)]
        specs.append(ProcSpec(name=f"zoo-{h.label}", namespace=h.namespace, argv=[*wrap, *adds, "--", *server],
                              env=env, ready_tcp=(h.addresses[0], h.port),
                              ready_timeout_s=60.0 if h.label == "jsse" else 8.0))   # javac + JVM start
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
    "ticket_key_scope": {"value": "process", "source": "src/crypto/tls/common.go Config.ticketKeys(): "
                         "autoSessionTicketKeys of the one tls.Config both listeners share (no key id anyway)"},
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
    "ticket_key_scope": {"value": "process", "source": "gnutls-serv src/serv.c main(): one "
                         "gnutls_session_ticket_key_generate(&session_ticket_key) for every session"},
    "key_rotation_s": {"value": 3 * 21600, "source": "lib/stek.c T(): the key (and its name, the first 16 "
                       "bytes of SHA3-512(T || master key)) changes when floor(now / (expire_time * "
                       "STEK_ROTATION_PERIOD_PRODUCT)) does; lib/gnutls_int.h STEK_ROTATION_PERIOD_PRODUCT 3 "
                       "-> every 64800 s, at multiples of 64800 s since the Unix epoch"},
}


# Debian 12's OpenSSL 3.0 under lighttpd and HAProxy: what neither server overrides.
_OPENSSL_DEFAULTS = {
    "tls12_lifetime_hint_s": {"value": 7200, "source": "OpenSSL ssl/statem/statem_srvr.c "
                              "construct_stateless_ticket(): hint = session timeout (0 on a resumed TLS 1.2 "
                              "session); ssl/t1_lib.c tls1_default_timeout() = 60 * 60 * 2"},
    "tls13_ticket_lifetime_s": {"value": 7200, "source": "construct_stateless_ticket(): TLS 1.3 lifetime = "
                                "session timeout (capped at one week); tls1_default_timeout() = 7200"},
    "tls13_ticket_count": {"value": 2, "source": "OpenSSL ssl/ssl_lib.c SSL_CTX_new_ex(): num_tickets = 2 "
                           "(neither server calls SSL_CTX_set_num_tickets)"},
    "tls13_max_early_data": {"value": None, "source": "OpenSSL: max_early_data defaults to 0 (no early_data "
                             "extension in NewSessionTicket); neither server sets it"},
    "ticket_family": {"value": "openssl", "source": "key_name[16] iv[16] AES-256-CBC HMAC-SHA256[32]: "
                      "construct_stateless_ticket() with the server's key callback or OpenSSL's own key"},
    "ticket_key_id_len": {"value": 16, "source": "TLSEXT_KEYNAME_LENGTH 16 (OpenSSL ssl/ssl_local.h)"},
}

LIGHTTPD_FACTS = {
    "implementation": "lighttpd mod_openssl (Debian lighttpd + lighttpd-mod-openssl), no ssl.* session options",
    "session_ids": {"value": False, "source": "lighttpd src/mod_openssl.c (1.4.69) network_init_ssl(): unless "
                    "ssl.session-cache is enabled (default 0) SSL_CTX_set_session_cache_mode(SSL_SESS_CACHE_OFF "
                    "| ...); OpenSSL then sends an empty ServerHello session_id (statem_srvr.c "
                    "tls_construct_server_hello())"},
    "tickets": {"value": True, "source": "src/mod_openssl.c header comment and ssl_tlsext_ticket_key_cb(): "
                "tickets on unless ssl.openssl.ssl-conf-cmd Options -SessionTicket"},
    **_OPENSSL_DEFAULTS,
    "ticket_family": {"value": "openssl", "source": "src/mod_openssl.c ssl_tlsext_ticket_key_cb(): RAND "
                      "key_name[16], EVP_aes_256_cbc() iv, HMAC EVP_sha256() into OpenSSL's ticket layout"},
    "ticket_key_scope": {"value": "process", "source": "src/mod_openssl.c: session_ticket_keys[] is one static "
                         "array for every socket of the process"},
    "key_rotation_s": {"value": 28800, "source": "src/mod_openssl.c mod_openssl_session_ticket_key_check(): a "
                       "new STEK every 28800 s ('8 hrs'), each valid 86400 s "
                       "(mod_openssl_session_ticket_key_generate(cur_ts, cur_ts+86400)), three kept; the check runs only "
                       "when the clock is a multiple of 64 s (mod_openssl_handle_trigger: 'cur_ts & 0x3f'), so a "
                       "rotation is up to 63 s late. Observed under libfaketime: the key of the first seconds "
                       "after start-up is replaced at the first such check"},
}

HAPROXY_FACTS = {
    "implementation": "HAProxy (Debian haproxy 2.6), bind ... ssl crt, no tune.ssl / tls-ticket-keys",
    "session_ids": {"value": True, "source": "HAProxy src/ssl_sock.c ssl_set_shctx(): SSL_SESS_CACHE_SERVER with "
                    "the shared cache (tune.ssl.cachesize default 20000, src/haproxy.c SSLCACHESIZE)"},
    "tickets": {"value": True, "source": "src/ssl_sock.c ssl_sock_prepare_ctx(): SSL_OP_NO_TICKET only with "
                "no-tls-tickets"},
    **_OPENSSL_DEFAULTS,
    "tls12_lifetime_hint_s": {"value": 7200, "source": "src/ssl_sock.c ssl_sock_prepare_ctx(): "
                              "SSL_CTX_set_timeout() only 'if (global_ssl.life_time)', and the global_ssl "
                              "initialiser sets no life_time (v2.6.0), so OpenSSL's 7200 s "
                              "(tls1_default_timeout()). doc/configuration.txt tune.ssl.lifetime says "
                              "'defaults to 300': the source, and our measurement, say otherwise"},
    "tls13_ticket_lifetime_s": {"value": 7200, "source": "as the TLS 1.2 hint: session timeout 7200 s"},
    "ticket_key_scope": {"value": "listener", "source": "src/ssl_sock.c ssl_sock_prepare_bind_conf() -> "
                         "ssl_sock_initial_ctx(): one SSL_CTX per bind line, and OpenSSL draws a random ticket "
                         "key (name) per SSL_CTX: each of the host's two bind lines (IPv4, IPv6) has its own key "
                         "(found by the zoo test; a session from one address is not resumed at the other)"},
    "key_rotation_s": {"value": None, "source": "without tls-ticket-keys HAProxy installs no ticket key "
                       "callback: OpenSSL's own key, made once per SSL_CTX (ssl/ssl_lib.c SSL_CTX_new_ex() "
                       "RAND_bytes ext.tick_key_name), never rotates while the process runs"},
}

_JDK = "OpenJDK src/java.base/share/classes/sun/security/ssl/"
JSSE_FACTS = {
    "implementation": "Java JSSE (com.sun.net.httpserver.HttpsServer, SSLContext with only key material)",
    "session_ids": {"value": True, "source": _JDK + "SSLSessionContextImpl.java: the server session cache "
                    "(javax.net.ssl.sessionCacheSize default 20480); without the client's session_ticket "
                    "extension the session is cached under its ID"},
    "tickets": {"value": True, "source": _JDK + "SSLSessionContextImpl.java statelessEnabled(): "
                "jdk.tls.server.enableSessionTicketExtension (default true since JDK 13)"},
    "tls12_lifetime_hint_s": {"value": 86400, "source": _JDK + "NewSessionTicket.java (T12NewSessionTicketProducer): "
                              "lifetime = the session context's timeout; SSLSessionContextImpl.java "
                              "DEFAULT_SESSION_TIMEOUT 86400 s"},
    "tls13_ticket_lifetime_s": {"value": 86400, "source": _JDK + "NewSessionTicket.java "
                                "(T13NewSessionTicketProducer): ticket_lifetime = session timeout (86400 s)"},
    "tls13_ticket_count": {"value": 1, "source": _JDK + "NewSessionTicket.java: one NewSessionTicket after the "
                           "handshake (JDK 17; later JDKs add jdk.tls.server.newSessionTicketCount)"},
    "tls13_max_early_data": {"value": None, "source": "JSSE does not implement 0-RTT (no early_data extension)"},
    "ticket_family": {"value": "jsse", "source": _JDK + "SessionTicketExtension.java SessionTicketSpec.encrypt(): "
                      "key id (int, 4 bytes) | iv[16] | AES-GCM(state) with a 16-byte tag"},
    "ticket_key_id_len": {"value": 4, "source": _JDK + "SessionTicketExtension.java: Integer.BYTES key number"},
    "ticket_key_scope": {"value": "process", "source": _JDK + "SessionTicketExtension.java KeyState: the keys "
                         "live in the SSLContext's keyHashMap (one SSLContext for both listeners)"},
    "key_rotation_s": {"value": 3600, "source": _JDK + "SessionTicketExtension.java TIMEOUT_DEFAULT 3600 * 1000 ms "
                       "(jdk.tls.server.statelessKeyTimeout); the key number goes up by one per new key"},
}

_FACTS = {"gotls": GO_FACTS, "gnutls": GNUTLS_FACTS, "lighttpd": LIGHTTPD_FACTS, "haproxy": HAPROXY_FACTS,
          "jsse": JSSE_FACTS}


def zoo_ground_truth(cfg=None) -> dict:
    """Ground truth of the zoo hosts (``testbed status --json`` -> ground_truth.zoo)."""
    out = {}
    now = time.time()
    for h in HOSTS:
        if cfg is not None and not _enabled(cfg, h):
            continue
        facts = dict(_FACTS[h.label])
        entry = {"hostname": h.hostname, "namespace": h.namespace, "addresses": list(h.addresses),
                 "port": h.port, "installed": available(h.label), "facts": facts}
        entry["version"] = _version(h.label)
        if h.label == "gnutls":
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
