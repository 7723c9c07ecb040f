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

A streamed target list (a 1M-name list is read from the database, never held: issue 26)
is interleaved window by window (:func:`interleave_windows`): memory is one window, and
names of one address that fall into one window - a CDN's names sit next to each other in
a top list - are spread over the window. With W targets per window and k names per
address, the window holds W/k addresses: at a per-destination limit p the scan can go at
up to p x W/k targets per second (k = 16, p = 2/s, W = 10,000: 1,250/s before the
global rate; the default window is ``WINDOW``, the run path's 4 x STREAM_BATCH).
"""
from __future__ import annotations

from typing import Callable, Iterable, Iterator, Optional, Sequence, TypeVar

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


#: Targets per window of :func:`interleave_windows`.
WINDOW = 40_000


def interleave_windows(items: Iterable[T], key: Callable[[T], Optional[str]], window: int = WINDOW) -> Iterator[T]:
    """:func:`interleave_by_address` over consecutive windows of ``window`` items of a
    stream (bounded memory: one window). Items without a key pass at once (they keep their
    own slot in any order); one with ``ends_window`` (a stream about to wait for its next
    resolved batch) ends the window first, so probing overlaps resolution. A sequence of
    keyed items no longer than a window comes out exactly as :func:`interleave_by_address`
    orders it."""
    buf: list[T] = []
    for it in items:
        if key(it) is None:   # no address yet (a name resolved while probing): nothing to spread
            if buf and getattr(it, "ends_window", False):
                # the stream waits for its next batch (scanning.Resolving): the window ends
                # here, its targets are probed meanwhile instead of waiting for a full window
                yield from interleave_by_address(buf, key)
                buf = []
            yield it
            continue
        buf.append(it)
        if len(buf) >= window:
            yield from interleave_by_address(buf, key)
            buf = []
    if buf:
        yield from interleave_by_address(buf, key)
