"""TFO packet building/parsing and option handling (no network)."""
from __future__ import annotations

import functools
import ipaddress
import struct

import pytest

from netsurvey.durations import duration_option_s
from netsurvey.errors import UsageError
from scanners.tfo.engine import PORT_BASE, PORT_RANGE, AddressRange, keyed_hash, probe_fields
from scanners.tfo.packets import SynTemplate, _sum16, fold, parse_options, syn_options, tfo_option

#: tfo-lb's --interval: the one duration parser, zero allowed (rounds back to back)
parse_duration = functools.partial(duration_option_s, option="--interval", allow_zero=True)

pytestmark = pytest.mark.unit   # no database, no CLI subprocess, no testbed, no root


@pytest.mark.parametrize("n", [4, 6, 8, 10, 12, 14, 16, 0])
def test_rfc_cookie_any_length(n):
    cookie = bytes(range(1, n + 1))
    p = parse_options(bytes([2, 4, 5, 180, 1]) + tfo_option(cookie) + bytes([4, 2]))
    assert p.tfo_kind == "rfc7413" and p.cookie == cookie and p.others == ("mss=1460", "sackok")


def test_experimental_option_254_magic():
    p = parse_options(bytes([1, 1]) + tfo_option(b"\xaa" * 8, experimental=True))
    assert p.tfo_kind == "experimental" and p.cookie == b"\xaa" * 8
    # option 254 with another ExID is not TFO
    other = parse_options(bytes([254, 6, 0x12, 0x34, 0, 0]))
    assert other.tfo_kind is None and other.others == ("opt254:6",)


def test_malformed_options_flagged():
    assert parse_options(bytes([34, 10, 1, 2])).malformed
    assert parse_options(bytes([2, 1])).malformed


def test_template_checksum_matches_full_computation():
    opts = syn_options()
    tpl = SynTemplate.ipv4("198.18.0.1", 443, opts)
    buf = bytearray(len(tpl.packet))
    dst = int(ipaddress.ip_address("198.19.3.7"))
    tpl.fill(buf, 0, dst, 61234, 0xDEADBEEF)
    tcp = bytes(buf[20:])
    pseudo = ipaddress.ip_address("198.18.0.1").packed + dst.to_bytes(4, "big") + struct.pack("!BBH", 0, 6, len(tcp))
    assert fold(_sum16(pseudo + tcp)) == 0          # a correct checksum sums to 0xffff
    assert struct.unpack("!HHI", tcp[:8]) == (61234, 443, 0xDEADBEEF)
    assert buf[16:20] == dst.to_bytes(4, "big")


def test_probe_fields_keyed_and_in_range():
    s1 = probe_fields(1, 5, "198.18.10.1", 443)
    assert s1 == probe_fields(1, 5, "198.18.10.1", 443)
    assert s1 != probe_fields(2, 5, "198.18.10.1", 443)
    assert PORT_BASE <= s1[0] < PORT_BASE + PORT_RANGE
    assert keyed_hash(7, 1, 2) != keyed_hash(7, 1, 3)


def test_address_range_is_lazy():
    r = AddressRange("198.19.0.0/16", 443, repeat=16)
    assert len(r) == 1 << 20
    assert r[65537].address == "198.19.0.1" and r[3].port == 443


@pytest.mark.parametrize("text,secs", [("45m", 2700), ("30s", 30), ("10", 10), ("1.5h", 5400), ("500ms", 0.5)])
def test_parse_duration(text, secs):
    assert parse_duration(text) == secs


def test_parse_duration_rejects():
    with pytest.raises(UsageError):
        parse_duration("soon")


def test_batched_probes_match_per_probe_fields_and_checksum():
    import socket

    import numpy as np

    from scanners.tfo.engine import SLOT, _V4Ring, keyed_hash_np
    seed, dsts, port = 0x1234_5678_9ABC_DEF0, ["198.19.0.1", "198.19.255.254", "198.18.10.3"], 443
    d = np.array([int(ipaddress.ip_address(a)) for a in dsts], np.uint64)
    assert keyed_hash_np(seed, d, np.full(3, port, np.uint64)).tolist() == [keyed_hash(seed, int(a), port) for a in d]
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        ring = _V4Ring(s, SynTemplate.ipv4("198.18.0.1", 0, syn_options()), 4)
        idx = np.array([7, 70000, 3], np.uint64)
        ring.fill(seed, idx, d, np.full(3, port, np.uint64))
        pkts = bytes(ring.pkts)
    n = len(SynTemplate.ipv4("198.18.0.1", 0, syn_options()).packet)
    for k, (i, a) in enumerate(zip(idx.tolist(), dsts)):
        pkt = pkts[k * SLOT:k * SLOT + n]
        sport, seq = probe_fields(seed, i, a, port)
        assert struct.unpack("!HHI", pkt[20:28]) == (sport, port, seq) and pkt[16:20] == ipaddress.ip_address(a).packed
        pseudo = pkt[12:20] + struct.pack("!BBH", 0, 6, n - 20)
        assert fold(_sum16(pseudo + pkt[20:])) == 0


def test_reply_matching_and_policy_in_bulk():
    import numpy as np

    from netsurvey.etiquette import TargetPolicy
    from scanners.tfo.engine import SLOT, _match_v4, _V4Policy
    seed, n = 99, 1000
    opts = bytes([2, 4, 5, 180, 34, 10]) + bytes(range(8)) + bytes([1, 1])
    pkts = np.zeros((3, SLOT), np.uint8)
    for row, (i, a, dl) in enumerate([(5, "198.19.0.9", 0), (5, "198.19.0.9", 0), (600, "198.19.1.1", 0)]):
        sport, seq = probe_fields(seed, i, a, 443)
        ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 40 + len(opts), 0, 0, 64, 6, 0, ipaddress.ip_address(a).packed,
                         ipaddress.ip_address("198.18.0.1").packed)
        tcp = struct.pack("!HHIIBBHHH", 443, sport, 1, (seq + 1 + dl) & 0xFFFFFFFF, (20 + len(opts)) // 4 << 4,
                          0x12, 29200, 0, 0)
        pkt = ip + tcp + opts
        pkts[row, :len(pkt)] = np.frombuffer(pkt, np.uint8)
    pkts[2, 12:16] = [198, 19, 1, 2]            # reply from another address: hash does not match
    seen = np.zeros(n, np.uint8)
    rec = _match_v4(pkts, np.full(3, 40 + len(opts)), seed, n, (0,), seen)
    assert rec["idx"].tolist() == [5] and rec["win"].tolist() == [29200]         # duplicate dropped
    assert rec["opts"][0, :rec["optlen"][0]].tobytes() == opts and seen[5] == 1
    pol = _V4Policy(TargetPolicy((ipaddress.ip_network("198.18.0.0/15"),), (ipaddress.ip_network("198.19.7.0/24"),)))
    d = np.array([int(ipaddress.ip_address(a)) for a in ("198.19.7.1", "198.19.8.1", "10.0.0.1")], np.uint64)
    assert pol.allowed(d).tolist() == [False, True, False]
