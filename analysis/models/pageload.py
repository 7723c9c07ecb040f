"""Event-driven page-load simulator after BLAST (Wang, NDSS 2020, sec. V-B and appendix C).

Input per page: the resource tree (id, size in bytes, parent, server), per-server flags
(TLS and its version, HTTP/2, trust group), the RTT and a constant per-resource bandwidth.
Rules (BLAST's, simplified as the paper does: no randomness, no congestion control):

- The root resource is created at t = 0; a resource's children are created when it
  completes (parsing time 0). Created resources wait in their server's FIFO queue.
- "Dispatch all": an idle ready connection takes the queue head (HTTP/1.1: one request at
  a time, no pipelining); an HTTP/2 connection whose ALPN finished takes every waiting
  request. New connections are opened while a server has more waiting requests than
  connections being established, up to ``max_per_server`` (and ``max_total``); once a
  server is known to speak HTTP/2 (ALPN finished, or the HTTP/2 database) only one
  connection is kept to it.
- A new connection costs 1 RTT for TCP (0 with TCP Fast Open once an earlier connection to
  the server finished its TCP handshake: the cookie is cached), then for HTTPS 1 RTT for
  TLS 1.3 or 2 for TLS 1.2 (0 with 0-RTT resumption once an earlier TLS handshake to the
  server - or, with resumption across hostnames, to a server of its trust group - finished).
- A request costs 1 RTT plus size / bandwidth.
- Redirect database: a resource marked ``redirect`` costs nothing (its children are
  created at once). Prefetch database: every resource marked ``prefetchable`` is created at
  t = 0 instead of after its parent.

Page load time (BLAST): the time by which 95% of the resources completed; ``finish_s`` is
the completion of the last one.
"""
from __future__ import annotations

import heapq
import math
from dataclasses import dataclass, replace
from statistics import mean
from typing import Optional, Sequence


@dataclass(frozen=True)
class Resource:
    """One resource: ``id``, ``server`` hostname, ``size`` (bytes), ``parent`` id (None for
    the root), ``redirect`` (an HTTP redirect to its children), ``prefetchable`` (in the
    prefetch database)."""

    id: str
    server: str
    size: int
    parent: Optional[str] = None
    redirect: bool = False
    prefetchable: bool = True


@dataclass(frozen=True)
class Server:
    """``tls``: HTTPS; ``tls_version``: "1.2" (2-RTT handshake) or "1.3" (1 RTT); ``h2``:
    speaks HTTP/2 (learnt by ALPN at the end of the TLS handshake); ``group``: trust group
    for resumption across hostnames (None: its own)."""

    name: str
    tls: bool = True
    tls_version: str = "1.3"
    h2: bool = False
    group: Optional[str] = None


@dataclass(frozen=True)
class Features:
    """Feature switches (all off = today's browser): TCP Fast Open, TLS 0-RTT resumption,
    resumption across hostnames (needs ``zero_rtt``), redirect / prefetch / HTTP/2 databases."""

    tfo: bool = False
    zero_rtt: bool = False
    across_hostnames: bool = False
    redirect_db: bool = False
    prefetch_db: bool = False
    h2_db: bool = False


@dataclass(frozen=True)
class PageOptions:
    """``rtt_s``: round-trip time (s); ``bandwidth_Bps``: per-resource bandwidth (bytes/s);
    ``max_per_server`` / ``max_total``: browser connection limits (Firefox: 6 / 256)."""

    rtt_s: float = 0.06
    bandwidth_Bps: float = 1_000_000.0
    max_per_server: int = 6
    max_total: int = 256
    features: Features = Features()


@dataclass(frozen=True)
class Page:
    """A page to simulate; ``recorded_plt_s`` is the logger's measured page load time (s)."""

    name: str
    resources: tuple[Resource, ...]
    servers: tuple[Server, ...]
    recorded_plt_s: Optional[float] = None


@dataclass
class _Conn:
    server: str
    tcp_done: float
    ready: float
    h2: bool
    busy: bool = False


def simulate_page(page: Page, opts: PageOptions = PageOptions()) -> dict:
    """Simulate one page load; returns per-resource times and the page load time."""
    f = opts.features
    servers = {s.name: s for s in page.servers}
    res = {r.id: r for r in page.resources}
    children: dict[Optional[str], list[str]] = {}
    for r in page.resources:
        if r.server not in servers:
            servers[r.server] = Server(r.server)
        if r.parent is not None and r.parent not in res:
            raise ValueError(f"resource {r.id}: unknown parent {r.parent}")
        children.setdefault(r.parent, []).append(r.id)
    roots = children.get(None, [])
    if len(roots) != 1:
        raise ValueError(f"page {page.name}: expected exactly one root resource, got {len(roots)}")

    events: list = []
    seq = 0

    def push(t: float, kind: str, arg) -> None:
        nonlocal seq
        heapq.heappush(events, (t, seq, kind, arg))
        seq += 1

    queues: dict[str, list[str]] = {s: [] for s in servers}
    conns: dict[str, list[_Conn]] = {s: [] for s in servers}
    tcp_done_at: dict[str, float] = {}
    tls_done_at: dict[str, float] = {}
    h2_known: set[str] = {s for s, v in servers.items() if f.h2_db and v.h2 and v.tls}
    created: dict[str, float] = {}
    started: dict[str, float] = {}
    done: dict[str, float] = {}
    n_conns = {"total": 0, "tfo": 0, "zero_rtt": 0}
    # integer nanoseconds: simultaneous events tie exactly (no float drift decides the order)
    rtt = round(opts.rtt_s * 1e9)
    bw = opts.bandwidth_Bps

    def transfer(size: int) -> int:
        return round(size * 1e9 / bw)

    def group(s: str) -> str:
        return servers[s].group or s

    def open_conn(s: str, now: float) -> None:
        srv = servers[s]
        tcp = 0 if f.tfo and tcp_done_at.get(s, math.inf) <= now else 1
        tls = 0
        if srv.tls:
            cached = tls_done_at.get(s, math.inf) <= now
            if f.across_hostnames:
                cached = cached or any(t <= now for o, t in tls_done_at.items() if group(o) == group(s))
            tls = 0 if f.zero_rtt and cached else (1 if srv.tls_version == "1.3" else 2)
        c = _Conn(s, now + tcp * rtt, now + (tcp + tls) * rtt, h2=False)
        conns[s].append(c)
        n_conns["total"] += 1
        n_conns["tfo"] += tcp == 0
        n_conns["zero_rtt"] += srv.tls and tls == 0
        push(c.tcp_done, "tcp", c)
        push(c.ready, "ready", c)

    def start(rid: str, c: _Conn, now: float) -> None:
        started[rid] = now
        push(now + rtt + transfer(res[rid].size), "complete", rid)

    def dispatch_all(now: float) -> None:
        for s, q in queues.items():
            if not q:
                continue
            for c in conns[s]:
                if c.ready > now:
                    continue
                if c.h2:
                    while q:
                        start(q.pop(0), c, now)
                elif not c.busy and q:
                    c.busy = True
                    rid = q.pop(0)
                    start(rid, c, now)
                    res_conn[rid] = c
            if not q:
                continue
            establishing = sum(c.ready > now for c in conns[s])
            if s in h2_known:
                if not conns[s]:
                    open_conn(s, now)
                continue
            while (len(q) > establishing and len(conns[s]) < opts.max_per_server
                   and n_conns["total"] < opts.max_total):
                open_conn(s, now)
                establishing += 1

    res_conn: dict[str, _Conn] = {}

    def create(rid: str, now: float) -> None:
        if rid in created:
            return
        created[rid] = now
        if f.redirect_db and res[rid].redirect:
            push(now, "complete", rid)
        else:
            queues[res[rid].server].append(rid)

    def handle(kind: str, arg, now: int) -> None:
        if kind == "tcp":
            tcp_done_at[arg.server] = min(tcp_done_at.get(arg.server, math.inf), now)
        elif kind == "ready":
            srv = servers[arg.server]
            if srv.tls:
                tls_done_at[arg.server] = min(tls_done_at.get(arg.server, math.inf), now)
                if srv.h2:
                    arg.h2 = True
                    h2_known.add(arg.server)
        elif kind == "complete":
            done[arg] = now
            c = res_conn.pop(arg, None)
            if c is not None:
                c.busy = False
            for ch in children.get(arg, ()):
                create(ch, now)

    create(roots[0], 0)
    if f.prefetch_db:
        for r in page.resources:
            if r.prefetchable:
                create(r.id, 0)
    dispatch_all(0)
    while events:
        now = events[0][0]
        # apply every event of this instant, then dispatch once
        while events and events[0][0] == now:
            _, _, kind, arg = heapq.heappop(events)
            handle(kind, arg, now)
        dispatch_all(now)
    if len(done) != len(res):
        raise RuntimeError(f"page {page.name}: {len(res) - len(done)} resources never loaded")
    times = sorted(done.values())
    k = max(1, math.ceil(0.95 * len(times)))
    return {"page": page.name, "resources": len(times), "plt_s": times[k - 1] / 1e9, "finish_s": times[-1] / 1e9,
            "connections": n_conns["total"], "tfo_connections": n_conns["tfo"],
            "zero_rtt_connections": n_conns["zero_rtt"],
            "mean_resource_load_s": mean(done[r] - created[r] for r in done) / 1e9,
            "recorded_plt_s": page.recorded_plt_s}


def pearson(xs: Sequence[float], ys: Sequence[float]) -> Optional[float]:
    """Pearson correlation coefficient (None if fewer than 2 points or no variance)."""
    if len(xs) < 2:
        return None
    mx, my = mean(xs), mean(ys)
    sxy = sum((x - mx) * (y - my) for x, y in zip(xs, ys))
    sxx = sum((x - mx) ** 2 for x in xs)
    syy = sum((y - my) ** 2 for y in ys)
    return sxy / math.sqrt(sxx * syy) if sxx > 0 and syy > 0 else None


#: Cumulative feature set of BLAST's Fig 6 (each adds to the previous one).
FEATURE_STEPS = [("baseline", Features()), ("tfo", Features(tfo=True)),
                 ("zero_rtt", Features(tfo=True, zero_rtt=True)),
                 ("across_hostnames", Features(tfo=True, zero_rtt=True, across_hostnames=True)),
                 ("redirect_db", Features(tfo=True, zero_rtt=True, across_hostnames=True, redirect_db=True)),
                 ("h2_db", Features(tfo=True, zero_rtt=True, across_hostnames=True, redirect_db=True, h2_db=True)),
                 ("prefetch_db", Features(tfo=True, zero_rtt=True, across_hostnames=True, redirect_db=True,
                                          h2_db=True, prefetch_db=True))]


def pageload(pages: Sequence[Page], opts: PageOptions = PageOptions(), *, feature_steps: bool = True) -> dict:
    """Simulate every page with ``opts``; with ``feature_steps`` also the cumulative feature
    sets (BLAST Fig 6a); validation: correlation of simulated and recorded load times."""
    if not pages:
        raise ValueError("no pages")
    sims = [simulate_page(p, opts) for p in pages]
    rec = [(s["plt_s"], s["recorded_plt_s"]) for s in sims if s["recorded_plt_s"] is not None]
    out = {"model": "pageload", "pages": len(sims), "rtt_s": opts.rtt_s, "bandwidth_Bps": opts.bandwidth_Bps,
           "features": opts.features.__dict__, "mean_plt_s": mean(s["plt_s"] for s in sims),
           "validation": {"pages_with_recorded_plt": len(rec),
                          "mean_recorded_plt_s": mean(r for _, r in rec) if rec else None,
                          "mean_simulated_plt_s": mean(s for s, _ in rec) if rec else None,
                          "pearson_r": pearson([s for s, _ in rec], [r for _, r in rec])},
           "per_page": sims}
    if feature_steps:
        steps = []
        for name, feats in FEATURE_STEPS:
            o = replace(opts, features=feats)
            steps.append({"step": name, "mean_plt_s": mean(simulate_page(p, o)["plt_s"] for p in pages)})
        out["cumulative_features"] = steps
    return out
