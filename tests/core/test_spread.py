"""Probe order spread over addresses (netsurvey/spread.py, issue 26)."""
import pytest

from netsurvey.spread import interleave_by_address

pytestmark = pytest.mark.unit   # no database, no CLI subprocess, no testbed, no root


def test_round_robin_over_addresses_keeps_list_order_within_one():
    items = [(i, f"a{i // 4}") for i in range(10)]          # a0 x4, a1 x4, a2 x2
    out = interleave_by_address(items, lambda t: t[1])
    assert sorted(out) == items
    assert [t[0] for t in out] == [0, 4, 8, 1, 5, 9, 2, 6, 3, 7]
    # two targets of one address are as far apart as the remaining addresses allow
    pos = {t: i for i, t in enumerate(out)}
    assert pos[(1, "a0")] - pos[(0, "a0")] == 3


def test_none_keys_and_spread_lists_unchanged():
    items = [(0, None), (1, "x"), (2, None), (3, "y")]
    assert interleave_by_address(items, lambda t: t[1]) == items
    assert interleave_by_address([], lambda t: t) == []


def test_windows_interleave_a_stream_in_bounded_memory():
    """Issue 26: a stream is interleaved window by window; a sequence within one window
    comes out exactly as interleave_by_address orders it."""
    from netsurvey.spread import interleave_windows

    items = [(i, f"a{i // 4}") for i in range(10)]
    assert list(interleave_windows(iter(items), lambda t: t[1], 100)) == interleave_by_address(items, lambda t: t[1])
    pulled = []

    def stream():
        for i in range(1000):
            pulled.append(i)
            yield (i, f"a{i // 16}")

    out = interleave_windows(stream(), lambda t: t[1], 64)
    first = [next(out) for _ in range(4)]
    assert len(pulled) == 64          # only one window read so far
    assert [t[1] for t in first] == ["a0", "a1", "a2", "a3"]
    rest = list(out)
    assert sorted(first + rest) == [(i, f"a{i // 16}") for i in range(1000)]
