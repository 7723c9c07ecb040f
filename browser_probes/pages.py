"""The pages of ``browser pageload --list``: each list host's address (resolved once, as the
browser will reach it: the resolver of resolv.conf, IPv4) judged by the run's policy before
any browser starts. A blocked or unresolvable host is skipped, never visited; the dry-run
plan counts exactly those, by rule (netsurvey.clictx._plan), and the run records them in its
counts (``blocked``, ``resolution-failed``)."""
from __future__ import annotations

import ipaddress
import socket
from dataclasses import dataclass
from typing import Optional, Sequence
from urllib.parse import urlsplit


@dataclass(frozen=True)
class Page:
    url: str
    host: str
    address: Optional[str]   # None: the host did not resolve
    rule: Optional[str]      # TargetPolicy.blocking_rule of the address; None: allowed (or unresolved)

    @property
    def visit(self) -> bool:
        return self.address is not None and self.rule is None


def address_of(host: str) -> Optional[str]:
    """``host``'s address: itself when it spells one, else its first IPv4 address
    (getaddrinfo: what the browser asks); None when it does not resolve."""
    try:
        return str(ipaddress.ip_address(host))
    except ValueError:
        pass
    try:
        return socket.getaddrinfo(host, None, socket.AF_INET)[0][4][0]
    except OSError:
        return None


def judge(urls: Sequence[str], policy) -> list[Page]:
    out = []
    for u in urls:
        host = urlsplit(u).hostname or ""
        addr = address_of(host)
        out.append(Page(u, host, addr, policy.blocking_rule(addr) if addr else None))
    return out


def skipped_line(p: Page) -> str:
    from netsurvey.etiquette import BLOCK_RULES

    if p.address is None:
        return f"skipped: {p.url}: cannot resolve {p.host!r}"
    return f"skipped: {p.url} ({p.address}) is blocked: {BLOCK_RULES.get(p.rule, p.rule)}"


def counts(pages: Sequence[Page]) -> dict:
    """The run's counts of the pages it skipped: blocked by the policy, not resolved."""
    return {"blocked": sum(1 for p in pages if p.rule), "resolution-failed": sum(1 for p in pages if p.address is None)}


def plan(pages: Sequence[Page], urls: Sequence[str]):
    """The run's pages for open_scan: the URLs it visits (``urls``: the list's allowed pages
    and the --url ones, each checked already), and for the dry-run plan every list page as
    judged here (its address and rule; an unresolved host as resolution-failed)."""
    from netsurvey.scanning import ResolvedOnce, ScanOutcome, ScanStatus, ScanTarget

    listed = {p.url for p in pages}

    def resolved():
        ok = [ScanTarget(p.host, p.address, 443) for p in pages if p.address is not None]
        ok += [ScanTarget(urlsplit(u).hostname, None, 443) for u in urls if u not in listed]
        failed = [ScanOutcome(ScanTarget(p.host, None, 443), ScanStatus.RESOLUTION_FAILED, None, "no address")
                  for p in pages if p.address is None]
        return ok, failed

    return ResolvedOnce(urls, resolved)
