"""Pure parts of the QUIC scanner (no network): the Version Negotiation probe and parser,
Alt-Svc parsing, key-identifier inference and the CLI's duration/target parsing."""
from __future__ import annotations

import os
import struct

import pytest

from netsurvey.durations import duration_option_s as parse_duration  # the one duration parser
from netsurvey.errors import UsageError
from netsurvey.selection import parse_target as parse_spec
from scanners.quic.cli import TARGETS
from scanners.quic.discover import parse_alt_svc
from scanners.quic.records import RESERVED_VERSION
from scanners.quic.turnover import HostTurnover, _Sample, common_prefix_len, key_changes, key_prefix_len, summarize
from scanners.quic.vn import PROBE_LEN, build_probe, parse_version_negotiation


def parse_target(text: str, port: int):
    """quic's --target spelling through the one target parser, as (hostname, address, port)."""
    t = parse_spec(text, TARGETS, port)
    return t.hostname, t.address, t.port

pytestmark = pytest.mark.unit   # no database, no CLI subprocess, no testbed, no root


def _vn(dcid: bytes, scid: bytes, versions) -> bytes:
    return (bytes([0x80]) + b"\0\0\0\0" + bytes([len(dcid)]) + dcid + bytes([len(scid)]) + scid
            + b"".join(struct.pack("!I", v) for v in versions))


def test_probe_is_a_1200_byte_long_header_initial_with_the_reserved_version():
    d, s = os.urandom(8), os.urandom(8)
    p = build_probe(d, s)
    assert len(p) == PROBE_LEN and p[0] & 0xC0 == 0xC0
    assert struct.unpack_from("!I", p, 1)[0] == RESERVED_VERSION == 0x1A2A3A4A
    assert p[5] == 8 and p[6:14] == d and p[14] == 8 and p[15:23] == s and p[23] == 0  # empty token
    assert (struct.unpack_from("!H", p, 24)[0] & 0x3FFF) == PROBE_LEN - 26


def test_version_negotiation_parser_is_strict():
    d, s = os.urandom(8), os.urandom(8)
    assert parse_version_negotiation(_vn(s, d, [1, 0x6B3343CF]), d, s) == (1, 0x6B3343CF)
    assert parse_version_negotiation(_vn(d, s, [1]), d, s) is None          # CIDs not echoed
    assert parse_version_negotiation(_vn(s, d, []), d, s) is None           # no versions
    assert parse_version_negotiation(_vn(s, d, [1])[:-1], d, s) is None     # partial version
    assert parse_version_negotiation(b"\x80\x00\x00\x00\x01" + bytes(10), d, s) is None  # not version 0
    for junk in (b"", b"\x80", os.urandom(5), b"\x80\0\0\0\0\xff", b"\x80\0\0\0\0\x08" + s):
        assert parse_version_negotiation(junk, d, s) is None


def test_alt_svc_h3_and_max_age():
    assert parse_alt_svc('h3=":443"; ma=86400') == (True, 86400)
    assert parse_alt_svc('h2=":443", h3=":8443"; ma=3600; persist=1') == (True, 3600)
    assert parse_alt_svc('h3=":443"') == (True, 86400)  # RFC 7838 default
    assert parse_alt_svc('h3-29=":443"; ma=10') == (False, None)
    assert parse_alt_svc("clear") == (False, None)
    assert parse_alt_svc(None) == (False, None)


def test_key_prefix_inference_and_periods():
    assert common_prefix_len([b"abcd1", b"abcd2"]) == 4 and common_prefix_len([b"x"]) == 0
    # key id = 4 bytes, rotating every 20 s; two tickets per 1-s round, random tails
    samples = []
    for r in range(60):
        for k in range(2):
            kid = (r // 20).to_bytes(4, "big")
            samples.append(_Sample(r, 1000.0 + r + k * 0.1, kid + bytes([r * 2 + k]) + os.urandom(59)))
    plen = key_prefix_len(samples)
    assert plen == 4
    keys, changes, period = key_changes(samples, plen)
    assert (keys, changes, period) == (3, 2, pytest.approx(20.0))
    assert key_changes(samples, 0) == (1, 0, None)


def test_summary_bounds():
    h = HostTurnover(rounds=10, first_at=0.0, last_at=9.0, connections_ok=20, fresh_retry=[True] * 10)
    h.token_presentations = [(1.0, True), (4.9, True), (6.0, False)]
    h.ticket_presentations = [(1.0, True), (9.0, True)]
    row = summarize(h, 1.0)
    assert row[4] is True                       # retry_on_fresh
    assert row[11:13] == (4.9, 6.0)             # token accepted max / refused min
    assert row[21:23] == (9.0, None)            # ticket never refused
    h.fresh_retry = [False] * 10
    assert summarize(h, 1.0)[11:13] == (None, None)  # unobservable without Retry


def test_cli_parsing():
    assert parse_duration("10m", "--every") == 600 and parse_duration("48h", "--for") == 172800
    assert parse_duration("1.5s", "x") == 1.5 and parse_duration("250ms", "x") == 0.25 and parse_duration("7", "x") == 7
    for bad in ("", "0s", "-1s", "soon", "10 y"):
        with pytest.raises(UsageError):
            parse_duration(bad, "--every")
    assert parse_target("198.18.2.10", 443) == (None, "198.18.2.10", 443)
    assert parse_target("2001:2:0:2::10", 443) == (None, "2001:2:0:2::10", 443)
    assert parse_target("www.example.test@[2001:2:0:2::10]:8443", 443) == ("www.example.test", "2001:2:0:2::10", 8443)
    assert parse_target("x.test@198.18.0.1:4433", 443) == ("x.test", "198.18.0.1", 4433)
    assert parse_target("WWW.Example.test", 443) == ("www.example.test", None, 443)
    for bad in ("x.test@notanip", "198.18.2.10:0", "198.18.2.10:70000", "a b", "x.test:443"):
        with pytest.raises(UsageError):
            parse_target(bad, 443)


def test_stored_ticket_round_trips():
    """quic-turnover stores a planned ticket (quic_turnover_event.state) for --resume: every
    field aioquic needs to offer it (secret, age_add, times, early data, transport parameters)
    comes back as it was."""
    import datetime as dt

    from aioquic.tls import CipherSuite, SessionTicket

    from scanners.quic.schedule import ticket_bytes, ticket_from_bytes

    now = dt.datetime.now(dt.timezone.utc).replace(microsecond=123000)
    t = SessionTicket(age_add=0xDEADBEEF, cipher_suite=CipherSuite.AES_128_GCM_SHA256,
                      not_valid_after=now + dt.timedelta(days=1), not_valid_before=now,
                      resumption_secret=os.urandom(32), server_name="quinn.zooq.test", ticket=os.urandom(32),
                      max_early_data_size=0xFFFFFFFF, other_extensions=[(0x39, os.urandom(40))])
    back = ticket_from_bytes(ticket_bytes(t))
    assert back == t and back.obfuscated_age // 1000 == t.obfuscated_age // 1000


def test_age_search_grid_queue_and_late_outcomes():
    """netsurvey/agesearch.py (tls-lifetime and quic-turnover): a late outcome decides the index
    of the age actually reached; due attempts go before due handshakes; handshakes planned
    for one address are one per-destination interval apart."""
    import time

    from netsurvey.agesearch import DueQueue, decided_index, default_slots, next_points

    assert decided_index(True, 5, 5.4, 1.0, 10) == 5 and decided_index(False, 5, 5.4, 1.0, 10) == 5
    assert decided_index(True, 5, 7.2, 1.0, 10) == 7 and decided_index(False, 5, 7.2, 1.0, 10) == 8
    assert decided_index(True, 9, 30.0, 1.0, 10) == 10 and decided_index(False, 9, 30.0, 1.0, 10) == 11
    assert default_slots(288) == 17 and next_points(0, 289, 17)[-1] == 288 and len(next_points(0, 289, 17)) == 17
    q = DueQueue(per_destination=4)
    now = time.monotonic()
    slots = [q.slot("198.18.0.1") for _ in range(3)]
    assert [round(b - a, 6) for a, b in zip(slots, slots[1:])] == [0.25, 0.25]
    assert q.slot("198.18.0.2") <= now + 0.1       # another address: no wait
    q.push(now - 2, "establish", "e")
    q.push(now - 1, "attempt", "a")
    q.push(now + 60, "attempt", "later")
    assert q.pop_due(now) == ("attempt", "a") and q.pop_due(now) == ("establish", "e") and q.pop_due(now) is None
    assert q.next_due() == now + 60
