"""The page-load simulator's mechanisms (issue 25, item 5; analysis/models/pageload.py) on
small trees worked out by hand: each mechanism changes the predicted page load time by
exactly the round trips it should (RTT R = 1 s, zero-byte resources: no transfer time).
BLAST (Wang, NDSS 2020): ALPN sec. IV-B, pipelining sec. III-A, optimistic data / TFO /
0-RTT sec. V-C and V-D, prefetching database sec. V-C and V-D."""
from __future__ import annotations

from dataclasses import replace

import pytest

from analysis.models.pageload import (
    BLAST_BASELINE,
    FEATURE_STEPS,
    INDIVIDUAL_STEPS,
    Features,
    Page,
    PageOptions,
    Resource,
    Server,
    simulate_page,
)

pytestmark = pytest.mark.unit   # no database, no CLI subprocess, no testbed, no root


R = 1.0


def _page(children: dict, servers: dict, prefetch=(), sizes=None) -> Page:
    """children: parent id -> [child ids] (root "r0"); ``servers``: id -> server name (default
    a.test); ``prefetch``: ids in the prefetch database; ``sizes``: id -> bytes (default 0)."""
    parent = {c: p for p, cs in children.items() for c in cs}
    ids = ["r0"] + [c for cs in children.values() for c in cs]
    res = tuple(Resource(i, servers.get(i, "a.test"), (sizes or {}).get(i, 0), parent.get(i), prefetchable=i in prefetch)
                for i in ids)
    return Page("p", res, tuple(_SERVERS.values()))


_SERVERS = {"a.test": Server("a.test"), "h2.test": Server("h2.test", h2=True), "plain.test": Server("plain.test", tls=False)}


def plt(page: Page, **kw) -> float:
    opts = PageOptions(rtt_s=R, bandwidth_Bps=1e12, max_per_server=kw.pop("max_per_server", 6),
                       optimistic_rtt_share=kw.pop("share", 0.125), features=Features(**kw))
    return round(simulate_page(page, opts)["plt_s"], 6)


def test_optimistic_data_saves_the_connection_round_trip():
    """One resource on an HTTPS server: TCP R + TLS R + request R = 3R. Optimistic data sends
    the first flight with the connection set-up: what is left of the TCP round trip is the
    share (BLAST: 0.1 s of 0.8 s; 0 without a proxy)."""
    page = _page({}, {})
    assert plt(page) == 3 * R
    assert plt(page, optimistic_data=True, share=0.0) == 2 * R
    assert plt(page, optimistic_data=True) == pytest.approx(2.125 * R)
    # TFO alone does nothing for a first connection (no cookie yet)
    assert plt(page, tfo=True) == 3 * R


def test_tfo_zero_rtt_and_optimistic_on_second_connections():
    """r0 and three children on a.test (TLS 1.3, HTTP/1.1). Baseline: r0 at 3R; c1 on the
    idle connection (4R), c2 after it (5R), two new connections ready at 5R: c3 at 6R.
    TFO or 0-RTT: the new connections cost 1 RTT less (ready 4R): c2, c3 at 5R. Both: ready
    at 3R, c2 and c3 at 4R. Optimistic data (share 0) on top of the baseline: r0 at 2R, the
    new connections ready at 3R (1 RTT shorter too): c2, c3 at 4R, 2 RTT saved."""
    page = _page({"r0": ["c1", "c2", "c3"]}, {})
    assert plt(page) == 6 * R
    assert plt(page, tfo=True) == 5 * R
    assert plt(page, zero_rtt=True) == 5 * R
    assert plt(page, tfo=True, zero_rtt=True) == 4 * R
    assert plt(page, optimistic_data=True, share=0.0) == 4 * R
    r = simulate_page(page, PageOptions(rtt_s=R, bandwidth_Bps=1e12, features=Features(tfo=True)))
    assert (r["connections"], r["tfo_connections"]) == (3, 2)


def test_tfo_on_plain_http():
    """plain.test (no TLS): r0 at 2R; c1 on its connection at 3R; c2's new connection ready
    at 3R (TFO: at 2R, c2 done 3R): the page ends 1 RTT earlier."""
    page = _page({"r0": ["c1", "c2"]}, {"r0": "plain.test", "c1": "plain.test", "c2": "plain.test"})
    assert plt(page) == 4 * R
    assert plt(page, tfo=True) == 3 * R


def test_alpn_round_trip_and_the_http2_database():
    """r0 on a.test (HTTP/1.1), seven children on h2.test (HTTP/2). r0 at 3R; six connections
    to h2.test ready at 5R. ALPN in the handshake: HTTP/2 at 5R, all seven at 6R. With
    BLAST's extra ALPN round trip the connections carry one HTTP/1.1 request each until 6R:
    six done at 6R, the seventh multiplexed at 6R, done 7R. The HTTP/2 database removes it."""
    kids = [f"c{i}" for i in range(1, 8)]
    page = _page({"r0": kids}, {k: "h2.test" for k in kids})
    assert plt(page) == 6 * R
    assert plt(page, alpn_rtt=True) == 7 * R
    assert plt(page, alpn_rtt=True, h2_db=True) == 6 * R
    # one connection allowed: c1 as HTTP/1.1 (6R), then c2..c7 multiplexed once ALPN ends (7R)
    assert plt(page, alpn_rtt=True, max_per_server=1) == 7 * R
    assert plt(page, max_per_server=1) == 6 * R


def test_pipelining_saves_round_trips_and_blocks_the_head_of_line():
    """r0 and twelve children on a.test (HTTP/1.1, 6 connections). Without pipelining: c1 at
    4R on the first connection, c2 at 5R; five more connections ready at 5R take c3..c8 (6R),
    then c9..c12 (7R). Pipelining 6 deep: c1..c6 on the first connection at 3R (done 4R),
    c7..c12 on it at 4R (done 5R): 2 RTT saved."""
    kids = [f"c{i}" for i in range(1, 13)]
    page = _page({"r0": kids}, {})
    assert plt(page) == 7 * R
    assert plt(page, pipeline_depth=6) == 5 * R
    assert plt(page, pipeline_depth=12) == 4 * R
    # head-of-line: two pipelined responses of t = 1 s each come in order (both sent at 3R:
    # c1 ends 3R + R + t, c2 R + 2t after its dispatch); on HTTP/2 side by side (each R + t)
    page = _page({"r0": ["c1", "c2"]}, {}, sizes={"c1": 10**12, "c2": 10**12})
    assert plt(page, pipeline_depth=2) == 4 * R + 2
    assert plt(page) == 5 * R + 2     # no pipelining: c2 on a second connection ready at 5R
    page2 = _page({"r0": ["c1", "c2"]}, {"r0": "h2.test", "c1": "h2.test", "c2": "h2.test"},
                  sizes={"c1": 10**12, "c2": 10**12})
    assert plt(page2) == 4 * R + 1
    # pipelining never applies to HTTP/2 connections
    assert plt(page2, pipeline_depth=6) == 4 * R + 1


def test_prefetch_database_marks_only_what_it_knows():
    """Chain r0 -> r1 -> r2 on a.test: 3R, 4R, 5R. Only r2 in the database: created at 0 on
    a second connection, done 3R; r1 still waits for r0 (4R): 1 RTT saved, not the 2 that
    prefetching everything (3R) would save."""
    chain = {"r0": ["r1"], "r1": ["r2"]}
    assert plt(_page(chain, {}), prefetch_db=True) == 5 * R        # nothing marked: nothing prefetched
    assert plt(_page(chain, {}, prefetch={"r2"}), prefetch_db=True) == 4 * R
    assert plt(_page(chain, {}, prefetch={"r1", "r2"}), prefetch_db=True) == 3 * R
    assert plt(_page(chain, {}, prefetch={"r1", "r2"})) == 5 * R   # marked, database off


def test_steps_follow_blast_order():
    assert [n for n, _ in FEATURE_STEPS] == ["baseline", "tfo", "optimistic_data", "zero_rtt", "across_hostnames",
                                            "redirect_db", "h2_db", "prefetch_db"]
    assert FEATURE_STEPS[0][1] == BLAST_BASELINE and BLAST_BASELINE.alpn_rtt
    last = FEATURE_STEPS[-1][1]
    assert last == replace(BLAST_BASELINE, tfo=True, optimistic_data=True, zero_rtt=True, across_hostnames=True,
                           redirect_db=True, h2_db=True, prefetch_db=True)
    ind = dict(INDIVIDUAL_STEPS)
    assert ind["pipelining"].pipeline_depth == 6 and ind["alpn_in_handshake"] == Features()


def test_parse_time_delays_each_tree_level():
    """Chain r0 -> r1 -> r2 on a.test: each child is created parse_s after its parent ended
    (3R, 4R + p, 5R + 2p); a redirect hands over without parsing."""
    chain = _page({"r0": ["r1"], "r1": ["r2"]}, {})
    opts = PageOptions(rtt_s=R, bandwidth_Bps=1e12, parse_s=0.25)
    assert simulate_page(chain, opts)["plt_s"] == pytest.approx(5 * R + 0.5)
    red = Page("p", (Resource("r0", "a.test", 0, None, redirect=True), Resource("r1", "a.test", 0, "r0")),
               tuple(_SERVERS.values()))
    assert simulate_page(red, opts)["plt_s"] == pytest.approx(4 * R)
