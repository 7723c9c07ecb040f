"""``scan tls-lifetime`` as a scheduler of future attempts with bounded memory.

The thesis's probe (ch. 4.4.1) opens one fresh session per age a = step, 2 step, ...,
max_age up front and presents each exactly once, a seconds after its handshake: at 24 h /
5 min that is 288 sessions per (host, mechanism, version) held for up to a day. Here the
same grid of ages is searched by the age search (netsurvey/agesearch: rounds of a k-ary
search, sessions dropped as soon as they can answer nothing, a window of hosts, attempts
before initial handshakes, per-destination spacing) with at most ``slots`` sessions per
(host, mechanism, version) ("chain") at any time: 17 sessions instead of 288 at 24 h / 5 min.

This module is the TLS part: a chain is named (mechanism, version) (no 'id' for TLS 1.3);
a state is a session of a fresh initial handshake through the run's limiter (its age counts
from the handshake's completion), presented once in a resumption attempt, which is also a
``tls_resumption`` row; no session offered in round 1 ends the chain ``not-offered`` or
``initial-failed`` with that handshake's row, as the thesis probe. Every planned attempt,
outcome, drop and finished chain is appended to ``tls_lifetime_event`` (see
:func:`prior_state`): a restarted run reads the brackets back and presents the stored
sessions (i2d_SSL_SESSION DER) at their ages; attempts planned without a stored session
are logged ``lost`` (their ``ssl.SSLSession`` objects lived only in the dead process:
Python can neither serialise nor re-create one) and their ages re-tried with fresh
sessions in a new round.

What differs from the thesis's definition (the result rows and ``tls_lifetime_measured_v``
are the same: the largest age resumed and the smallest refused, at the grid's
resolution): the ages of one chain are tried with sessions established at up to
``rounds`` different times (the thesis: all at the start), so a server whose lifetime
changes during the measurement (e.g. a ticket key rotating between rounds) can be
bracketed differently; the search assumes monotonicity (with ``--keep-going`` every age
is tried instead, in rounds of ``slots`` ages: far slower); and the probe takes about
rounds x the lifetime instead of one lifetime.
"""
from __future__ import annotations

import time
from typing import Callable, Iterable, Optional

from netsurvey.agesearch import (  # noqa: F401  # re-exported (run.py, tests)
    AgeSearch,
    Chain,
    Held,
    Host,
    Missing,
    Outcome,
    default_slots,
    next_points,
    prior_chains,
    unanswered,
)
from netsurvey.scanning import ScanStatus, ScanTarget

from .sessions import StoredSession

#: log(target, mechanism, version, round, grid_index, event, due_at_wall_s, detail, session_der)
EventLog = Callable[..., None]


class LifetimeScheduler:
    """Drives the lifetime search of many targets with bounded sessions (the TLS
    :class:`~netsurvey.agesearch.Probe` of an :class:`~netsurvey.agesearch.AgeSearch`).

    :param probe: a :class:`~scanners.tls.lifetime.LifetimeProbe` (handshakes through the
        run's limiter, contexts, result emission).
    :param slots: sessions per chain at most.
    :param hosts_in_flight: targets with open chains at most.
    :param log: appends to the event log (see :data:`EventLog`).
    :param tick: called about once a second (flush the writers).
    """

    def __init__(self, probe, *, slots: int, hosts_in_flight: int, log: EventLog,
                 tick: Callable[[], None] = lambda: None, concurrency: int = 100):
        self.p = probe
        o = probe.o
        self.log = log
        self.names = [(m, v) for v in o.versions for m in o.mechanisms if not (m == "id" and v == "1.3")]
        pdp = getattr(probe.limiter, "per_destination", None) if probe.limiter is not None else None
        self.search = AgeSearch(self, n=int(o.max_age // o.step + 1e-9), step=o.step, slots=slots,
                                hosts_in_flight=hosts_in_flight, log=self._log, exhaustive=not o.stop_on_refusal,
                                ages_once=True, accepted="resumed", per_destination=pdp, concurrency=concurrency,
                                tick=tick, name="lifetime scheduler")

    def _log(self, c: Chain, k: Optional[int], event: str, due_w: Optional[float], detail: Optional[str],
             held: Optional[Held]) -> None:
        session = held.state[0] if held is not None else None
        self.log(c.host.target, *c.name, c.round, k, event, due_w, detail,
                 session.der if isinstance(session, StoredSession) else None)

    # ------------------------------------------------------------------ the probe
    async def establish(self, c: Chain, k: int) -> Held | Missing:
        t, (m, v) = c.host.target, c.name
        h = await self.p._hs(t, self.p.contexts[(v, m)])
        if not self.p._offered(h, m):
            # decisive when no session could be established in the first round: recorded as the thesis probe
            return Missing("initial-failed" if not h.ok else "not-offered", then=lambda: self.p._attempt(
                t, m, v, 0.0, h, 0, None, status=None if not h.ok else ScanStatus.APPLICATION_ERROR.value,
                error=None if not h.ok else (h.session_error or "not-offered")))
        # keep only what the attempt needs (not the certificate, tickets, ...): the session
        return Held((h.session, self.p._key(h) if m == "ticket" else None), h.completed_at,
                    time.time() + (h.completed_at - time.monotonic()))

    async def present(self, c: Chain, k: int, held: Held) -> Outcome:
        t, (m, v) = c.host.target, c.name
        session, key_name = held.state
        r = await self.p._hs(t, self.p.contexts[(v, m)], session=session)
        real_age = (time.monotonic() - held.born_m) if r.completed_at is None else (
            r.completed_at - (r.handshake_ms or 0) / 1000 - held.born_m)

        def row() -> None:
            self.p._attempt(t, m, v, round(real_age, 3), r, 0, key_name)
        if not r.ok:
            return Outcome(None, real_age, r.error or r.status.value, then=row)
        return Outcome(bool(r.resumed), real_age, then=row)

    def thaw(self, c: Chain, stored: bytes) -> tuple:
        return StoredSession(stored, True), None

    # ------------------------------------------------------------------ the loop
    async def run(self, targets: Iterable[ScanTarget], prior: Optional[dict] = None,
                  restored: Iterable[tuple] = ()) -> None:
        """``prior``: chains of an interrupted run (:func:`prior_state`); ``restored``: its
        pending attempts with stored sessions, (key, round, grid_index, due_at_wall_s, der)."""
        prior = prior or {}
        back: dict = {}
        for (host, addr, m, v), rnd, k, due, der in restored:
            back.setdefault((host, addr), []).append(((m, v), rnd, k, due, der))

        def admit(t: ScanTarget) -> None:
            key = (t.hostname, t.address)
            mine = {n: prior[(*key, *n)] for n in self.names if (*key, *n) in prior}
            self.search.open(Host(key, t.address, t), self.names, mine, back.get(key, ()))  # type: ignore[arg-type]  # resolved
        await self.search.run(targets, admit)


def prior_state(conn, run_id: int) -> tuple[dict, int, list]:
    """Chains of run ``run_id`` from its event log -> ({(host, address, mech, version):
    PriorChain}, number of pending attempts without a stored session, logged as lost now,
    [pending attempts with their stored session: (key, round, grid_index, due_at_wall_s,
    der)]). Decided indices are only needed for --keep-going runs, but cheap to read."""
    import datetime as dt

    out = {key: pc for key, pc, _ in prior_chains(
        conn, "tls_lifetime_event", ("origin_host", "host(origin_address)", "mechanism", "version"), run_id,
        accepted="resumed")}
    pending = unanswered("tls_lifetime_event", ("origin_host", "origin_address", "mechanism", "version"))
    restored = [((h, a, m, v), rnd, k, due.timestamp(), bytes(der)) for h, a, m, v, rnd, k, due, der in conn.execute(
        "SELECT p.origin_host, host(p.origin_address), p.mechanism, p.version, p.round, p.grid_index, p.due_at, "
        "p.session " + pending + " AND p.session IS NOT NULL", (run_id,)).fetchall()]
    lost = conn.execute(
        # a lost attempt keeps the shard (vantage, round) that planned it: row_vantage reads shard_id
        "INSERT INTO tls_lifetime_event (run_id, origin_host, origin_address, mechanism, version, round, grid_index, "
        "event, at, shard_id) SELECT p.run_id, p.origin_host, p.origin_address, p.mechanism, p.version, p.round, "
        "p.grid_index, 'lost', %s, p.shard_id " + pending + " AND p.session IS NULL",
        (dt.datetime.now(dt.timezone.utc), run_id)).rowcount
    return out, lost, restored
