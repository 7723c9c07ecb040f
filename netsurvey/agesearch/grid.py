"""The grid of ages and the due queue of the age search (see the package docstring).

:func:`next_points` gives the ages of the next round of a k-ary search, which brackets a
monotone lifetime to one step with at most ``slots`` states held per search;
:func:`default_slots` makes two rounds enough. :class:`DueQueue` holds the future work:
attempts (presentations, whose age is the measurement) go before initial handshakes (which
only delay their own search), and initial handshakes to one address are spaced by the
per-destination interval (:meth:`DueQueue.slot`), so the attempts, each due at its state's
age, inherit the spacing.
"""
from __future__ import annotations

import heapq
import itertools
import math
import time
from typing import Any, Optional


def default_slots(n: int) -> int:
    """States per search so that two rounds bracket any lifetime on a grid of n ages."""
    return max(1, math.isqrt(max(n, 1) - 1) + 1)


def next_points(lo: int, hi: int, slots: int) -> list[int]:
    """Grid indices to try in the next round of a bracket (lo, hi): all open indices if at
    most ``slots``, else ``slots`` indices spread over them, the largest being hi - 1."""
    c = hi - lo - 1
    if c <= 0:
        return []
    if c <= slots:
        return list(range(lo + 1, hi))
    return sorted({lo + -(-c * j // slots) for j in range(1, slots + 1)})


def exhaustive_points(decided: set[int], n: int, slots: int) -> list[int]:
    """Every age tried (no monotonicity assumed): the ``slots`` largest indices not yet decided."""
    out = []
    for k in range(n, 0, -1):
        if k not in decided:
            out.append(k)
            if len(out) == slots:
                break
    return sorted(out)


def decided_index(accepted: bool, k: int, real_age_s: float, step_s: float, n: int) -> int:
    """The grid index an outcome decides: ``k``, unless the attempt came more than half a step
    late (the limiter or the loop held it), then the index of the age actually reached: floor
    for an acceptance (the lifetime exceeds that age), ceil for a refusal."""
    if real_age_s - step_s * k <= step_s / 2:
        return k
    if accepted:
        return min(n, int(real_age_s / step_s + 1e-9))
    return min(n + 1, math.ceil(real_age_s / step_s - 1e-9))


class DueQueue:
    """Two heaps of (due monotonic s, item): ``attempt`` items before ``establish`` items when
    both are due; per-address spacing of planned initial handshakes.

    :param per_destination: connections per second allowed to one address (None: no spacing).
    """

    def __init__(self, per_destination: Optional[float] = None, window: int = 1000):
        self.attempts: list = []
        self.establish: list = []
        self._seq = itertools.count()
        self.spacing = 1.0 / per_destination if per_destination else 0.0
        self._next_slot: dict[str, float] = {}
        self._window = window

    def push(self, due: float, kind: str, item: Any) -> None:
        heapq.heappush(self.attempts if kind == "attempt" else self.establish, (due, next(self._seq), kind, item))

    def __bool__(self) -> bool:
        return bool(self.attempts or self.establish)

    def prune(self, dead) -> None:
        """Drop attempts at the head of the queue for which ``dead(item)`` is true."""
        while self.attempts and dead(self.attempts[0][3]):
            heapq.heappop(self.attempts)

    def pop_due(self, now: float) -> Optional[tuple[str, Any]]:
        """The next due item, attempts first; None when nothing is due."""
        for h in (self.attempts, self.establish):
            if h and h[0][0] <= now:
                _, _, kind, item = heapq.heappop(h)
                return kind, item
        return None

    def next_due(self) -> Optional[float]:
        dues = [h[0][0] for h in (self.attempts, self.establish) if h]
        return min(dues) if dues else None

    def slot(self, address: str, earliest: Optional[float] = None) -> float:
        """When the next initial handshake planned for ``address`` may go: at least one
        per-destination interval after the previous one planned."""
        now = time.monotonic()
        due = max(now if earliest is None else earliest, self._next_slot.get(address, 0.0))
        self._next_slot[address] = due + self.spacing
        if len(self._next_slot) > 4 * self._window + 1000:
            self._next_slot = {a: t for a, t in self._next_slot.items() if t > now}
        return due
