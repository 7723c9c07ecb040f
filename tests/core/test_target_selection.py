"""The one target builder (netsurvey.selection): --list/--top and --target specs as one lazy
stream of (rank, name, address or None, port), each measurement's spelling of --target,
and the measurement's choice of addresses when the names are resolved. No database: the
list is a stand-in for targets.stream_targets that counts what was read."""
from __future__ import annotations

import asyncio
import itertools

import pytest

from netsurvey import selection
from netsurvey.errors import UsageError
from netsurvey.resolve import Resolution
from netsurvey.scanning import ResolvingStream, ScanStatus, ScanTarget
from netsurvey.selection import TargetSelection, TargetSpelling, parse_target, resolve_names
from netsurvey.targets import Target

pytestmark = pytest.mark.unit

#: The spellings the measurements declare (tls, quic, handshake-timing, dns, the scaffold).
TLS = TargetSpelling("HOST[=ADDRESS]", pair="=")
QUIC = TargetSpelling("[HOST@]ADDRESS[:PORT] or HOST", pair="@", addresses=True, ports=True)
TIMING = TargetSpelling("ADDRESS or HOST=ADDRESS", pair="=", addresses=True)
DNS = TargetSpelling("HOSTNAME", option="--name")
ADDR_PORT = TargetSpelling("ADDRESS:PORT", names=False, addresses=True, ports=True)


class FakeList:
    """A list of ``n`` names read lazily, counted in "SQL" (len() reads nothing)."""

    def __init__(self, n: int, top: int | None):
        self.n = n if top is None else min(n, top)
        self.read = 0

    def __len__(self) -> int:
        return self.n

    def __iter__(self):
        for i in range(1, self.n + 1):
            self.read += 1
            yield Target(i, f"n{i}.list.test")


@pytest.fixture
def lists(monkeypatch):
    """stream_targets over fake lists: {'top5': 5 names, 'big': 1,000,000}; the calls made."""
    import netsurvey.clictx
    import netsurvey.targets

    sizes = {"top5": 5, "big": 1_000_000}
    made: list[tuple[str, int | None, FakeList]] = []

    def stream_targets(db, name, top=None, *, every_shard=False):   # outside a shard: the same either way
        if name not in sizes:
            raise UsageError(f"no target list named {name!r} (import one with 'netsurvey targets import')")
        s = FakeList(sizes[name], top)
        made.append((name, top, s))
        return s

    monkeypatch.setattr(netsurvey.targets, "stream_targets", stream_targets)
    monkeypatch.setattr(netsurvey.clictx, "list_db", lambda: object())
    return made


def _tuples(items):
    return [(t.rank, t.hostname, t.address, t.port) for t in items]


def test_list_and_top(lists):
    items = TargetSelection("top5", 3, port=8443).items(TLS)
    assert len(items) == 3
    assert _tuples(items) == [(1, "n1.list.test", None, 8443), (2, "n2.list.test", None, 8443),
                              (3, "n3.list.test", None, 8443)]
    assert [(n, top) for n, top, _ in lists] == [("top5", 3)]


def test_target_with_and_without_port():
    assert parse_target("WWW.Example.test", QUIC, 443) == ScanTarget("www.example.test", None, 443)
    assert parse_target("198.18.0.1", QUIC, 443) == ScanTarget(None, "198.18.0.1", 443)
    assert parse_target("198.18.0.1:4433", QUIC, 443) == ScanTarget(None, "198.18.0.1", 4433)
    assert parse_target("x.test@198.18.0.1:4433", QUIC, 443) == ScanTarget("x.test", "198.18.0.1", 4433)
    assert parse_target("x.test@198.18.0.1", QUIC, 443) == ScanTarget("x.test", "198.18.0.1", 443)
    # tls: HOST or HOST=ADDRESS; an address written alone is a name that resolves to itself
    assert parse_target("A.Test.", TLS, 443) == ScanTarget("a.test", None, 443)
    assert parse_target("a.test=198.18.0.1", TLS, 443) == ScanTarget("a.test", "198.18.0.1", 443)
    assert parse_target("198.18.0.1", TLS, 443) == ScanTarget("198.18.0.1", None, 443)
    assert parse_target("bücher.test", DNS, 53) == ScanTarget("xn--bcher-kva.test", None, 53)
    # handshake-timing: a bare address is a target without a name
    assert parse_target("198.18.0.1", TIMING, 443) == ScanTarget(None, "198.18.0.1", 443)
    assert parse_target("h.test=[2001:db8::1]", TIMING, 443) == ScanTarget("h.test", "2001:db8::1", 443)


def test_ipv6_literal_with_port():
    assert parse_target("[2001:DB8::1]:8443", QUIC, 443) == ScanTarget(None, "2001:db8::1", 8443)
    assert parse_target("[2001:db8::1]", QUIC, 443) == ScanTarget(None, "2001:db8::1", 443)
    assert parse_target("2001:db8::1", QUIC, 443) == ScanTarget(None, "2001:db8::1", 443)
    assert parse_target("h.test@[2001:db8::1]:8443", QUIC, 443) == ScanTarget("h.test", "2001:db8::1", 8443)
    assert parse_target("[2001:db8::1]:8443", ADDR_PORT, None) == ScanTarget(None, "2001:db8::1", 8443)
    # tls: [v6] is the name that resolves to itself (no brackets in SNI)
    assert parse_target("[2001:db8::2]", TLS, 443) == ScanTarget("2001:db8::2", None, 443)


@pytest.mark.parametrize("spec, spelling, port, message", [
    ("x.test@notanip", QUIC, 443, "--target 'x.test@notanip': 'notanip' is not an IP address"),
    ("198.18.2.10:0", QUIC, 443, "--target '198.18.2.10:0': bad port '0'"),
    ("[::1]:70000", QUIC, 443, "bad port '70000'"),
    ("a b", QUIC, 443, "hostname contains whitespace"),
    ("x.test:443", QUIC, 443, "invalid label"),   # a port only after an address
    ("=198.18.0.1", TLS, 443, "empty hostname"),
    ("a.test=", TLS, 443, "'' is not an IP address"),
    ("198.18.0.1", ADDR_PORT, None, "--target '198.18.0.1': expected ADDRESS:PORT"),
    ("a.test:80", ADDR_PORT, None, "expected ADDRESS:PORT"),
    ("-bad-.test", DNS, 53, "--name '-bad-.test': invalid label"),
    ("2001:2::1]", QUIC, 443, "invalid label"),     # a lone bracket is no address
    ("[2001:2::1", QUIC, 443, "invalid label"),
    ("x.test@[2001:2::1", QUIC, 443, "is not an IP address"),
])
def test_bad_specs_name_the_value_and_the_reason(spec, spelling, port, message):
    with pytest.raises(UsageError, match=message.replace("[", r"\[").replace("(", r"\(")):
        parse_target(spec, spelling, port)


def test_mixing_list_and_targets(lists):
    sel = TargetSelection("top5", 2, ("b.test", "a.test=198.18.0.9"), 443)
    after = sel.items(TLS)
    assert len(after) == 4
    assert _tuples(after) == [(1, "n1.list.test", None, 443), (2, "n2.list.test", None, 443),
                              (None, "b.test", None, 443), (None, "a.test", "198.18.0.9", 443)]
    before = sel.items(TLS, targets_first=True)
    assert _tuples(before) == _tuples(after)[2:] + _tuples(after)[:2]
    assert [t.hostname for t in before.addressed()] == ["a.test"]   # what the plan judges unresolved
    assert _tuples(TargetSelection(None, None, ("b.test",), 443).items(TLS)) == [(None, "b.test", None, 443)]


def test_shared_rules_and_messages(lists):
    with pytest.raises(UsageError, match="--top needs --list"):
        TargetSelection(None, 5, ("a.test",)).items(TLS)
    with pytest.raises(UsageError, match=r"give --list NAME or at least one --target \[HOST@\]ADDRESS\[:PORT\] or HOST"):
        TargetSelection().items(QUIC)
    with pytest.raises(UsageError, match="give --list NAME or at least one --name HOSTNAME"):
        TargetSelection(port=53).items(DNS)
    with pytest.raises(UsageError, match="no target list named 'nope'"):
        TargetSelection("nope").items(TLS)
    assert len(TargetSelection().items(None, required=False)) == 0


def test_lazy_streaming_of_a_million_names(lists):
    items = TargetSelection("big", targets=("z.test",)).items(TLS)
    assert len(items) == 1_000_001
    listed = lists[-1][2]
    assert listed.read == 0                       # len() is counted, nothing read
    first = list(itertools.islice(items, 3))
    assert [t.rank for t in first] == [1, 2, 3]
    assert listed.read == 3                       # only what was taken


def _fake_resolve_many(answers: dict[str, Resolution], asked: list):
    async def resolve_many(names, *, ipv6=True, nameservers=None, **kw):
        names = list(names)
        asked.append((names, ipv6, nameservers))
        return {h: answers.get(h) or Resolution(h, error="nxdomain") for h in names}
    return resolve_many


def test_resolution_choices(monkeypatch):
    import netsurvey.resolve

    answers = {"two.test": Resolution("two.test", ("198.18.0.1", "198.18.0.2"), ("2001:2::1",)),
               "six.test": Resolution("six.test", (), ("2001:2::6",))}
    asked: list = []
    monkeypatch.setattr(netsurvey.resolve, "resolve_many", _fake_resolve_many(answers, asked))
    names = [ScanTarget("two.test", None, 443, 1), ScanTarget("fixed.test", "198.18.0.9", 443),
             ScanTarget("six.test", None, 8443, 2), ScanTarget("nx.test", None, 443, 3)]

    out, failed = asyncio.run(resolve_names(names, ipv6=True))            # quic, tls: every address
    assert [(t.hostname, t.address, t.port, t.rank) for t in out] == [
        ("two.test", "198.18.0.1", 443, 1), ("two.test", "198.18.0.2", 443, 1), ("two.test", "2001:2::1", 443, 1),
        ("fixed.test", "198.18.0.9", 443, None), ("six.test", "2001:2::6", 8443, 2)]
    assert [(o.target, o.status, o.error) for o in failed] == [(names[3], ScanStatus.RESOLUTION_FAILED, "nxdomain")]
    assert asked[-1] == (["two.test", "six.test", "nx.test"], True, None)   # a fixed address is not asked

    out, failed = asyncio.run(resolve_names(names, ipv6=False, first=True, nameservers=["198.18.0.53"]))  # tfo
    assert [(t.hostname, t.address) for t in out] == [("two.test", "198.18.0.1"), ("fixed.test", "198.18.0.9")]
    assert [o.target.hostname for o in failed] == ["six.test", "nx.test"]
    assert failed[0].error == "no-address" and asked[-1][1:] == (False, ["198.18.0.53"])

    out, _ = asyncio.run(resolve_names(names, ipv6=True, first=True))       # handshake-timing: first of A, AAAA
    assert [t.address for t in out] == ["198.18.0.1", "198.18.0.9", "2001:2::6"]


def test_resolving_stream_reads_batches_and_reports_failures(lists, monkeypatch):
    import netsurvey.resolve

    monkeypatch.setattr(netsurvey.resolve, "system_resolver", lambda nameservers=None, option="--nameserver": None)
    answers = {f"n{i}.list.test": Resolution(f"n{i}.list.test", (f"198.18.1.{i}",)) for i in range(1, 5)}
    asked: list = []
    monkeypatch.setattr(netsurvey.resolve, "resolve_many", _fake_resolve_many(answers, asked))
    stream = TargetSelection("top5", None, ("198.18.0.7", "gone.test"), 4433).resolving(QUIC)
    assert isinstance(stream, ResolvingStream) and len(stream) == 7
    failed: list = []
    stream.on_failed = failed.append
    got = [(t.hostname, t.address, t.port, t.rank) for t in stream]
    assert got == [(None, "198.18.0.7", 4433, None)] + [(f"n{i}.list.test", f"198.18.1.{i}", 4433, i) for i in range(1, 5)]
    assert sorted(o.target.hostname for o in failed) == ["gone.test", "n5.list.test"]
    assert selection.resolved_list(TargetSelection(None, None, ("gone.test", "198.18.0.7"), 443).resolving(QUIC)) == [
        ScanTarget("gone.test", None, 443), ScanTarget(None, "198.18.0.7", 443)]
