"""Probe order that keeps the per-destination limit from stalling a scan (issue 26).

A top list puts names of one CDN address next to each other (ranks n..n+15 on one address
in bench/scale.py's testbed Internet, as on the real one). ``scan_many``'s workers take
targets in list order and wait for the address's per-destination slot
(etiquette.per_destination_pps) before probing, so with the list order all workers end up
queued behind a few addresses and the scan runs at (addresses in the window) x pdp
targets per second instead of its global rate. Interleaving the targets by address
(round-robin over the addresses, each address's targets in list order) puts the largest
possible number of other targets between two targets of one address. Memory: one list of
indices per address, freed when the order is built (the targets are already a list).
"""
from __future__ import annotations

from typing import Callable, Optional, Sequence, TypeVar

T = TypeVar("T")


def interleave_by_address(items: Sequence[T], key: Callable[[T], Optional[str]]) -> list[T]:
    """``items`` reordered round-robin over ``key(item)`` (first-seen order of the keys, list
    order within a key). Items whose key is None keep their own slot each. Already spread
    lists (every key once) come back unchanged, as a new list."""
    groups: dict[object, list[int]] = {}
    for i, it in enumerate(items):
        k = key(it)
        groups.setdefault(i if k is None else k, []).append(i)
    if len(groups) == len(items):
        return list(items)
    out: list[T] = []
    lists = list(groups.values())
    del groups
    depth = 0
    while lists:
        keep = []
        for g in lists:
            out.append(items[g[depth]])
            if len(g) > depth + 1:
                keep.append(g)
        lists = keep
        depth += 1
    return out
