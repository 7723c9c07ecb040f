"""Derived page-load metrics (BLAST sec. II): page load time, resource-tree height, the
domain tree and the longest path of sequential new connections. Pure functions over the
resource records of one visit; no browser, no database."""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Optional, Sequence


@dataclass(frozen=True)
class Resource:
    """One request of a visit (each redirect hop is its own resource).

    :ivar no: creation order, 0 = root document.
    :ivar parent_no: parent resource (redirecting hop, or the initiating document/script).
    :ivar redirected_from_no: the hop that redirected to this one.
    :ivar url: requested URL; ``hostname`` its host.
    :ivar created_ms .. last_byte_received_ms: the five BLAST events, ms since the root
        request was created (None if the event did not happen).
    :ivar connection_id / connection_reused / from_cache: connection use.
    :ivar remote_address / remote_port: server address; ``protocol`` http/1.1, h2, h3.
    :ivar encoded_bytes: bytes received; ``failed`` error text of a failed request.
    """

    no: int
    parent_no: Optional[int]
    redirected_from_no: Optional[int]
    url: str
    hostname: Optional[str]
    resource_type: Optional[str]
    initiator_type: Optional[str]
    method: Optional[str]
    http_status: Optional[int]
    protocol: Optional[str]
    connection_id: Optional[int]
    connection_reused: Optional[bool]
    from_cache: Optional[bool]
    remote_address: Optional[str]
    remote_port: Optional[int]
    created_ms: Optional[float]
    dispatched_ms: Optional[float]
    first_byte_sent_ms: Optional[float]
    first_byte_received_ms: Optional[float]
    last_byte_received_ms: Optional[float]
    encoded_bytes: Optional[int]
    failed: Optional[str]
    ended_ms: Optional[float] = None  # last byte received, or when the request failed


@dataclass(frozen=True)
class DomainEdge:
    """Hostname ``hostname`` was first contacted because of a resource of ``parent_hostname``."""

    parent_hostname: Optional[str]
    hostname: str
    first_resource_no: int
    depth: int


def page_load_time_ms(resources: Sequence[Resource], share: float = 0.95) -> Optional[float]:
    """Time (ms since the root request) at which ``share`` of all resources had received their
    last byte (BLAST); a failed request counts as done when it failed. Resources that never
    ended count as not loaded; None if fewer
    than ``share`` finished."""
    n = len(resources)
    if n == 0:
        return None
    done = sorted(r.ended_ms if r.ended_ms is not None else r.last_byte_received_ms for r in resources
                  if r.ended_ms is not None or r.last_byte_received_ms is not None)
    k = math.ceil(share * n)
    if len(done) < k:
        return None
    return done[k - 1]


def _depths(resources: Sequence[Resource]) -> dict[int, int]:
    by_no = {r.no: r for r in resources}
    depth: dict[int, int] = {}

    def d(no: int) -> int:
        if no in depth:
            return depth[no]
        chain, cur = [], no
        while cur is not None and cur not in depth and cur in by_no and len(chain) <= len(by_no):
            chain.append(cur)
            cur = by_no[cur].parent_no
        base = depth.get(cur, 0) if cur is not None else 0
        for i, c in enumerate(reversed(chain)):
            depth[c] = base + i + 1
        return depth[no]

    for r in resources:
        d(r.no)
    return depth


def tree_height(resources: Sequence[Resource]) -> int:
    """Resources on the longest root-to-leaf path (root alone = 1; 0 for no resources)."""
    return max(_depths(resources).values(), default=0)


def _opened_connection(r: Resource) -> bool:
    # Firefox (BiDi) gives no connection id: there a response with a connect phase counts
    return (r.connection_reused is False and not r.from_cache and r.failed is None
            and (r.connection_id is not None or r.http_status is not None))


def longest_new_connection_path(resources: Sequence[Resource]) -> int:
    """Maximum, over root-to-leaf paths, of the resources on the path that opened a new
    connection (each costs at least one extra round trip before its request)."""
    by_no = {r.no: r for r in resources}
    memo: dict[int, int] = {}
    for r in resources:
        chain, cur = [], r.no
        while cur is not None and cur not in memo and cur in by_no and len(chain) <= len(by_no):
            chain.append(cur)
            cur = by_no[cur].parent_no
        base = memo.get(cur, 0) if cur is not None else 0
        for c in reversed(chain):
            base += 1 if _opened_connection(by_no[c]) else 0
            memo[c] = base
    return max(memo.values(), default=0)


def domain_tree(resources: Sequence[Resource]) -> list[DomainEdge]:
    """Each hostname once, linked to the hostname of the parent of its first resource. A
    hostname's parent is always a hostname seen earlier, so the edges form a tree."""
    by_no = {r.no: r for r in resources}
    edges: dict[str, DomainEdge] = {}
    for r in sorted(resources, key=lambda r: r.no):
        if not r.hostname or r.hostname in edges:
            continue
        parent = by_no.get(r.parent_no) if r.parent_no is not None else None
        # walk up to the nearest ancestor with a hostname different from ours
        while parent is not None and parent.hostname == r.hostname:
            parent = by_no.get(parent.parent_no) if parent.parent_no is not None else None
        ph = parent.hostname if parent is not None else None
        depth = edges[ph].depth + 1 if ph in edges else 0
        edges[r.hostname] = DomainEdge(ph, r.hostname, r.no, depth)
    return list(edges.values())
