"""TFO packet building/parsing and option handling (no network)."""
from __future__ import annotations

import ipaddress
import struct

import pytest

from scanners.tfo.cli import parse_duration
from scanners.tfo.engine import PORT_BASE, PORT_RANGE, AddressRange, keyed_hash, probe_fields
from scanners.tfo.packets import SynTemplate, _sum16, fold, parse_options, syn_options, tfo_option
from netsurvey.errors import UsageError


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
