"""Event-driven page-load simulator after BLAST (Wang, NDSS 2020, sec. V-B and appendix C).

Input per page: the resource tree (id, size in bytes, parent, server), per-server flags
(TLS and its version, HTTP/2, trust group), the RTT and a constant per-resource bandwidth.
Rules (BLAST's, simplified as the paper does: no randomness, no congestion control):

- The root resource is created at t = 0; a resource's children are created when it
  completes (parsing time 0). Created resources wait in their server's FIFO queue.
- "Dispatch all" (appendix C-1, the order of BLAST's Sim-http2.py ``TryDispatchTrans``): a
  request goes (0) onto the server's HTTP/2 connection, else (1) with pipelining onto the
  shortest pipeline that is not full, else (2) onto an idle ready connection; else a new
  connection is opened while a server has more waiting requests than connections being
  established, up to ``max_per_server`` (and ``max_total``); once a server is known to
  speak HTTP/2 (ALPN finished, or the HTTP/2 database) only one connection is kept to it.
- A new connection costs 1 RTT for TCP (0 with TCP Fast Open once an earlier connection to
  the server finished its TCP handshake: the cookie is cached; ``optimistic_rtt_share`` of
  an RTT with optimistic data), then for HTTPS 1 RTT for TLS 1.3 or 2 for TLS 1.2 (0 with
  0-RTT resumption once an earlier TLS handshake to the server - or, with resumption across
  hostnames, to a server of its trust group - finished).
- ALPN: off (``alpn_rtt`` False, today's browsers) HTTP/2 is usable when the TLS handshake
  ends (RFC 7301 sec. 3: ALPN rides in the handshake). On (BLAST sec. IV-B, Tor Browser
  8.5): a connection to an HTTP/2 server turns HTTP/2 one RTT after its TLS handshake and
  carries HTTP/1.1 without pipelining until then; the HTTP/2 database removes that RTT
  (sec. V-C; Sim-http2.py ``HAS_FASTHTTP2``).
- A request costs 1 RTT plus size / bandwidth. HTTP/1.1 pipelining (``pipeline_depth`` > 1,
  sec. III-A) puts up to that many requests on one HTTP/1.1 connection; responses come in
  order, so a pipelined response starts when the one before it ended (head-of-line
  blocking: complete = max(dispatch + RTT, previous end) + size / bandwidth, as BLAST's
  ``Trans Ready`` event does with ``conn.freetime``).
- Redirect database: a resource marked ``redirect`` costs nothing (its children are
  created at once). Prefetch database: a resource marked ``prefetchable`` is created at
  t = 0 instead of after its parent. Only resources known to be stable are marked (BLAST
  sec. V-D: those in >= 90% of a page's instances; see analysis/models/inputs.py
  ``pages_db``); the default is not prefetchable.

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
    prefetchable: bool = False


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
    """Switches (all off = today's Chromium / Firefox: ALPN in the TLS handshake, no
    pipelining): TCP Fast Open, TLS 0-RTT resumption, resumption across hostnames (needs
    ``zero_rtt``), redirect / prefetch / HTTP/2 databases, optimistic data (BLAST sec. V-C:
    the first flight rides on the connection set-up), the extra ALPN round trip of Tor
    Browser 8.5 (sec. IV-B; BLAST's baseline) and HTTP/1.1 pipelining (depth; 1 = none)."""

    tfo: bool = False
    zero_rtt: bool = False
    across_hostnames: bool = False
    redirect_db: bool = False
    prefetch_db: bool = False
    h2_db: bool = False
    optimistic_data: bool = False
    alpn_rtt: bool = False
    pipeline_depth: int = 1


@dataclass(frozen=True)
class PageOptions:
    """``rtt_s``: round-trip time (s); ``bandwidth_Bps``: per-resource bandwidth (bytes/s);
    ``max_per_server`` / ``max_total``: browser connection limits (Firefox: 6 / 256);
    ``optimistic_rtt_share``: what is left of the connection set-up round trip with
    optimistic data, as a share of the RTT (BLAST sec. V-D: 0.1 s, the Tor exit to server
    round trip, at its RTT of 0.8 s = 0.125; 0 = no proxy: the first flight rides on the SYN);
    ``parse_s``: from a resource's completion to its children's creation (BLAST: 0, parsing
    time neglected; appendix C-2 puts parsing under 0.05 s. Redirects take none)."""

    rtt_s: float = 0.06
    bandwidth_Bps: float = 1_000_000.0
    max_per_server: int = 6
    max_total: int = 256
    optimistic_rtt_share: float = 0.125
    parse_s: float = 0.0
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
    inflight: int = 0        # requests sent and not completed (HTTP/1.1: 1, or up to the pipeline depth)
    free_at: int = 0         # HTTP/1.1: when the last response on it ends (in-order responses)


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
    n_conns = {"total": 0, "tfo": 0, "zero_rtt": 0, "optimistic": 0}
    # integer nanoseconds: simultaneous events tie exactly (no float drift decides the order)
    rtt = round(opts.rtt_s * 1e9)
    parse = round(opts.parse_s * 1e9)
    bw = opts.bandwidth_Bps

    def transfer(size: int) -> int:
        return round(size * 1e9 / bw)

    def group(s: str) -> str:
        return servers[s].group or s

    def open_conn(s: str, now: float) -> None:
        srv = servers[s]
        if f.tfo and tcp_done_at.get(s, math.inf) <= now:
            tcp = 0
        elif f.optimistic_data:
            tcp = opts.optimistic_rtt_share
        else:
            tcp = 1
        tls = 0
        if srv.tls:
            cached = tls_done_at.get(s, math.inf) <= now
            if f.across_hostnames:
                cached = cached or any(t <= now for o, t in tls_done_at.items() if group(o) == group(s))
            tls = 0 if f.zero_rtt and cached else (1 if srv.tls_version == "1.3" else 2)
        c = _Conn(s, now + round(tcp * rtt), now + round(tcp * rtt) + tls * rtt, h2=False)
        conns[s].append(c)
        n_conns["total"] += 1
        n_conns["tfo"] += tcp == 0
        n_conns["optimistic"] += tcp != 0 and f.optimistic_data
        n_conns["zero_rtt"] += srv.tls and tls == 0
        push(c.tcp_done, "tcp", c)
        push(c.ready, "ready", c)

    depth = max(1, f.pipeline_depth)

    def start(rid: str, c: _Conn, now: int) -> None:
        started[rid] = now
        end = now + rtt
        if not c.h2:        # HTTP/1.1: responses in order on the connection
            end = max(end, c.free_at)
        end += transfer(res[rid].size)
        if not c.h2:
            c.free_at = end
            c.inflight += 1
            res_conn[rid] = c
        push(end, "complete", rid)

    def dispatch_all(now: int) -> None:
        for s, q in queues.items():
            if not q:
                continue
            ready = [c for c in conns[s] if c.ready <= now]
            for c in ready:                      # (0) HTTP/2 takes every waiting request
                if c.h2:
                    while q:
                        start(q.pop(0), c, now)
            while q:
                h1 = [c for c in ready if not c.h2]
                # (1) the shortest pipeline that is not full, (2) an idle connection
                piped = [c for c in h1 if 0 < c.inflight < depth]
                idle = [c for c in h1 if c.inflight == 0]
                c = min(piped, key=lambda x: x.inflight) if piped else (idle[0] if idle else None)
                if c is None:
                    break
                start(q.pop(0), c, now)
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
                    if f.alpn_rtt and not f.h2_db:
                        push(now + rtt, "alpn", arg)   # BLAST sec. IV-B: HTTP/2 one RTT later
                    else:
                        arg.h2 = True
                        h2_known.add(arg.server)
        elif kind == "alpn":
            arg.h2 = True
            h2_known.add(arg.server)
        elif kind == "complete":
            done[arg] = now
            c = res_conn.pop(arg, None)
            if c is not None:
                c.inflight -= 1
            for ch in children.get(arg, ()):
                if parse and not res[arg].redirect:
                    push(now + parse, "create", ch)
                else:
                    create(ch, now)
        elif kind == "create":
            create(arg, now)

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
            "zero_rtt_connections": n_conns["zero_rtt"], "optimistic_connections": n_conns["optimistic"],
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


#: BLAST's baseline browser (sec. V-D, step 1: Tor Browser 8.5 with HTTP/2): ALPN one round
#: trip after the TLS handshake (sec. IV-B), no pipelining.
BLAST_BASELINE = Features(alpn_rtt=True)


def _cumulative() -> list[tuple[str, Features]]:
    """BLAST's Fig 6 steps in its order (sec. V-D: 1 baseline, 2 TFO, 3 optimistic data,
    4 0-RTT TLS, 5 redirection, 6 HTTP/2 and 7 prefetching databases), each on top of the
    ones before; resumption across hostnames (the thesis's, not BLAST's) after 0-RTT."""
    steps, cur = [("baseline", BLAST_BASELINE)], BLAST_BASELINE
    for name in ("tfo", "optimistic_data", "zero_rtt", "across_hostnames", "redirect_db", "h2_db", "prefetch_db"):
        cur = replace(cur, **{name: True})
        steps.append((name, cur))
    return steps


#: Cumulative feature set of BLAST's Fig 6 (each adds to the previous one).
FEATURE_STEPS = _cumulative()

#: One at a time on BLAST's baseline (Fig 6 b, d); resumption across hostnames needs 0-RTT.
#: Two browser mechanisms besides BLAST's six features: HTTP/1.1 pipelining 6 deep on every
#: HTTP/1.1 connection (BLAST's ``pipeline`` set-up, sec. III: 6 connections x depth 6) and
#: ALPN inside the TLS handshake (today's Chromium and Firefox: no extra round trip).
INDIVIDUAL_STEPS = [("baseline", BLAST_BASELINE)] + [
    (name, replace(BLAST_BASELINE, **kw)) for name, kw in (
        ("tfo", {"tfo": True}), ("optimistic_data", {"optimistic_data": True}), ("zero_rtt", {"zero_rtt": True}),
        ("across_hostnames", {"zero_rtt": True, "across_hostnames": True}), ("redirect_db", {"redirect_db": True}),
        ("h2_db", {"h2_db": True}), ("prefetch_db", {"prefetch_db": True}),
        ("pipelining", {"pipeline_depth": 6}), ("alpn_in_handshake", {"alpn_rtt": False}))]


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
