"""Probe order spread over addresses (netsurvey/spread.py, issue 26)."""
from netsurvey.spread import interleave_by_address


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
