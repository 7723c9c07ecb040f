"""Shared hostname resolution for scanners (through the system resolver, i.e. the testbed's
unbound inside `netsurvey testbed exec`), asynchronous and bounded."""
from __future__ import annotations

import asyncio
import ipaddress
from dataclasses import dataclass
from typing import Iterable, Optional

import dns.asyncresolver
import dns.exception
import dns.resolver


@dataclass(frozen=True)
class Resolution:
    """Addresses of one hostname, in answer order. ``error`` is None, 'nxdomain',
    'no-address' (NODATA), 'servfail', 'timeout' or another short reason."""

    hostname: str
    ipv4: tuple[str, ...] = ()
    ipv6: tuple[str, ...] = ()
    error: Optional[str] = None

    @property
    def addresses(self) -> tuple[str, ...]:
        return self.ipv4 + self.ipv6


async def _lookup(r: dns.asyncresolver.Resolver, name: str, rdtype: str) -> tuple[tuple[str, ...], Optional[str]]:
    try:
        ans = await r.resolve(name, rdtype, search=False)
        return tuple(a.to_text() for a in ans), None
    except dns.resolver.NXDOMAIN:
        return (), "nxdomain"
    except dns.resolver.NoAnswer:
        return (), "no-address"
    except dns.resolver.NoNameservers:
        return (), "servfail"
    except dns.exception.Timeout:
        return (), "timeout"
    except dns.exception.DNSException as exc:
        return (), type(exc).__name__


def _literal(name: str) -> Optional[str]:
    """The address ``name`` spells (IPv4 or IPv6, brackets allowed), else None."""
    try:
        return str(ipaddress.ip_address(name.strip("[]")))
    except ValueError:
        return None


def system_resolver(nameservers: Optional[list[str]] = None, option: str = "--nameserver") -> dns.asyncresolver.Resolver:
    """A resolver asking ``nameservers`` (None: resolv.conf's), each checked first: a testbed
    address this namespace reaches only by its default route is refused (UsageError;
    etiquette.check_on_machine, check_resolvers_on_machine)."""
    from .etiquette import check_on_machine, check_resolvers_on_machine

    r = dns.asyncresolver.Resolver(configure=nameservers is None)
    if nameservers:
        for ns in nameservers:
            check_on_machine(option, ns)
        r.nameservers = nameservers
    else:
        check_resolvers_on_machine(r.nameservers)  # type: ignore[arg-type]  # from resolv.conf: addresses (str)
    return r


async def resolve_many(hostnames: Iterable[str], *, ipv6: bool = True, concurrency: int = 100,
                       timeout: float = 3.0, nameservers: Optional[list[str]] = None) -> dict[str, Resolution]:
    """Resolve A (and AAAA) of every hostname. Returns hostname -> Resolution."""
    r = system_resolver(nameservers)
    r.lifetime = timeout
    out: dict[str, Resolution] = {}
    # ``concurrency`` workers take the next name in turn (issue 26: one task per name, all
    # created up front, held ~2.7 KB per name - 270 MB for a 100K list before the first
    # probe - and a signal had to cancel every one of them)
    names = iter(dict.fromkeys(hostnames))

    async def worker() -> None:
        for h in names:
            literal = _literal(h)
            if literal is not None:   # an address given as a name resolves to itself, no query
                out[h] = Resolution(h, *((((literal,), ()) if ":" not in literal else ((), (literal,)))))
                continue
            v4, e4 = await _lookup(r, h, "A")
            v6, e6 = await _lookup(r, h, "AAAA") if ipv6 else ((), None)
            err = None
            if not v4 and not v6:
                err = e4 if e4 not in (None, "no-address") else (e6 or e4 or "no-address")
            out[h] = Resolution(h, v4, v6, err)

    await asyncio.gather(*(worker() for _ in range(max(1, concurrency))))
    return out
