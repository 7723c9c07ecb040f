"""The shared-state probe (``netsurvey scan tls-shared``, thesis ch. 4.5.1 / 5.4.3): a
session established at hostname A is presented at hostname B (B's address, SNI B) for
every ordered pair (A, B) within a set or within each group; the connected components of
the successful resumptions are the shared-state groups. Certificate SAN lists give the
trust groups, and the union of both edge sets gives Table 5.3's combined groups.

Sharding (the run path's ``--shards N`` / ``--procs N``): origins are numbered in sorted
order and shard i of n takes origins with index % n == i, each paired with every host, so
every shard reuses its origins' sessions. The groups need every shard's attempts: no hook
runs after the last shard commits, so a sharded run computes none, and
``scan tls-shared --merge RUN`` computes them afterwards (``groups_from_db``).
"""
from __future__ import annotations

import asyncio
import fnmatch
import time
from dataclasses import dataclass
from typing import Callable, Iterable, Optional

from netsurvey.scanning import INTERRUPTED, ScanStatus, ScanTarget

from .engine import Handshake, PacedHandshakes, certificate_facts
from .results import ResumptionAttempt


@dataclass(frozen=True)
class SharedOptions:
    """Options of the shared-state probe.

    :ivar mechanisms: 'id' (TLS 1.2, tickets disabled) and/or 'ticket'.
    :ivar versions: TLS versions.
    :ivar timeout: seconds per connect/read; each handshake is also bounded overall by
        2 x timeout (engine.default_deadline).
    :ivar verify: verify certificates (B's certificate for SNI B).
    """

    mechanisms: tuple[str, ...] = ("id", "ticket")
    versions: tuple[str, ...] = ("1.2", "1.3")
    timeout: float = 5.0
    verify: bool = True


class SharedProbe(PacedHandshakes):
    """Presents each origin's session at every other member of its group (the run's limiter
    paces every handshake: :class:`~.engine.PacedHandshakes`)."""

    def __init__(self, options: SharedOptions, emit: Callable[[ResumptionAttempt], None], concurrency: int = 100,
                 limiter=None):
        super().__init__(options, emit, concurrency, limiter)
        self.sans: dict[str, tuple[str, ...]] = {}

    async def probe_origin(self, a: ScanTarget, others: list[ScanTarget]) -> None:
        await asyncio.gather(*(self._origin_mech(a, others, v, m) for v in self.o.versions
                               for m in self.o.mechanisms if not (m == "id" and v == "1.3")))

    async def _origin_mech(self, a: ScanTarget, others: list[ScanTarget], version: str, mech: str) -> None:
        state: dict = {}
        try:
            await self._origin_pairs(a, others, version, mech, state)
        except asyncio.CancelledError:
            # stopped (SIGTERM): the pair under way was contacted; it gets a row saying so
            b, h = state.get("b"), state.get("h")
            if b is not None:
                self.emit(ResumptionAttempt(
                    mechanism=mech, version=version, origin_host=a.hostname, origin_address=a.address,  # type: ignore[arg-type]  # a resolved name
                    host=b.hostname, address=b.address,
                    age=round(time.monotonic() - h.completed_at, 3) if h is not None and h.completed_at else 0.0,
                    resumed=False, status=ScanStatus.UNKNOWN_ERROR.value, error=INTERRUPTED))
            raise

    async def _origin_pairs(self, a: ScanTarget, others: list[ScanTarget], version: str, mech: str,
                            state: dict) -> None:
        ctx = self.contexts[(version, mech)]
        h: Optional[Handshake] = None
        for b in others:
            state["b"] = b
            if h is None:
                h = await self._hs(a, ctx)
                state["h"] = h
                if h.ok and h.cert_der and a.hostname not in self.sans:
                    self.sans[a.hostname] = certificate_facts(h.cert_der)[2]  # type: ignore[index]  # a name
                if not h.ok or h.session is None or (mech == "id" and not h.session_id) or \
                        (mech == "ticket" and not (h.tickets or h.session.has_ticket)):
                    return      # nothing to present (recorded by the survey, not here)
            r = await self._hs(b, ctx, session=h.session)
            assert h.completed_at is not None   # h.ok: a completed handshake
            age = (r.completed_at - (r.handshake_ms or 0) / 1000 - h.completed_at) if r.completed_at else \
                time.monotonic() - h.completed_at
            self.emit(ResumptionAttempt(
                mechanism=mech, version=version, origin_host=a.hostname, origin_address=a.address,  # type: ignore[arg-type]  # resolved
                host=b.hostname, address=b.address, age=round(age, 3), resumed=r.ok and r.resumed,  # type: ignore[arg-type]  # names
                status=r.status.value, error=r.error,
                key_name=(h.tickets[-1].key_name if mech == "ticket" and h.tickets else None)))
            if r.ok and r.resumed:
                h = state["h"] = None   # single-use state (TLS 1.3 stateful tickets) may be consumed

    async def san_of(self, t: ScanTarget) -> None:
        """Fetch the certificate SANs of a host not probed as an origin (other shards)."""
        if t.hostname in self.sans:
            return
        v = self.o.versions[-1]
        h = await self._hs(t, self.contexts[(v, self.o.mechanisms[-1])])
        if h.ok:
            self.sans[t.hostname] = certificate_facts(h.cert_der)[2]  # type: ignore[index]  # a name

    def close(self) -> None:
        self.keylog.close()


def origins_of_shard(hosts: list[str], shard: tuple[int, int]) -> list[str]:
    """Shard ``(i, n)``'s origins: every n-th host in sorted order, from the i-th."""
    i, n = shard
    return [h for k, h in enumerate(sorted(hosts)) if k % n == i]


# ---------------------------------------------------------------------------- groups

def components(nodes: Iterable[str], edges: Iterable[tuple[str, str]]) -> list[list[str]]:
    """Connected components (undirected), largest first, members sorted; singletons kept."""
    parent: dict[str, str] = {n: n for n in nodes}

    def find(x: str) -> str:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for a, b in edges:
        parent.setdefault(a, a)
        parent.setdefault(b, b)
        ra, rb = find(a), find(b)
        if ra != rb:
            parent[max(ra, rb)] = min(ra, rb)
    groups: dict[str, list[str]] = {}
    for n in parent:
        groups.setdefault(find(n), []).append(n)
    return sorted((sorted(g) for g in groups.values()), key=lambda g: (-len(g), g[0]))


def san_edges(sans: dict[str, tuple[str, ...]], hosts: Iterable[str]) -> list[tuple[str, str]]:
    """A-B if B matches a SAN of A's certificate (wildcards as RFC 6125: one label)."""
    hosts = list(hosts)
    out = []
    for a, names in sans.items():
        for b in hosts:
            if b != a and any(_san_match(n, b) for n in names):
                out.append((a, b))
    return out


def _san_match(pattern: str, host: str) -> bool:
    pattern, host = pattern.lower(), host.lower()
    if pattern.startswith("*."):
        return host.count(".") == pattern.count(".") and fnmatch.fnmatchcase(host, pattern)
    return pattern == host


def groups_from_db(db, run_ids: tuple[int, ...], hosts: Iterable[str], sans: dict[str, tuple[str, ...]]
                   ) -> dict[str, list[list[str]]]:
    """Groups of the three kinds from the attempts stored under ``run_ids``."""
    with db.connect() as conn:
        res_edges = [tuple(r) for r in conn.execute(
            "SELECT DISTINCT origin_host, host FROM tls_resumption WHERE run_id = ANY(%s) AND resumed "
            "AND origin_host <> host", (list(run_ids),)).fetchall()]
    hosts = sorted(set(hosts))
    se = san_edges(sans, hosts)
    return {"resumption": components(hosts, res_edges), "san": components(hosts, se),
            "union": components(hosts, res_edges + se)}
