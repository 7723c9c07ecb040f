"""Options shared by the DNS commands (scan dns-ttl, dns-ecs, dns-second-opinion): server
addresses, how --name is spelled, the etiquette check of a server given on the command line."""
from __future__ import annotations

import ipaddress

from netsurvey.errors import UsageError
from netsurvey.selection import TargetSpelling


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


def parse_subnets(subnets) -> list:
    """``--subnet`` values as networks (host bits allowed: 198.18.0.7/24 is 198.18.0.0/24)."""
    nets = []
    for s in subnets:
        try:
            nets.append(ipaddress.ip_network(s, strict=False))
        except ValueError:
            raise UsageError(f"--subnet {s!r} is not a prefix such as 198.18.0.0/24") from None
    return nets


def default_resolver() -> tuple[str, int]:
    import dns.resolver

    try:
        ns = dns.resolver.Resolver().nameservers
    except Exception:  # no /etc/resolv.conf
        ns = []
    if not ns:
        raise UsageError("no resolver configured in /etc/resolv.conf; pass --resolver")
    return parse_server(ns[0])  # type: ignore[arg-type]  # from resolv.conf: an address (str)


#: The DNS commands' targets: the list's names (streamed from the database while the scan
#: reads them, counted in SQL) followed by the --name ones, port 53, never resolved (the
#: names are what is asked): ``TargetSelection(list, top, names, 53).items(NAMES)``.
NAMES = TargetSpelling("HOSTNAME", option="--name")


def check_allowed(option: str, address: str) -> None:
    from netsurvey.clictx import state
    from netsurvey.etiquette import TargetPolicy, explain

    why = TargetPolicy.from_config(state.config.etiquette).reason_blocked(address)
    if why:
        raise UsageError(f"{option} {address}: {explain(why)}")
