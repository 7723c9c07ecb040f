"""The servers of the web namespace (nginx, the QUIC servers, the Atlas stand-in; the
browser probes' observer only sniffs) listen exactly where the testbed config says, and
nowhere else: no wildcard listeners, no addresses outside the configured ones."""
import ipaddress
import subprocess

from conftest import needs_root

pytestmark = needs_root()


def listeners(ns: str) -> set[tuple[str, str, int]]:
    out = set()
    for proto in ("-t", "-u"):
        r = subprocess.run(["ip", "netns", "exec", ns, "ss", "-Hln", proto], capture_output=True, text=True,
                           check=True)
        for line in r.stdout.splitlines():
            local = line.split()[3]
            addr, port = local.rsplit(":", 1)
            addr = addr.strip("[]").split("%")[0]
            out.add(("tcp" if proto == "-t" else "udp", addr, int(port)))
    return out


def test_web_namespace_binds_only_configured_addresses(testbed):
    gt = testbed.status()["ground_truth"]
    configured = {str(ipaddress.ip_address(a)) for h in gt["tls_hosts"] + gt["quic_hosts"] for a in h["addresses"]}
    if gt.get("atlas"):
        configured |= {gt["atlas"]["address"], str(ipaddress.ip_address(gt["atlas"]["address_v6"]))}
    seen = listeners("nstb-web")
    assert seen, "nothing listens in the web namespace"
    for proto, addr, port in seen:
        assert addr not in ("0.0.0.0", "*", "::"), (proto, addr, port)
        assert str(ipaddress.ip_address(addr)) in configured, (proto, addr, port)
    # and every configured TLS address really listens on 443
    tls = {str(ipaddress.ip_address(a)) for h in gt["tls_hosts"] for a in h["addresses"]}
    assert tls <= {a for p, a, port in seen if p == "tcp" and port == 443}
