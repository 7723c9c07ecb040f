"""scanners/dns/wire.py: prebuilt queries agree with dnspython; the reply parser agrees
with dnspython on well-formed messages and raises only MalformedReply on damaged ones
(bad compression pointers, truncated packets, random corruption)."""
from __future__ import annotations

import struct

import dns.edns
import dns.flags
import dns.message
import dns.rcode
import dns.rrset
import pytest
from hypothesis import given, settings, strategies as st

from scanners.dns.wire import (
    AAAA,
    A,
    EcsOption,
    MalformedReply,
    build_query,
    parse_reply,
    question_of,
    reply_question,
    with_id,
)

pytestmark = pytest.mark.unit   # no database, no CLI subprocess, no testbed, no root


label = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789-", min_size=1, max_size=12).filter(
    lambda s: not s.startswith("-") and not s.endswith("-"))
hostname = st.lists(label, min_size=1, max_size=5).map(lambda ls: ".".join(ls) + ".test")


def _reply(name: str, ttls_a, ttl_aaaa, ecs=None, rcode=0) -> bytes:
    name = name.rstrip(".") + "."
    q = dns.message.make_query(name, "A", use_edns=0, options=[ecs] if ecs else [])
    r = dns.message.make_response(q)
    r.use_edns(0, options=[ecs] if ecs else [])
    r.set_rcode(rcode)
    r.flags |= dns.flags.AA
    for i, t in enumerate(ttls_a):
        r.answer.append(dns.rrset.from_text(name, t, "IN", "A", f"198.18.2.{i + 1}"))
    if ttl_aaaa is not None:
        r.answer.append(dns.rrset.from_text(name, ttl_aaaa, "IN", "AAAA", "2001:2::1"))
    r.authority.append(dns.rrset.from_text("test.", 300, "IN", "NS", "ns.test."))
    r.additional.append(dns.rrset.from_text("ns.test.", 300, "IN", "A", "198.18.1.53"))
    return r.to_wire()


@settings(max_examples=80, deadline=None)
@given(name=hostname, ttls=st.lists(st.integers(0, 2**31 - 1), min_size=0, max_size=4),
       ttl6=st.none() | st.integers(0, 86400), scope=st.integers(0, 24), rcode=st.sampled_from([0, 2, 3, 5]))
def test_parser_agrees_with_dnspython(name, ttls, ttl6, scope, rcode):
    ecs = dns.edns.ECSOption("198.18.0.0", 24, scope)
    wire = _reply(name, ttls, ttl6, ecs, rcode)
    ref = dns.message.from_wire(wire)
    got = parse_reply(wire)
    assert got.rcode == ref.rcode() and got.aa and got.qname == name and got.qtype == A
    a = [rr for rr in got.answer if rr.rtype == A]
    # dnspython merges the records of one RRset and keeps the smallest TTL, as the scanner does
    assert len(a) == len(ttls) and [rr.value for rr in a] == [f"198.18.2.{i + 1}" for i in range(len(ttls))]
    if ttls:
        assert ref.answer[0].ttl == min(rr.ttl for rr in a)
        assert [rr.ttl for rr in a] == ttls
    six = [rr for rr in got.answer if rr.rtype == AAAA]
    assert [(rr.ttl, rr.value) for rr in six] == ([] if ttl6 is None else [(ttl6, "2001:2::1")])
    assert got.authority[0].value == "ns.test" and got.additional[0].value == "198.18.1.53"
    assert got.ecs == EcsOption("198.18.0.0", 24, scope)


@settings(max_examples=200, deadline=None)
@given(data=st.data())
def test_damaged_replies_raise_only_malformed(data):
    wire = bytearray(_reply("www.example.test.", [300, 60], 600, dns.edns.ECSOption("198.18.0.0", 24, 16)))
    for _ in range(data.draw(st.integers(1, 6))):
        i = data.draw(st.integers(0, len(wire) - 1))
        wire[i] = data.draw(st.integers(0, 255))
    cut = data.draw(st.integers(0, len(wire)))
    try:
        parse_reply(bytes(wire[:cut]))
    except MalformedReply:
        pass


def test_every_truncation_is_malformed_not_a_crash():
    wire = _reply("www.example.test.", [300], 600)
    for n in range(len(wire)):
        with pytest.raises(MalformedReply):
            parse_reply(wire[:n])
    assert parse_reply(wire).answer[0].ttl == 300


def _header(an=1) -> bytes:
    return struct.pack("!HHHHHH", 1, 0x8400, 1, an, 0, 0)


def test_bad_compression_pointers():
    q = b"\x03www\x04test\x00" + struct.pack("!HH", 1, 1)
    rr = struct.pack("!HHIH", 1, 1, 300, 4) + bytes([198, 18, 2, 1])
    ok = _header() + q + b"\xc0\x0c" + rr
    assert parse_reply(ok).answer[0].name == "www.test"
    forward = _header() + q + b"\xc0\x40" + rr          # points past itself
    self_loop = _header() + q + b"\xc0\x1a" + rr         # points at itself (offset 26)
    assert len(_header() + q) == 26
    loop2 = _header() + q + b"\x01a\xc0\x1a" + rr        # a label, then back to that label: endless
    dangling = _header() + q + b"\xc0"                    # half a pointer
    bad_label = _header() + q + b"\x80abc" + rr           # reserved label type
    for bad in (forward, self_loop, loop2, dangling, bad_label):
        with pytest.raises(MalformedReply):
            parse_reply(bad)


def test_prebuilt_query_matches_dnspython():
    wire = with_id(build_query("WWW.Example.test", A, rd=True, ecs=EcsOption("198.18.0.77", 24)), 0x1234)
    m = dns.message.from_wire(wire)
    assert m.id == 0x1234 and m.flags & dns.flags.RD and str(m.question[0].name) == "www.example.test."
    ecs = [o for o in m.options if isinstance(o, dns.edns.ECSOption)][0]
    assert (ecs.address, ecs.srclen, ecs.scopelen) == ("198.18.0.0", 24, 0)
    assert m.payload == 1232
    plain = dns.message.from_wire(build_query("a.test", AAAA, edns_payload=None))
    assert plain.edns == -1 and not plain.flags & dns.flags.RD
    # replies are matched on the question, case-insensitively, type included
    r = _reply("www.example.test.", [1], None)
    assert reply_question(r) == question_of(build_query("www.EXAMPLE.test", A))
    assert reply_question(r) != question_of(build_query("www.example.test", AAAA))


def test_aaaa_text_is_pythons_canonical_form():
    q = dns.message.make_query("m.test.", "AAAA")
    r = dns.message.make_response(q)
    for v in ("::ffff:a00:1", "2001:2:0:2::10", "::1"):
        r.answer.append(dns.rrset.from_text("m.test.", 60, "IN", "AAAA", v))
    got = [rr.value for rr in parse_reply(r.to_wire()).answer]
    assert got == ["::ffff:a00:1", "2001:2:0:2::10", "::1"]


@settings(max_examples=300, deadline=None)
@given(name=st.one_of(hostname, st.text(alphabet="aZ09-_.\\é* ", min_size=1, max_size=70),
                      st.lists(st.text(alphabet="ab", min_size=60, max_size=70), min_size=1, max_size=5).map(".".join)))
def test_name_encoding_agrees_with_dnspython(name):
    """The plain-name fast path and the dnspython fallback give dnspython's wire form, and
    names dnspython refuses are refused (not encoded differently)."""
    import dns.exception
    import dns.name

    from scanners.dns.wire import encode_name

    try:
        ref = dns.name.from_text(name.rstrip(".") + ".").canonicalize().to_wire()
    except (dns.exception.DNSException, UnicodeError, ValueError):
        with pytest.raises((dns.exception.DNSException, UnicodeError, ValueError)):
            encode_name(name)
        return
    assert encode_name(name) == ref
