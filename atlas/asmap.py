"""Origin-AS mapping with pyasn and an offline IP-to-ASN file the user provides, and the
thesis's classification: a resolver in the probe's AS is the ISP's, one in another AS is a
public (third-party) resolver.

The file is pyasn's ``ipasn`` text format (what ``pyasn_util_convert.py`` writes from a
RouteViews/RIS dump): ``;`` comment lines, then ``PREFIX<TAB>ASN`` per line.
"""
from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Optional

from netsurvey.errors import UsageError


@dataclass(frozen=True)
class AsnMapping:
    """Origin of one address: ``asn`` (None if no prefix covers it) and the matching prefix."""

    address: str
    asn: Optional[int]
    prefix: Optional[str]


class AsnMap:
    """Longest-prefix lookups in an offline IP-to-ASN file (pyasn radix tree)."""

    def __init__(self, path: Path):
        import pyasn

        path = Path(path)
        if not path.is_file():
            raise UsageError(f"{path}: IP-to-ASN file not found")
        try:
            self._db = pyasn.pyasn(str(path))
        except Exception as exc:  # pyasn raises plain Exceptions on malformed lines
            raise UsageError(f"{path}: not a pyasn IP-to-ASN file: {exc}") from None
        self.path = path

    def lookup(self, address: str) -> AsnMapping:
        addr = str(ipaddress.ip_address(address))
        asn, prefix = self._db.lookup(addr)
        return AsnMapping(addr, int(asn) if asn is not None else None, prefix)

    def lookup_many(self, addresses: Iterable[str]) -> list[AsnMapping]:
        return [self.lookup(a) for a in sorted(set(addresses))]


def classify(probe_asn: Optional[int], resolver_asn: Optional[int]) -> Optional[str]:
    """'same-as' (ISP resolver), 'other-as' (public resolver) or None if either is unknown."""
    if probe_asn is None or resolver_asn is None:
        return None
    return "same-as" if probe_asn == resolver_asn else "other-as"


def write_ipasn(path: Path, prefixes: dict[str, int]) -> Path:
    """Write a pyasn ipasn file from {prefix: asn} (for tests and small hand-made maps)."""
    v4 = sum(1 for p in prefixes if ipaddress.ip_network(p).version == 4)
    lines = ["; IP-ASN32-DAT file", "; Original source: netsurvey hand-made map",
             f"; Prefixes-v4: {v4}", f"; Prefixes-v6: {len(prefixes) - v4}", ";"]
    lines += [f"{ipaddress.ip_network(p)}\t{a}" for p, a in prefixes.items()]
    Path(path).write_text("\n".join(lines) + "\n")
    return Path(path)
