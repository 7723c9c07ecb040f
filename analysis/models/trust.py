"""Domain trees and trust groups: TLS resumption across hostnames (thesis ch. 5.4.4,
Tables 5.4-5.6, Fig 5.5, 5.6, eq. 5.5) and shared address validation (ch. 7.4, Fig 7.3, 7.4).

A site is a *domain tree*: causal edges ``parent -> child`` between hostnames, rooted at the
site's own hostname. Its *trust groups* partition the hostnames (hostnames that share TLS
state: certificate SANs, measured cross-hostname resumption, or their union); a hostname
in no group is a group of its own.

Counting rules (thesis 5.4.4):
- without resumption: one full handshake per TLS connection (``connections`` per hostname,
  default 1, so this equals the number of hostnames as in the thesis);
- with per-hostname resumption: one full handshake per distinct hostname;
- across hostnames: one full handshake per trust group touched.
Sequential cost: each hostname is reached along a shortest path from the root (depth 1 =
root). Along that path a node needs a full handshake unless a member of its trust group
sits at a strictly smaller depth. The *longest path of full handshakes* is the maximum
over hostnames of the full handshakes on its path; where several shortest paths exist the
one with the fewest full handshakes is taken (the browser is assumed to learn the
hostname from the earliest parent).
"""
from __future__ import annotations

import itertools
import random
from collections import Counter, deque
from dataclasses import dataclass
from statistics import mean
from typing import Iterable, Sequence


@dataclass(frozen=True)
class Site:
    """One website: ``root`` hostname, causal ``edges`` (parent, child), trust ``groups``
    (each a tuple of hostnames) and optional ``connections`` (hostname -> number of TLS
    connections it needs, default 1)."""

    root: str
    edges: tuple[tuple[str, str], ...]
    groups: tuple[tuple[str, ...], ...] = ()
    connections: tuple[tuple[str, int], ...] = ()


@dataclass(frozen=True)
class Costs:
    """Per-handshake costs. ``full_ms``: delay of a full TLS 1.3 handshake incl. TCP and one
    request (ms, thesis Table 5.1: 29.17 at 0.3 ms latency); ``delta_ms``: delay saved by a
    resumed instead of a full handshake (ms; thesis eq. 5.3 lower bound Δ_1RTT = 22.83);
    ``full_cpu_ms`` / ``resumed_cpu_ms``: CPU time per peer of a full / resumed handshake
    (ms; thesis: 8 and 2, i.e. 6 ms saved per resumption); ``rtt_ms``: round-trip time
    (ms) for the round trips saved by shared address validation."""

    full_ms: float = 29.17
    delta_ms: float = 22.83
    full_cpu_ms: float = 8.0
    resumed_cpu_ms: float = 2.0
    rtt_ms: float = 60.0


@dataclass(frozen=True)
class SiteResult:
    """Per-site counts: handshakes without resumption / per-hostname / across hostnames, and
    the longest path of full handshakes without and with trust across hostnames."""

    site: str
    hostnames: int
    full_no_resumption: int
    full_per_hostname: int
    full_across: int
    longest_path_default: int
    longest_path_across: int


def _depths(root: str, edges: Sequence[tuple[str, str]]) -> tuple[dict[str, int], dict[str, list[str]]]:
    children: dict[str, list[str]] = {}
    for p, c in edges:
        if p != c:
            children.setdefault(p, []).append(c)
    depth = {root: 1}
    preds: dict[str, list[str]] = {root: []}
    q = deque([root])
    while q:
        u = q.popleft()
        for v in sorted(set(children.get(u, ()))):
            if v not in depth:
                depth[v] = depth[u] + 1
                preds[v] = [u]
                q.append(v)
            elif depth[v] == depth[u] + 1:
                preds[v].append(u)
    return depth, preds


def _group_of(nodes: Iterable[str], groups: Sequence[Sequence[str]]) -> dict[str, int]:
    """Union-find over the given groups restricted to ``nodes``; returns node -> group id."""
    parent: dict[str, str] = {n: n for n in nodes}

    def find(x: str) -> str:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for g in groups:
        members = [h for h in g if h in parent]
        for a, b in zip(members, members[1:]):
            ra, rb = find(a), find(b)
            if ra != rb:
                parent[max(ra, rb)] = min(ra, rb)
    roots = sorted({find(n) for n in parent})
    ids = {r: i for i, r in enumerate(roots)}
    return {n: ids[find(n)] for n in parent}


def simulate_site(site: Site) -> SiteResult:
    """Counts for one site (hostnames unreachable from the root are ignored)."""
    depth, preds = _depths(site.root, site.edges)
    group = _group_of(depth, site.groups)
    conns = dict(site.connections)
    min_depth_of_group: dict[int, int] = {}
    for h, d in depth.items():
        g = group[h]
        min_depth_of_group[g] = min(d, min_depth_of_group.get(g, d))
    full_on_path: dict[str, int] = {}
    for h in sorted(depth, key=lambda x: (depth[x], x)):
        needs_full = 0 if min_depth_of_group[group[h]] < depth[h] else 1
        best_pred = min((full_on_path[p] for p in preds[h]), default=0)
        full_on_path[h] = best_pred + needs_full
    return SiteResult(
        site=site.root, hostnames=len(depth),
        full_no_resumption=sum(max(1, int(conns.get(h, 1))) for h in depth),
        full_per_hostname=len(depth), full_across=len(set(group.values())),
        longest_path_default=max(depth.values()), longest_path_across=max(full_on_path.values()))


def _share(values: Sequence[int]) -> list[dict]:
    n = len(values)
    c = Counter(values)
    out, cum = [], 0
    for k in sorted(c):
        cum += c[k]
        out.append({"value": k, "sites": c[k], "share": c[k] / n, "cdf": cum / n})
    return out


def two_site_visits(sites: Sequence[Site], *, max_pairs: int = 100_000, seed: int = 1) -> dict:
    """Table 5.6: mean full handshakes to download two different websites in a row.
    Trust groups are global (merged across the two sites by shared hostnames); per-hostname
    resumption resumes a hostname both sites use. All unordered pairs, or a deterministic
    sample of ``max_pairs`` of them."""
    reach = []
    for s in sites:
        depth, _ = _depths(s.root, s.edges)
        reach.append((set(depth), [tuple(g) for g in s.groups], dict(s.connections)))
    pairs = list(itertools.combinations(range(len(sites)), 2))
    if len(pairs) > max_pairs:
        pairs = random.Random(seed).sample(pairs, max_pairs)
    if not pairs:
        return {"pairs": 0}
    no_res, per_host, across = [], [], []
    for i, j in pairs:
        (ni, gi, ci), (nj, gj, cj) = reach[i], reach[j]
        no_res.append(sum(max(1, int(ci.get(h, 1))) for h in ni) + sum(max(1, int(cj.get(h, 1))) for h in nj))
        union = ni | nj
        per_host.append(len(union))
        across.append(len(set(_group_of(union, gi + gj).values())))
    return {"pairs": len(pairs), "mean_full_no_resumption": mean(no_res),
            "mean_full_per_hostname": mean(per_host), "mean_full_across": mean(across)}


def tls_across_hostnames(sites: Sequence[Site], costs: Costs = Costs(), *, two_sites: bool = True,
                         max_pairs: int = 100_000) -> dict:
    """The thesis's ch. 5.4.4 simulation over ``sites``; see the module docstring."""
    if not sites:
        raise ValueError("no sites")
    rs = [simulate_site(s) for s in sites]
    m_no = mean(r.full_no_resumption for r in rs)
    m_ph = mean(r.full_per_hostname for r in rs)
    m_ac = mean(r.full_across for r in rs)
    lp_def = mean(r.longest_path_default for r in rs)
    lp_ac = mean(r.longest_path_across for r in rs)
    out = {
        "model": "tls-across-hostnames", "sites": len(rs),
        "mean_hostnames": mean(r.hostnames for r in rs),
        "mean_full_handshakes": {"no_resumption": m_no, "per_hostname_resumption": m_ph,
                                 "across_hostnames": m_ac},
        "mean_longest_path_full": {"no_resumption": lp_def, "per_hostname_resumption": lp_def,
                                   "across_hostnames": lp_ac},
        "distribution_full_handshakes": {"default": _share([r.full_per_hostname for r in rs]),
                                         "across_hostnames": _share([r.full_across for r in rs])},
        "distribution_longest_path": {"default": _share([r.longest_path_default for r in rs]),
                                      "across_hostnames": _share([r.longest_path_across for r in rs])},
        **savings(m_ph, m_ac, lp_def, lp_ac, costs),
        "costs": costs.__dict__,
        "per_site": [r.__dict__ for r in rs],
    }
    if two_sites and len(sites) > 1:
        out["two_site_visits"] = two_site_visits(sites, max_pairs=max_pairs)
    return out


def savings(mean_full_default: float, mean_full_across: float, lp_default: float, lp_across: float,
            costs: Costs = Costs()) -> dict:
    """Delay and CPU saved (thesis eq. 5.5 and the CPU paragraph of 5.4.4).

    Δ_connect = (lp_default - lp_across) · Δ; the connect time of the default is
    lp_default · full_ms; CPU saved per peer = converted handshakes · (full - resumed CPU),
    as a share of mean_full_default · full_cpu_ms."""
    converted = mean_full_default - mean_full_across
    resumed_on_path = lp_default - lp_across
    connect_default = lp_default * costs.full_ms
    delta_connect = resumed_on_path * costs.delta_ms
    cpu_saved = converted * (costs.full_cpu_ms - costs.resumed_cpu_ms)
    cpu_default = mean_full_default * costs.full_cpu_ms
    return {
        "converted_handshakes": converted,
        "share_full_handshakes_saved": converted / mean_full_default if mean_full_default else 0.0,
        "resumed_on_longest_path": resumed_on_path,
        "connect_time_default_ms": connect_default,
        "delta_connect_ms": delta_connect,
        "connect_time_gain": delta_connect / connect_default if connect_default else 0.0,
        "cpu_saved_per_peer_ms": cpu_saved,
        "cpu_saved_share": cpu_saved / cpu_default if cpu_default else 0.0,
    }


def shared_address_validation(sites: Sequence[Site], costs: Costs = Costs()) -> dict:
    """Thesis ch. 7.4 (Fig 7.3, 7.4): QUIC initial handshakes with Retry. Status quo: one
    per hostname; with a validation token shared inside a trust ("validation") group, one per
    group; each converted handshake saves one RTT; the path rule is the one above."""
    if not sites:
        raise ValueError("no sites")
    rs = [simulate_site(s) for s in sites]
    m_def = mean(r.full_per_hostname for r in rs)
    m_sh = mean(r.full_across for r in rs)
    lp_def = mean(r.longest_path_default for r in rs)
    lp_sh = mean(r.longest_path_across for r in rs)
    return {
        "model": "shared-address-validation", "sites": len(rs),
        "mean_retry_handshakes": {"status_quo": m_def, "shared_validation": m_sh},
        "mean_longest_path_retry": {"status_quo": lp_def, "shared_validation": lp_sh},
        "distribution_retry_handshakes": {"status_quo": _share([r.full_per_hostname for r in rs]),
                                          "shared_validation": _share([r.full_across for r in rs])},
        "distribution_longest_path": {"status_quo": _share([r.longest_path_default for r in rs]),
                                      "shared_validation": _share([r.longest_path_across for r in rs])},
        "round_trips_saved_total": m_def - m_sh,
        "delay_saved_until_all_connected_ms": (lp_def - lp_sh) * costs.rtt_ms,
        "rtt_ms": costs.rtt_ms,
        "per_site": [r.__dict__ for r in rs],
    }
