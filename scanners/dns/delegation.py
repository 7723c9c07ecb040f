"""Finding the authoritative nameservers of a name by walking delegations.

The walk starts at a configured recursive resolver, which is asked only for the NS set of
the top-level zone and for nameserver addresses that came without glue. From there every
step asks an authoritative server directly (RD=0): an authoritative NS answer for a name
makes it a zone apex, a referral (NS in authority, not AA) hands the name to the delegated
servers (glue from the additional section), an authoritative answer without NS keeps it
in the enclosing zone. Zones are cached and computed once even when many names ask at the
same time (one future per name), so a zone is walked once per scan (while it is among the
last ``CACHE_ENTRIES`` cached: a 1M-name list's caches stay bounded, issue 26).

A *lame delegation* is a server named for a zone that does not answer for it with
authority: it refers to the same zone again (or above it), answers REFUSED, or answers
without AA.
"""
from __future__ import annotations

import asyncio
import ipaddress
from dataclasses import dataclass
from typing import Callable, Optional

from .engine import Exchange, QueryEngine
from .wire import AAAA, NS, A, Reply, build_query


@dataclass(frozen=True)
class Zone:
    """A zone and its nameservers: ``name`` (lower case, no trailing dot; '' = root),
    the NS names and their addresses (IPv4 first)."""

    name: str
    ns_names: tuple[str, ...]
    addresses: tuple[str, ...]


class WalkFailed(Exception):
    """The walk could not reach an authoritative server. ``outcome`` uses the probe
    vocabulary ('timeout', 'lame', 'servfail', 'nxdomain', 'malformed', 'blocked',
    'no-nameserver', 'error'); ``server`` is the address that failed, if any."""

    def __init__(self, outcome: str, detail: str, server: Optional[str] = None, zone: Optional[str] = None):
        super().__init__(detail)
        self.outcome = outcome
        self.server = server
        self.zone = zone


def parent_name(name: str) -> str:
    return name.split(".", 1)[1] if "." in name else ""


def in_zone(name: str, zone: str) -> bool:
    return zone == "" or name == zone or name.endswith("." + zone)


def referral_zone(reply: Reply) -> Optional[str]:
    """The delegated zone of a referral (NOERROR, no answer, not AA, NS in authority)."""
    if reply.rcode != 0 or reply.aa or reply.answer:
        return None
    for rr in reply.authority:
        if rr.rtype == NS:
            return rr.name
    return None


def glue(reply: Reply, ns_names: tuple[str, ...]) -> tuple[str, ...]:
    """Addresses of ``ns_names`` from the additional section, IPv4 first."""
    wanted = set(ns_names)
    v4 = [rr.value for rr in reply.additional if rr.rtype == A and rr.name in wanted]
    v6 = [rr.value for rr in reply.additional if rr.rtype == AAAA and rr.name in wanted]
    return tuple(dict.fromkeys(v4 + v6))


def exchange_failure(ex: Exchange) -> Optional[WalkFailed]:
    """A WalkFailed for an exchange without a usable reply, else None."""
    if ex.outcome != "reply":
        return WalkFailed("timeout" if ex.outcome == "timeout" else
                          "malformed" if ex.outcome == "malformed" else "error",
                          ex.error or ex.outcome, ex.server)
    return None


#: Entries kept per cache of the walker (names, zones, nameserver addresses). A top list's
#: names are mostly zones of their own, so unbounded caches grew with the list (issue 26);
#: past the cap the oldest settled entries go (a zone asked again is walked again).
CACHE_ENTRIES = 50_000


def _room(cache: dict) -> None:
    """Make room in ``cache`` (insertion-ordered) for one more entry: when full, drop the
    oldest tenth whose walk has settled (futures still running stay: others await them)."""
    if len(cache) < CACHE_ENTRIES:
        return
    drop = []
    for k, v in cache.items():
        if not isinstance(v, asyncio.Future) or v.done():
            drop.append(k)
            if len(drop) >= CACHE_ENTRIES // 10:
                break
    for k in drop:
        del cache[k]


class DelegationWalker:
    """See module docstring. ``family`` picks the transport to nameservers: '4', '6'
    or 'any' (IPv4 if the zone has an IPv4 server). ``allowed(address)`` returns a reason
    if the etiquette policy forbids contacting an address, else None."""

    def __init__(self, engine: QueryEngine, resolver: tuple[str, int], *, family: str = "any",
                 port: int = 53, allowed: Callable[[str], Optional[str]] = lambda a: None):
        self.engine = engine
        self.resolver = resolver
        self.family = family
        self.port = port
        self.blocked_reason = allowed
        self._zones: dict[str, asyncio.Future] = {}     # name -> its deepest enclosing zone
        self._referred: dict[str, asyncio.Future] = {}  # zone name -> zone from a referral
        self._addrs: dict[str, asyncio.Future] = {}
        self._picked: dict[Zone, str | WalkFailed] = {}  # zone -> address to ask, or the WalkFailed
        self.walk_queries = 0

    # -------------------------------------------------------------- server choice
    def pick(self, zone: Zone) -> str:
        """The address asked for names in ``zone`` (deterministic: first of the family);
        decided once per zone (it is asked for every query)."""
        got = self._picked.get(zone)
        if got is None:
            try:
                _room(self._picked)
                got = self._picked[zone] = self._pick(zone)
            except WalkFailed as exc:
                got = self._picked[zone] = exc
        if type(got) is str:
            return got
        raise WalkFailed(got.outcome, str(got), got.server, got.zone)  # type: ignore[union-attr]  # not a str: a WalkFailed

    def _pick(self, zone: Zone) -> str:
        cands = [a for a in zone.addresses
                 if self.family == "any" or str(ipaddress.ip_address(a).version) == self.family]
        if not cands:
            raise WalkFailed("no-nameserver", f"zone {zone.name or '.'} has no IPv{self.family} nameserver",
                             zone=zone.name)
        addr = cands[0]
        why = self.blocked_reason(addr)
        if why:
            raise WalkFailed("blocked", f"nameserver {addr} {why}", addr, zone.name)
        return addr

    async def ask(self, zone: Zone, name: str, rtype: int) -> tuple[str, Exchange]:
        server = self.pick(zone)
        ex = await self.engine.query(server, self.port, build_query(name, rtype, rd=False))
        return server, ex

    # -------------------------------------------------------------- zones
    async def zone_of(self, name: str) -> Zone:
        """The deepest zone containing ``name`` (``name`` may be its apex)."""
        fut = self._zones.get(name)
        if fut is None:
            _room(self._zones)
            fut = self._zones[name] = asyncio.ensure_future(self._zone_of(name))
        elif fut.done() and not fut.cancelled() and fut.exception() is None:
            return fut.result()  # the cached walk: no shield, no suspension
        return await asyncio.shield(fut)

    async def _zone_of(self, name: str) -> Zone:
        if "." not in name:
            return await self._top_zone(name)
        enclosing = await self.zone_of(parent_name(name))
        server, ex = await self.ask(enclosing, name, NS)
        self.walk_queries += 1
        fail = exchange_failure(ex)
        if fail:
            fail.zone = enclosing.name
            raise fail
        r = ex.reply
        assert r is not None   # no exchange_failure: a reply
        ref = referral_zone(r)
        if ref is not None:
            if ref != enclosing.name and in_zone(ref, enclosing.name) and in_zone(name, ref):
                return await self.from_referral(ref, r)
            raise WalkFailed("lame", f"{server} named for {enclosing.name} refers to {ref}", server, enclosing.name)
        if r.rcode == 5 or (r.rcode == 0 and not r.aa):
            raise WalkFailed("lame", f"{server} does not answer for {enclosing.name} with authority "
                             f"({r.rcode_text}, aa={r.aa})", server, enclosing.name)
        if r.rcode == 2:
            raise WalkFailed("servfail", f"{server}: SERVFAIL", server, enclosing.name)
        if r.rcode == 0:
            ns = tuple(rr.value for rr in r.answer if rr.rtype == NS and rr.name == name)
            if ns:  # authoritative NS set: name is a zone apex (possibly on the same server)
                return await self._zone(name, ns, glue(r, ns))
        return enclosing  # NXDOMAIN or no NS: name lies inside the enclosing zone

    async def from_referral(self, zone: str, reply: Reply) -> Zone:
        """The zone a referral points to (cached under the zone name)."""
        fut = self._referred.get(zone)
        if fut is None:
            ns = tuple(dict.fromkeys(rr.value for rr in reply.authority if rr.rtype == NS and rr.name == zone))
            _room(self._referred)
            fut = self._referred[zone] = asyncio.ensure_future(self._zone(zone, ns, glue(reply, ns)))
        return await asyncio.shield(fut)

    async def _top_zone(self, name: str) -> Zone:
        ex = await self.engine.query(*self.resolver, build_query(name, NS, rd=True))
        self.walk_queries += 1
        fail = exchange_failure(ex)
        if fail:
            raise WalkFailed(fail.outcome, f"resolver {self.resolver[0]}: {fail}", fail.server, name)
        r = ex.reply
        assert r is not None   # no exchange_failure: a reply
        if r.rcode != 0:
            raise WalkFailed("servfail" if r.rcode == 2 else "nxdomain" if r.rcode == 3 else "error",
                             f"resolver: NS {name or '.'}: {r.rcode_text}", self.resolver[0], name)
        ns = tuple(rr.value for rr in r.answer if rr.rtype == NS and rr.name == name)
        if not ns:
            raise WalkFailed("no-nameserver", f"resolver: no NS for {name or '.'}", self.resolver[0], name)
        return await self._zone(name, ns, glue(r, ns))

    async def _zone(self, name: str, ns: tuple[str, ...], addrs: tuple[str, ...]) -> Zone:
        if not ns:
            raise WalkFailed("lame", f"referral to {name} without NS names", zone=name)
        if not addrs:  # no glue: resolve the NS names through the resolver
            found = await asyncio.gather(*(self.ns_addresses(n) for n in ns))
            v4 = [a for lst in found for a in lst if ":" not in a]
            v6 = [a for lst in found for a in lst if ":" in a]
            addrs = tuple(dict.fromkeys(v4 + v6))
            if not addrs:
                raise WalkFailed("no-nameserver", f"no address for the nameservers of {name}: {', '.join(ns)}",
                                 zone=name)
        return Zone(name, ns, addrs)

    async def ns_addresses(self, ns_name: str) -> tuple[str, ...]:
        fut = self._addrs.get(ns_name)
        if fut is None:
            _room(self._addrs)
            fut = self._addrs[ns_name] = asyncio.ensure_future(self._ns_addresses(ns_name))
        return await asyncio.shield(fut)

    async def _ns_addresses(self, ns_name: str) -> tuple[str, ...]:
        out: list[str] = []
        for rtype in (A, AAAA):
            ex = await self.engine.query(*self.resolver, build_query(ns_name, rtype, rd=True))
            self.walk_queries += 1
            if ex.outcome == "reply" and ex.reply.rcode == 0:  # type: ignore[union-attr]  # 'reply': reply set
                out += [rr.value for rr in ex.reply.answer if rr.rtype == rtype]  # type: ignore[union-attr]  # (as above)
        return tuple(out)
