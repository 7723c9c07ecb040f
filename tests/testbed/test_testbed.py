"""The testbed answers as configured, checked with independent clients run in the vantage
namespace (openssl s_client / sess_id, curl, dnspython, the kernel's TFO client, aioquic)."""
from __future__ import annotations

import json
import re
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from conftest import REPO, needs_root, run_cli

pytestmark = needs_root()


def vexec(*cmd: str, input: str | None = None, timeout: float = 30) -> subprocess.CompletedProcess:
    return run_cli("testbed", "exec", "--", *cmd, timeout=timeout) if input is None else subprocess.run(
        [sys.executable, "-m", "netsurvey.cli", "testbed", "exec", "--", *cmd], input=input, text=True,
        capture_output=True, timeout=timeout, cwd=REPO)


def vpython(code: str, timeout: float = 60) -> str:
    r = vexec(sys.executable, "-c", textwrap.dedent(code), timeout=timeout)
    assert r.returncode == 0, r.stderr
    return r.stdout


@pytest.fixture(scope="module")
def truth():
    t0 = time.time()
    r = run_cli("testbed", "up", timeout=120)
    assert r.returncode == 0, r.stderr
    up_seconds = time.time() - t0
    st = json.loads(run_cli("testbed", "status", "--json").stdout)
    assert st["up"], st
    st["up_seconds"] = up_seconds
    yield st
    r = run_cli("testbed", "down")
    assert r.returncode == 0, r.stderr


def _hosts(truth, kind):
    return {h["hostname"]: h for h in truth["ground_truth"][kind]}


def test_up_is_fast_and_idempotent(truth):
    assert truth["up_seconds"] < 10
    pids = {p["name"]: p["pid"] for p in truth["processes"]}
    r = run_cli("testbed", "up")
    assert r.returncode == 0 and "already up" in r.stderr
    st = json.loads(run_cli("testbed", "status", "--json").stdout)
    assert {p["name"]: p["pid"] for p in st["processes"]} == pids
    kinds = {p["name"].split("-")[0] for p in st["processes"]}
    assert {"knot", "unbound", "nginx", "tcp", "quic", "atlas"} <= kinds
    assert all(p["running"] for p in st["processes"])


def tls_session(host: str, version: str) -> dict:
    """Full handshake with openssl s_client, one request, then `openssl sess_id -text`."""
    sess = f"/tmp/netsurvey-test-{host}-{version}.pem"
    Path(sess).unlink(missing_ok=True)
    req = f"GET / HTTP/1.0\r\nHost: {host}\r\n\r\n"
    r = subprocess.run(
        [sys.executable, "-m", "netsurvey.cli", "testbed", "exec", "--", "sh", "-c",
         f"(printf '{req.encode('unicode_escape').decode()}'; sleep 0.3) | openssl s_client -connect {host}:443 "
         f"-servername {host} -tls{version.replace('.', '_')} -sess_out {sess} -quiet"],
        capture_output=True, text=True, timeout=30, cwd=REPO)
    assert "HTTP/1.1" in r.stdout, r.stderr
    text = subprocess.run(["openssl", "sess_id", "-in", sess, "-text", "-noout"], capture_output=True,
                          text=True).stdout
    hint = re.search(r"lifetime hint: (\d+)", text)
    ticket_hex = "".join(re.findall(r"^\s+[0-9a-f]{4} - ((?:[0-9a-f]{2}[ -]){1,16})", text, re.M)).replace(" ", "").replace("-", "")
    sid = re.search(r"Session-ID: ([0-9A-F]*)", text)
    return {"hint": int(hint.group(1)) if hint else None, "ticket": ticket_hex, "session_id": sid.group(1) if sid else ""}


@pytest.mark.parametrize("version", ["1.2", "1.3"])
def test_tls_tickets_carry_configured_key_name_and_hint(truth, version):
    groups = truth["ground_truth"]["ticket_key_groups"]
    for name, h in _hosts(truth, "tls_hosts").items():
        if version not in h["versions"] or name == "example.test" or h["ticket_key_group"] == "rotating":
            continue
        s = tls_session(name, version)
        if not h["tickets"]:
            if version == "1.2":
                assert s["ticket"] == "", name
            else:   # OpenSSL then sends stateful TLS 1.3 tickets: a 32-byte session id
                assert len(s["ticket"]) == 64 and s["ticket"][:32] not in {g["current_key_name"] for g in groups.values()}
            continue
        group = h["ticket_key_group"] or name
        assert s["ticket"][:32] == groups[group]["current_key_name"], name
        # TLS 1.3: at most 7 days (RFC 8446 4.6.1; OpenSSL caps it at ONE_WEEK_SEC)
        assert s["hint"] == (min(h["session_timeout"], 604800) if version == "1.3" else h["session_timeout"]), name


def test_session_ids_off_gives_no_id_over_tls12(truth):
    hosts = _hosts(truth, "tls_hosts")
    assert hosts["noid.example.test"]["session_ids"] is False
    s = tls_session("noticket.example.test", "1.2")
    assert s["ticket"] == "" and len(s["session_id"]) == 64


def test_ticket_key_rotates_on_schedule(truth):
    g = truth["ground_truth"]["ticket_key_groups"]["rotating"]
    rot = g["rotation_s"]
    # wait until just after a boundary so both handshakes are well inside an epoch
    wait = rot - (time.time() % rot) + 0.6
    time.sleep(wait)
    first = tls_session("rotate.example.test", "1.2")["ticket"][:32]
    st = json.loads(run_cli("testbed", "status", "--json").stdout)
    assert first == st["ground_truth"]["ticket_key_groups"]["rotating"]["current_key_name"]
    time.sleep(rot)
    second = tls_session("rotate.example.test", "1.3")["ticket"][:32]
    st = json.loads(run_cli("testbed", "status", "--json").stdout)
    assert second == st["ground_truth"]["ticket_key_groups"]["rotating"]["current_key_name"]
    assert second != first


def test_certificates_carry_configured_sans(truth):
    r = vexec("sh", "-c", "openssl s_client -connect static.example.test:443 -servername static.example.test "
                          "</dev/null 2>/dev/null | openssl x509 -noout -ext subjectAltName")
    for san in _hosts(truth, "tls_hosts")["static.example.test"]["sans"]:
        assert f"DNS:{san}" in r.stdout


def test_redirect_alt_svc_and_pages(truth):
    r = vexec("curl", "-sS", "-m", "5", "-o", "/dev/null", "-w", "%{http_code} %{redirect_url}", "https://example.test/")
    assert r.stdout == "301 https://www.example.test/"
    r = vexec("curl", "-sSI", "-m", "5", "https://www.example.test/")
    assert 'alt-svc: h3=":443"' in r.stdout.lower()
    r = vexec("curl", "-sS", "-m", "5", "https://a.test/")
    assert "https://t.test/t.js" in r.stdout
    r = vexec("curl", "-sS", "-4", "-m", "5", "-o", "/dev/null", "-w", "%{remote_ip}", "https://b.test/")
    assert r.stdout in _hosts(truth, "tls_hosts")["b.test"]["addresses"]


TFO_PROBE = """
import json, socket, subprocess
TCP_FASTOPEN_CONNECT = 30
out = {}
for addr in %r:
    fam = socket.AF_INET6 if ":" in addr else socket.AF_INET
    acked = []
    for i in range(2):
        s = socket.socket(fam, socket.SOCK_STREAM)
        s.setsockopt(socket.IPPROTO_TCP, TCP_FASTOPEN_CONNECT, 1)
        s.settimeout(3)
        s.connect((addr, 80))
        s.sendall(b"GET / HTTP/1.0\\r\\n\\r\\n")
        s.recv(1000)
        info = s.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 104)
        acked.append(bool(info[5] & 0x20))   # tcpi_options: TCPI_OPT_SYN_DATA
        s.close()
    m = subprocess.run(["ip", "tcp_metrics", "show", addr], capture_output=True, text=True).stdout
    cookie = m.split("fo_cookie ")[1].split()[0] if "fo_cookie" in m else ""
    out[addr] = {"syn_data_acked": acked, "cookie": cookie}
print(json.dumps(out))
"""


def test_tfo_cookies_where_on_and_bound_to_addresses(truth):
    hosts = _hosts(truth, "tfo_hosts")
    addrs = [a for h in hosts.values() for a in h["addresses"]]
    vexec("ip", "tcp_metrics", "flush", "all")
    res = json.loads(vpython(TFO_PROBE % (addrs,)))
    for h in hosts.values():
        for a in h["addresses"]:
            if h["tfo"]:
                assert len(res[a]["cookie"]) == 16, (a, res[a])        # 8-byte cookie
                assert res[a]["syn_data_acked"] == [False, True], (a, res[a])
            else:
                assert res[a]["cookie"] == "" and res[a]["syn_data_acked"] == [False, False], (a, res[a])
    # same key group, different server address: different cookie (Linux binds the
    # cookie to the client/server address pair)
    assert res["198.18.10.21"]["cookie"] != res["198.18.10.22"]["cookie"]
    # the fixed key makes cookies deterministic: ask again from scratch, same cookie
    vexec("ip", "tcp_metrics", "flush", "all")
    again = json.loads(vpython(TFO_PROBE % (["198.18.10.21"],)))
    assert again["198.18.10.21"]["cookie"] == res["198.18.10.21"]["cookie"]


def test_scale_range_answers_every_address(truth):
    out = vpython("""
        import socket, random
        random.seed(7)
        ok = 0
        for _ in range(50):
            a = f"198.19.{random.randrange(256)}.{random.randrange(1, 255)}"
            s = socket.create_connection((a, 443), timeout=2); s.close(); ok += 1
        print(ok)
    """)
    assert out.strip() == "50"


def test_dns_through_vantage_resolver(truth):
    out = json.loads(vpython("""
        import json, dns.resolver
        r = dns.resolver.Resolver()          # /etc/resolv.conf of the vantage namespace
        res = {}
        for name in ["www.example.test", "on1.tfo.test", "atlas.test"]:
            res[name] = sorted(a.to_text() for t in ("A", "AAAA") for a in r.resolve(name, t))
        res["lb_resolver"] = [a.to_text() for a in r.resolve("lb4.tfo.test", "A")]
        # the resolver caches for the 1 s TTL: ask the authoritative for the pool's spread
        auth = dns.resolver.Resolver(configure=False); auth.nameservers = ["198.18.1.53"]
        res["lb"] = sorted({a.to_text() for _ in range(30) for a in auth.resolve("lb4.tfo.test", "A")})
        print(json.dumps(res))
    """))
    assert out["www.example.test"] == sorted(_hosts(truth, "tls_hosts")["www.example.test"]["addresses"])
    assert out["on1.tfo.test"] == sorted(_hosts(truth, "tfo_hosts")["on1.tfo.test"]["addresses"])
    pool = ["198.18.10.41", "198.18.10.42", "198.18.11.43", "198.18.11.44"]
    assert set(out["lb"]) <= set(pool) and len(out["lb"]) >= 2
    assert len(out["lb_resolver"]) == 1 and out["lb_resolver"][0] in pool


def test_quic_server_issues_new_token(truth):
    out = json.loads(vpython("""
        import asyncio, json, ssl
        from aioquic.asyncio import connect
        from aioquic.quic.configuration import QuicConfiguration
        tokens, tickets = [], []
        async def main():
            cfg = QuicConfiguration(is_client=True, alpn_protocols=["h3"], server_name="www.example.test")
            cfg.load_verify_locations(__import__("os").environ["SSL_CERT_FILE"])
            async with connect("198.18.2.10", 443, configuration=cfg, token_handler=tokens.append,
                               session_ticket_handler=tickets.append) as c:
                await c.ping()
                await asyncio.sleep(0.5)
        asyncio.run(asyncio.wait_for(main(), 10))
        print(json.dumps({"tokens": len(tokens), "ticket_lifetime": int((tickets[0].not_valid_after - tickets[0].not_valid_before).total_seconds())}))
    """))
    q = _hosts(truth, "quic_hosts")["www.example.test"]
    assert out["tokens"] >= 1
    assert out["ticket_lifetime"] == q["ticket_lifetime"]


def test_atlas_standin_serves_https(truth):
    r = vexec("curl", "-sS", "-m", "5", "-o", "/dev/null", "-w", "%{http_code}", "https://atlas.test/api/v2/probes/")
    assert r.stdout == "200", r.stderr


def test_down_removes_everything(truth):
    pids = [p["pid"] for p in truth["processes"]]
    assert run_cli("testbed", "down").returncode == 0
    ns = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    assert "nstb-" not in ns
    for pid in pids:
        stat = Path(f"/proc/{pid}/stat")
        assert not stat.exists() or stat.read_text().rsplit(")", 1)[1].split()[0] == "Z"
    assert not Path("/etc/netns/nstb-vantage").exists()
    assert "tbbr0" not in subprocess.run(["ip", "link"], capture_output=True, text=True).stdout
    # bring it back for the fixture's own teardown (down is idempotent)
    assert run_cli("testbed", "down").returncode == 0


def test_down_after_crash_cleans_up(truth):
    """A half-built testbed (state file, namespaces, no complete flag) is removed by down."""
    from testbed.manager import State, state_dir
    subprocess.run(["ip", "netns", "add", "nstb-crashed"], check=True)
    st = State(namespaces=["nstb-crashed"])
    st.save()
    assert run_cli("testbed", "down").returncode == 0
    assert "nstb-crashed" not in subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    assert not (state_dir() / "state.json").exists()
