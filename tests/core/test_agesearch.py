"""The age search engine (netsurvey/agesearch) driven by an in-memory probe whose lifetime
is known: it brackets the lifetime to one step within two rounds holding at most ``slots``
states per chain, drops the states an outcome decided, tries every age in exhaustive mode,
goes on from an interrupted run's brackets and stored states, gives up on a chain whose
states cannot be established, and keeps the window of hosts and the per-destination spacing."""
from __future__ import annotations

import asyncio
import time
from collections import Counter

import pytest

from netsurvey.agesearch import AgeSearch, Held, Host, Missing, Outcome, PriorChain, default_slots

pytestmark = pytest.mark.unit

STEP = 0.002      # s: a grid of 60 ages lasts 0.12 s


class FakeProbe:
    """States that are accepted at grid index k iff ``accepts(host, k)``; every state is
    checked to be presented once, at its own age, and not before it is due."""

    def __init__(self, accepts, missing=None, step=STEP):
        self.step = step
        self.accepts = accepts
        self.missing = missing            # (chain, k) -> Missing or None
        self.established: list = []       # (host key, name, round, k, monotonic s)
        self.presented: set = set()
        self.counted: list = []           # outcomes the engine used (Outcome.then)
        self.thawed: list = []

    async def establish(self, c, k):
        self.established.append((c.host.key, c.name, c.round, k, time.monotonic()))
        await asyncio.sleep(0)
        if self.missing is not None:
            m = self.missing(c, k)
            if m is not None:
                return m
        return Held((c.host.key, c.name, c.round, k), time.monotonic(), time.time())

    async def present(self, c, k, held):
        assert held.state[-1] == k, "a state presented at another age than it was planned for"
        assert held.state not in self.presented, "a state presented twice"
        assert time.monotonic() >= held.born_m + k * self.step - 1e-6, "presented before its age"
        self.presented.add(held.state)
        await asyncio.sleep(0)
        return Outcome(self.accepts(c.host.key, k), k * self.step, then=lambda: self.counted.append(held.state))

    def thaw(self, c, stored):
        self.thawed.append(stored)
        return stored


class Log:
    def __init__(self):
        self.rows: list = []

    def __call__(self, c, k, event, due_w, detail, held):
        assert (held is not None) == (event == "planned")
        self.rows.append((c.host.key, c.name, c.round, k, event, detail))

    def of(self, host, name="x") -> list:
        return [r[2:] for r in self.rows if r[0] == host and r[1] == name]

    def finished(self, host, name="x") -> list:
        return [d for rnd, k, ev, d in self.of(host, name) if ev == "finished"]


def _run(probe, targets, *, n, slots, names=("x",), prior=None, restored=None, step=STEP,
         **kw) -> tuple[AgeSearch, Log]:
    log = Log()
    s = AgeSearch(probe, n=n, step=step, slots=slots, hosts_in_flight=kw.pop("hosts_in_flight", 100), log=log, **kw)

    def admit(t):
        s.open(Host(t, f"192.0.2.{hash(t) % 250}", t), names, (prior or {}).get(t), (restored or {}).get(t, ()))
    asyncio.run(asyncio.wait_for(s.run(targets, admit), 30))
    return s, log


def _bracket(log: Log, host, n: int, name="x") -> tuple[int, int]:
    """(lo, hi) from the outcomes logged: the largest index decided accepted, the smallest refused."""
    def decided(k, d):
        return int(d.split(":")[1]) if d and d.startswith("decided-as:") else k
    acc = [decided(k, d) for _, k, ev, d in log.of(host, name) if ev == "accepted"]
    ref = [decided(k, d) for _, k, ev, d in log.of(host, name) if ev == "refused"]
    return max(acc, default=0), min(ref, default=n + 1)


def _check_held(log: Log, slots: int) -> None:
    """From the log alone: at most ``slots`` states of one chain held at once; every
    planned state ended exactly once (outcome or drop); every chain finished once."""
    held, peak, ends = Counter(), Counter(), Counter()
    for host, name, rnd, k, ev, _ in log.rows:
        if ev == "planned":
            held[(host, name)] += 1
            ends[(host, name, rnd, k)] += 0
        elif ev in ("accepted", "refused", "failed", "dropped"):
            held[(host, name)] -= 1
            ends[(host, name, rnd, k)] += 1
        peak[(host, name)] = max(peak[(host, name)], held[(host, name)])
    assert set(ends.values()) <= {1}, ends
    assert all(v == 0 for v in held.values()), held
    assert max(peak.values(), default=0) <= slots, peak
    fin = Counter((h, nm) for h, nm, _, _, ev, _ in log.rows if ev == "finished")
    assert set(fin.values()) <= {1}, fin


@pytest.mark.parametrize("n", [1, 2, 7, 16, 40])
def test_brackets_every_lifetime_to_one_step_in_two_rounds(n):
    slots = default_slots(n)
    lifetimes = list(range(0, n + 1))
    probe = FakeProbe(lambda host, k: k <= host)      # host = its lifetime in steps
    s, log = _run(probe, lifetimes, n=n, slots=slots)
    for life in lifetimes:
        assert _bracket(log, life, n) == (life, life + 1), (n, life, log.of(life))
        why = "accepted-at-max-age" if life == n else "refused-at-first-step" if life == 0 else "bracketed"
        assert log.finished(life) == [why], (n, life, log.of(life))
        assert max(rnd for rnd, _, _, _ in log.of(life)) <= 2
        assert sum(1 for h, *_ in probe.established if h == life) <= 2 * slots
    assert s.rounds_max <= 2
    assert s.peak_held_target <= slots and s.held == 0
    assert len(probe.counted) == sum(1 for r in log.rows if r[4] in ("accepted", "refused"))
    _check_held(log, slots)
    assert not s.open_hosts and not s.tasks


def test_fewer_slots_more_rounds_the_same_answer():
    n, slots = 40, 2
    probe = FakeProbe(lambda host, k: k <= host)
    s, log = _run(probe, [0, 13, 39, 40], n=n, slots=slots)
    for life in (0, 13, 39, 40):
        assert _bracket(log, life, n) == (life, life + 1)
    assert s.rounds_max > 2 and s.peak_held_target <= slots
    _check_held(log, slots)


def test_a_refusal_drops_the_larger_ages_an_acceptance_the_smaller():
    n, slots, life = 20, 20, 6          # one round plans every age: outcomes come in age order
    probe = FakeProbe(lambda host, k: k <= life, step=0.02)
    s, log = _run(probe, ["h"], n=n, slots=slots, step=0.02)
    rows = log.of("h")
    outcomes = {k: ev for _, k, ev, _ in rows if ev in ("accepted", "refused")}
    dropped = sorted(k for _, k, ev, _ in rows if ev == "dropped")
    assert outcomes == {**{k: "accepted" for k in range(1, life + 1)}, life + 1: "refused"}, outcomes
    assert dropped == list(range(life + 2, n + 1))     # never presented
    assert len(probe.presented) == life + 1
    assert log.finished("h") == ["bracketed"] and s.rounds_max == 1
    _check_held(log, slots)

    # a refusal that leaves the bracket open drops the larger ages held (round 1: 4 8 12 16 20)
    probe = FakeProbe(lambda host, k: k <= life, step=0.02)
    s, log = _run(probe, ["h"], n=n, slots=5, step=0.02)
    rows = log.of("h")
    assert sorted((ev != "dropped", k, ev) for rnd, k, ev, _ in rows if rnd == 1 and ev != "planned") == [
        (False, 12, "dropped"), (False, 16, "dropped"), (False, 20, "dropped"), (True, 4, "accepted"),
        (True, 8, "refused")]
    assert _bracket(log, "h", n) == (life, life + 1) and log.finished("h") == ["bracketed"]
    _check_held(log, 5)

    # a late acceptance (at index 2, age 5 steps) decides index 5 and drops 3 .. 5 unpresented
    class Late(FakeProbe):
        async def present(self, c, k, held):
            out = await super().present(c, k, held)
            return Outcome(out.accepted, (k + 3) * self.step if k == 2 else out.age_s)
    probe = Late(lambda host, k: k <= 5, step=0.02)
    s, log = _run(probe, ["h"], n=8, slots=8, step=0.02)
    rows = log.of("h")
    assert [(ev, d) for _, k, ev, d in rows if k == 2 and ev != "planned"] == [("accepted", "decided-as:5")]
    assert sorted(k for _, k, ev, _ in rows if ev == "dropped") == [3, 4, 5, 7, 8]
    assert _bracket(log, "h", 8) == (5, 6) and log.finished("h") == ["bracketed"]
    _check_held(log, 8)


def test_exhaustive_mode_tries_every_age_once_without_monotonicity():
    n, slots = 13, 4
    probe = FakeProbe(lambda host, k: k % 3 != 0)       # refused at 3, 6, 9, 12 only
    s, log = _run(probe, ["h"], n=n, slots=slots, exhaustive=True, ages_once=True)
    rows = log.of("h")
    outcomes = {k: ev for _, k, ev, _ in rows if ev in ("accepted", "refused")}
    assert outcomes == {k: ("refused" if k % 3 == 0 else "accepted") for k in range(1, n + 1)}
    assert not [r for r in rows if r[2] == "dropped"]
    assert log.finished("h") == ["all-ages-tried"]
    assert s.rounds_max == -(-n // slots)              # the slots largest undecided ages a round
    assert Counter(k for *_, k, _ in probe.established) == Counter(range(1, n + 1))
    _check_held(log, slots)
    # the search assumes monotonicity: round 1 (4, 7, 10, 13) sees no refusal of this server
    s, log = _run(FakeProbe(lambda host, k: k % 3 != 0), ["h"], n=n, slots=slots)
    assert _bracket(log, "h", n) == (13, 14) and log.finished("h") == ["accepted-at-max-age"]


def test_resume_goes_on_from_the_brackets_and_stored_states():
    n, slots, life = 30, 3, 17
    now = time.time()
    prior = {"h": {"x": PriorChain(lo=10, hi=25, round=1, finished=False),
                   "y": PriorChain(lo=4, hi=5, round=2, finished=True)},
             "done": {"x": PriorChain(lo=3, hi=4, round=2, finished=True),
                      "y": PriorChain(lo=30, hi=0, round=1, finished=True)}}
    # round 1's state for index 20 is still due: presented at its age, no fresh one established
    restored = {"h": [("x", rnd, k, now + k * STEP, ("h", "x", rnd, k))
                      for rnd, k in ((1, 20), (1, 12), (1, 26), (0, 15))]}
    probe = FakeProbe(lambda host, k: k <= life)
    s, log = _run(probe, ["done", "h"], n=n, slots=slots, names=("x", "y"), prior=prior, restored=restored)
    assert not [r for r in log.rows if r[0] == "done"]   # nothing left to do: closed at once
    # the stored states of the interrupted round inside the bracket (not 26, not round 0's)
    assert sorted(probe.thawed) == [("h", "x", 1, 12), ("h", "x", 1, 20)]
    assert probe.presented >= {("h", "x", 1, 12), ("h", "x", 1, 20)}
    assert not log.of("h", "y")                          # finished before: not opened again
    rows = log.of("h", "x")
    assert [(rnd, k, ev) for rnd, k, ev, _ in rows[:2]] == [(1, 12, "accepted"), (1, 20, "refused")]
    assert not any(rnd == 1 and ev == "planned" for rnd, _, ev, _ in rows)
    assert all(10 < k < 25 for _, k, ev, _ in rows if ev == "planned")
    assert _bracket(log, "h", n, "x") == (life, life + 1)
    assert log.finished("h", "x") == ["bracketed"] and min(rnd for rnd, *_ in rows[2:]) == 2


def test_a_chain_without_state_ends_not_offered_or_without_progress():
    called = []
    probe = FakeProbe(lambda host, k: True,
                      missing=lambda c, k: Missing("not-offered", then=lambda: called.append(c.host.key)))
    s, log = _run(probe, ["a", "b"], n=9, slots=3)
    for h in ("a", "b"):
        assert log.finished(h) == ["not-offered"]          # after round 1's last establish, not before
        assert sum(1 for e in probe.established if e[0] == h) == 3
    assert sorted(called) == ["a", "b"]
    # a failure that decides nothing: two rounds without progress end the chain
    probe = FakeProbe(lambda host, k: True, missing=lambda c, k: Missing())
    s, log = _run(probe, ["a"], n=9, slots=3)
    assert log.finished("a") == ["no-progress"] and s.rounds_max == 2
    # decisive only in round 1, unless any_round: after a round of failed connections
    probe = FakeProbe(lambda host, k: True, missing=lambda c, k: Missing() if c.round == 1 else Missing("not-offered"))
    s, log = _run(probe, ["a"], n=9, slots=3)
    assert log.finished("a") == ["no-progress"]
    probe = FakeProbe(lambda host, k: True,
                      missing=lambda c, k: Missing() if c.round == 1 else Missing("no-retry", any_round=True))
    s, log = _run(probe, ["a"], n=9, slots=3)
    assert log.finished("a") == ["no-retry"] and s.rounds_max == 2
    # decisive in any round, but only before anything was planned
    probe = FakeProbe(lambda host, k: k <= 4,
                      missing=lambda c, k: Missing("no-retry", any_round=True) if c.round == 2 else None)
    s, log = _run(probe, ["a"], n=9, slots=3)
    assert log.finished("a") == ["bracketed"] and _bracket(log, "a", 9) == (4, 5)


def test_window_of_hosts_and_spacing_per_destination():
    open_at_admit, dues = [], []
    log = Log()
    probe = FakeProbe(lambda host, k: k <= 2)
    s = AgeSearch(probe, n=6, step=STEP, slots=3, hosts_in_flight=2, log=log, per_destination=200.0)
    slot = s.q.slot

    def recorded_slot(address, earliest=None):
        dues.append(slot(address, earliest))
        return dues[-1]
    s.q.slot = recorded_slot  # type: ignore[method-assign]

    def admit(t):
        open_at_admit.append(len(s.open_hosts))
        s.open(Host(t, "192.0.2.1", t), ["x", "y"])
    asyncio.run(asyncio.wait_for(s.run(range(7), admit), 30))
    assert len(open_at_admit) == 7 and max(open_at_admit) <= 1
    for h in range(7):
        assert _bracket(log, h, 6, "x") == (2, 3) and _bracket(log, h, 6, "y") == (2, 3)
    # one address: initial handshakes planned one per-destination interval (5 ms) apart, none
    # made before its planned time
    times = sorted(e[-1] for e in probe.established)
    assert len(dues) == len(times) > 7 * 2
    assert min(b - a for a, b in zip(dues, dues[1:])) >= 0.005 - 1e-9
    assert all(t >= d - 1e-6 for t, d in zip(times, sorted(dues)))
    assert s.peak_held_target <= 2 * 3


def test_ages_once_a_late_outcome_decides_its_index_for_good():
    """ages_once (tls-lifetime): an index with an outcome is not established again, even when
    a late outcome decided another index, and deciding one counts as progress; without it
    (quic-turnover) only the bracket counts and the index is tried again."""
    class LateOnce(FakeProbe):
        def __init__(self, *a, late: dict, **kw):
            super().__init__(*a, **kw)
            self.late = dict(late)        # grid index -> age reported the first time, in steps

        async def present(self, c, k, held):
            out = await super().present(c, k, held)
            return Outcome(out.accepted, self.late.pop(k, k) * self.step, then=out.then)

    # round 1 tries 1 .. 8 (life 4): 5 is refused so late that it decides 7; 6 refused on time
    for once, why, rounds in ((True, "no-progress", 3), (False, "bracketed", 2)):
        s, log = _run(LateOnce(lambda host, k: k <= 4, late={5: 7}, step=0.02), ["h"], n=8, slots=8, step=0.02,
                      ages_once=once)
        assert log.finished("h") == [why] and s.rounds_max == rounds, (once, log.of("h"))
        assert _bracket(log, "h", 8) == ((4, 6) if once else (4, 5))
    # n 4, one slot: 4 refused; then 3 refused late, deciding 4 again: the bracket stays, but an
    # index was decided, which is progress with ages_once (two more rounds to give up, not one);
    # without, 3 is tried again on time
    for once, why in ((True, "no-progress"), (False, "bracketed")):
        s, log = _run(LateOnce(lambda host, k: k <= 2, late={3: 4}), ["h"], n=4, slots=1, ages_once=once)
        assert log.finished("h") == [why] and s.rounds_max == 4, (once, log.of("h"))


def test_exhaustive_resume_tries_only_the_ages_not_decided():
    prior = {"h": {"x": PriorChain(lo=13, hi=0, round=1, finished=False, decided=frozenset({11, 12, 13}))}}
    probe = FakeProbe(lambda host, k: True)
    s, log = _run(probe, ["h"], n=13, slots=3, prior=prior, exhaustive=True, ages_once=True)
    assert sorted(k for *_, k, _ in probe.established) == list(range(1, 11))
    assert log.finished("h") == ["all-ages-tried"] and min(rnd for rnd, *_ in log.of("h")) == 2
