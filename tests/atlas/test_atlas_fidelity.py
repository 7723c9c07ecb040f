"""Issue 22, import fidelity: RIPE Atlas results import with the values sagan itself
parses, and every result is either measured or a failure with a reason (atlas/README.md)."""
from __future__ import annotations

import base64

import pytest

from atlas.parse import parse_dns, parse_ping

pytestmark = pytest.mark.unit   # no database, no CLI subprocess, no testbed, no root


BASE = {"msm_id": 1001, "prb_id": 7, "timestamp": 1700000000, "type": "ping"}


def ping(**kw):
    return {**BASE, "fw": 5020, "af": 4, "dst_addr": "198.18.0.1", "dst_name": "198.18.0.1", "src_addr": "10.0.0.2",
            "proto": "ICMP", "size": 48, "ttl": 55, "step": 240, **kw}


def test_duplicate_replies_only_is_a_failure_not_a_vanished_row():
    # rcvd 0, avg -1: sagan reads no RTT; the three entries are duplicates of lost requests
    o = parse_ping(ping(sent=3, rcvd=0, dup=3, avg=-1, min=-1, max=-1,
                        result=[{"x": "*"}, {"x": "*"}, {"x": "*"}, {"dup": 1, "rtt": 5.1}, {"dup": 1, "rtt": 5.3},
                                {"dup": 1, "rtt": 5.2}]))
    assert o.avg_ms is None and o.error == "no-reply (duplicate replies only)"
    assert o.rtts_ms == (None, None, None)   # one entry per echo request; duplicates are not requests


def test_duplicates_beside_real_replies_do_not_count_as_packets():
    o = parse_ping(ping(sent=2, rcvd=2, dup=1, avg=10.5, min=10.0, max=11.0,
                        result=[{"rtt": 10.0}, {"rtt": 11.0}, {"dup": 1, "rtt": 12.0}]))
    assert (o.error, o.avg_ms, o.min_ms, o.max_ms, o.rtts_ms) == (None, 10.5, 10.0, 11.0, (10.0, 11.0))


def test_old_firmware_summary_without_packets_is_measured():
    # firmware < 4460: pf/addr/name, and no per-packet list; the summary says 3 replies
    raw = {**BASE, "fw": 4400, "pf": 4, "addr": "198.18.0.1", "name": "198.18.0.1", "proto": "ICMP",
           "sent": 3, "rcvd": 3, "avg": 20.25, "min": 20.0, "max": 20.5}
    o = parse_ping(raw)
    assert (o.error, o.avg_ms, o.min_ms, o.rcvd, o.dst_addr) == (None, 20.25, 20.0, 3, "198.18.0.1")


def test_a_lost_ping_is_a_failure_with_a_reason():
    o = parse_ping(ping(sent=3, rcvd=0, avg=-1, min=-1, max=-1, result=[{"x": "*"}] * 3))
    assert o.error == "no-reply" and o.avg_ms is None


def test_every_ping_is_measured_or_a_failure():
    for raw in (ping(sent=1, rcvd=1, avg=3.0, min=3.0, max=3.0, result=[{"rtt": 3.0}]),
                ping(sent=1, rcvd=0, dup=1, avg=-1, min=-1, max=-1, result=[{"x": "*"}, {"dup": 1, "rtt": 3.0}]),
                ping(sent=1, rcvd=0, avg=-1, result=[{"x": "*"}]),
                {**BASE, "fw": 4400, "pf": 4, "addr": "198.18.0.1", "sent": 1, "rcvd": 1, "avg": 3.0, "min": 3, "max": 3},
                ping(dnserr="NXDOMAIN")):
        o = parse_ping(raw)
        assert (o.avg_ms is None) != (o.error is None), (raw, o)


def _abuf(ip: str) -> str:
    """A DNS response (wire format, base64) for whoami.example.test A -> ip."""
    import dns.message
    import dns.rrset

    q = dns.message.make_query("whoami.example.test", "A")
    r = dns.message.make_response(q)
    r.answer.append(dns.rrset.from_text("whoami.example.test.", 0, "IN", "A", ip))
    return base64.b64encode(r.to_wire()).decode()


def test_dns_result_without_resultset_keeps_its_rtt():
    """A DNS measurement against one resolver (not use_probe_resolver) has ``result`` at
    the top level, no ``resultset``; it was stored as 'malformed' without its RTT."""
    raw = {**BASE, "type": "dns", "fw": 5020, "af": 4, "dst_addr": "198.18.1.53", "src_addr": "10.0.0.2",
           "proto": "UDP", "result": {"rt": 12.5, "size": 60, "ANCOUNT": 1, "QDCOUNT": 1, "ID": 1,
                                      "abuf": _abuf("198.18.9.9")}}
    [o] = parse_dns(raw)
    assert (o.error, o.rt_ms, o.resolver_addr, o.egress_addr) == (None, 12.5, "198.18.1.53", "198.18.9.9"), o


def test_dns_result_with_resultset_unchanged():
    entry = {"af": 4, "dst_addr": "198.18.1.53", "src_addr": "10.0.0.2", "proto": "UDP", "subid": 1,
             "result": {"rt": 7.5, "size": 60, "ANCOUNT": 1, "QDCOUNT": 1, "ID": 1, "abuf": _abuf("198.18.9.8")}}
    obs = parse_dns({**BASE, "type": "dns", "fw": 5020, "resultset": [entry]})
    assert [(o.subid, o.rt_ms, o.egress_addr, o.error) for o in obs] == [(1, 7.5, "198.18.9.8", None)]
