"""Options shared by the DNS commands (scan dns-ttl, dns-ecs, dns-second-opinion): server
addresses, the target list, the etiquette check of a server given on the command line."""
from __future__ import annotations

import ipaddress
from typing import Optional

from netsurvey.errors import UsageError


def parse_server(text: str, default_port: int = 53) -> tuple[str, int]:
    """'ADDR', 'ADDR:PORT', '[V6]:PORT' or a bare IPv6 address -> (address, port)."""
    t = text.strip()
    try:
        if t.startswith("["):
            host, _, rest = t[1:].partition("]")
            port = int(rest[1:]) if rest.startswith(":") else default_port
        elif t.count(":") == 1:
            host, p = t.split(":")
            port = int(p)
        else:
            host, port = t, default_port
        host = str(ipaddress.ip_address(host))
    except ValueError:
        raise UsageError(f"{text!r} is not an address (ADDR, ADDR:PORT or [IPv6]:PORT)") from None
    if not 0 < port < 65536:
        raise UsageError(f"{text!r}: port out of range")
    return host, port


def default_resolver() -> tuple[str, int]:
    import dns.resolver

    try:
        ns = dns.resolver.Resolver().nameservers
    except Exception:  # no /etc/resolv.conf
        ns = []
    if not ns:
        raise UsageError("no resolver configured in /etc/resolv.conf; pass --resolver")
    return parse_server(ns[0])  # type: ignore[arg-type]  # from resolv.conf: an address (str)


def targets_from_options(list_name: Optional[str], top: Optional[int], names: list[str]):
    """The list's names (streamed from the database while the scan reads them, counted in
    SQL: issue 26) followed by the --name ones, as a :class:`~netsurvey.scanning.NameStream`
    of port-53 ScanTargets. In a shard: only the shard's names."""
    from netsurvey.clictx import list_db
    from netsurvey.options import check_targets
    from netsurvey.scanning import NameStream, ScanTarget
    from netsurvey.targets import normalize_hostname, stream_targets

    check_targets(list_name, top, names, what="--name HOSTNAME")
    listed = stream_targets(list_db(), list_name, top) if list_name else None
    extra = []
    for n in names:
        try:
            h = normalize_hostname(n)
        except ValueError as exc:
            raise UsageError(f"--name {n!r}: {exc}") from None
        extra.append(ScanTarget(h, None, 53, None))
    return NameStream(listed, 53, extra)   # in a shard: NameStream keeps only the shard's own names


def check_allowed(option: str, address: str) -> None:
    from netsurvey.clictx import state
    from netsurvey.etiquette import TargetPolicy, explain

    why = TargetPolicy.from_config(state.config.etiquette).reason_blocked(address)
    if why:
        raise UsageError(f"{option} {address}: {explain(why)}")
