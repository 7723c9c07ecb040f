"""The thesis's published values (analysis/thesis_reference.py): every entry names a
registered figure and quotes a sentence that really is in the thesis text, with the number
it claims; every figure either has values or says why the thesis publishes none; and a
rendered figure shows the values on the figure, in NAME-thesis.csv and in table columns."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from analysis.figures import load_all
from analysis.thesis_reference import MODEL_COMPARED, NOT_PUBLISHED, REFERENCES, for_figure
from support.figures import _csv, _key_run, _plot, _tfo_run

THESIS = Path("/work/shared/seeds/004_3801537972db3902.txt")
WORDS = {"twelve": "12"}


def _norm(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip()


def test_every_entry_names_a_figure_and_states_its_number():
    specs = load_all()
    keys = [(r.figure, r.key) for r in REFERENCES]
    assert len(keys) == len(set(keys))
    for r in REFERENCES:
        assert r.figure in specs, r
        assert r.quote and r.where and r.unit and r.what
        quote = re.sub(r"(\d) (\d{3})\b", r"\1\2", r.quote.replace("97,13", "97.13"))
        for word, digits in WORDS.items():
            quote = quote.replace(word, digits)
        assert f"{r.value:g}" in quote, f"{r.key}: {r.value:g} not in the quoted sentence {r.quote!r}"
        assert r.stat in {"share_lt", "share_le", "share_gt", "share_ge", "share_eq", "share_null", "quantile",
                          "max", "mean", "at", "count"}
        assert r.qualifier in {"", "~", ">", ">=", "<", "<="}
    # every registered figure either carries values or says why the thesis gives none
    with_values = {r.figure for r in REFERENCES}
    assert set(specs) <= with_values | set(NOT_PUBLISHED) | set(MODEL_COMPARED)
    assert not with_values & (set(NOT_PUBLISHED) | set(MODEL_COMPARED)) and not set(NOT_PUBLISHED) & set(MODEL_COMPARED)
    assert (set(NOT_PUBLISHED) | set(MODEL_COMPARED)) <= set(specs)
    # the values the issue names are there
    for name in ("tfo-support-table", "atlas-resolver-rtt", "dns-ttl-cdf", "tls-support", "tls-lifetime-hint",
                 "tls-lifetime-hint-tail", "tls-lifetime-measured", "tls-shared-groups", "tls-key-rotation",
                 "quic-support", "tls-shared-table"):
        assert for_figure(name), name


@pytest.mark.skipif(not THESIS.exists(), reason="thesis text not on this machine (clean CI clone)")
def test_quotes_occur_in_the_thesis_text():
    text = _norm(THESIS.read_text())
    missing = [r.key for r in REFERENCES if _norm(r.quote) not in text]
    assert not missing, missing


def test_rendered_figures_show_the_thesis_values(db, tmp_path):
    with db.connect() as conn:
        tfo = _tfo_run(conn, 22, {1, 2, 3, 15})
        tls = _key_run(conn, {"a.test": 100.0, "b.test": 400000.0})
    out = _plot(db, "tfo-support-table", tmp_path / "t", tfo)
    rows = {r["top_list"]: r for r in _csv(tmp_path / "t" / "tfo-support-table.csv")}
    assert rows["Top 10"]["thesis_tfo_share_percent"] == "60.0"      # Table 3.1 beside ours (30 %)
    assert rows["all 22"]["thesis_tfo_share_percent"] == ""          # 22 names are not the Top 100
    tex = (tmp_path / "t" / "tfo-support-table.tex").read_text()
    assert "thesis\\_tfo\\_share\\_percent" in tex and "Top 10 & 10 & 10 & 0 & 10 & 0 & 3 & 30 & 60 \\\\" in tex
    ref = {r["key"]: r for r in _csv(tmp_path / "t" / "tfo-support-table-thesis.csv")}
    assert ref["tfo_share_top_10"]["drawn"] == "marker" and float(ref["tfo_share_top_10"]["ours"]) == 30.0
    assert ref["tfo_share_top_100"]["drawn"] == "legend" and ref["tfo_share_top_100"]["ours"] == ""
    assert ref["tfo_share_top_10"]["where"] == "Sec 3.2.2, Table 3.1"
    svg = (tmp_path / "t" / "tfo-support-table.svg").read_text()
    assert "thesis: hostnames with TFO support in Alexa Top 10: 60% (Sec 3.2.2, Table 3.1)" in svg
    assert "testbed (nstb-vantage)" in svg                           # provenance footnote kept
    cmp = {c["quantity"]: c for c in out["notes"]["compare"]}
    assert cmp["hostnames with TFO support in Alexa Top 10"]["thesis"] == "60% (Sec 3.2.2, Table 3.1)"
    assert cmp["hostnames with TFO support in Alexa Top 10"]["ours"] == 30.0

    # a CDF: Fig 4.10's 73 % within three days as a star at (259200 s, 0.73), ours from the data
    _plot(db, "tls-key-rotation", tmp_path / "k", tls)
    ref = {r["key"]: r for r in _csv(tmp_path / "k" / "tls-key-rotation-thesis.csv")}
    assert ref["share_stek_le_3d"]["drawn"] == "marker" and float(ref["share_stek_le_3d"]["ours"]) == 50.0
    assert float(ref["share_stek_gt_2w"]["ours"]) == 0.0
    svg = (tmp_path / "k" / "tls-key-rotation.svg").read_text()
    assert "thesis: ticket sites changing their STEK within 3 days (259200 s): 73%" in svg and "Fig 4.10)" in svg


def test_report_states_thesis_values_or_why_none():
    from analysis.report import _thesis_only

    assert "none published" in _thesis_only("browser-plt-cdf") and "BLAST" in _thesis_only("browser-plt-cdf")
    assert "compared by the model itself" in _thesis_only("tfo-revisits-table")
    html = _thesis_only("dns-ttl-cdf")          # e.g. a section without data still shows the thesis's values
    assert "none published" not in html and "40.2%" in html and "Sec 2.4.2, Fig 2.5" in html


def _fill(conn) -> dict[str, int]:
    """Small runs for the DNS, TLS and QUIC figures (SQL only, .test names, testbed addresses)."""
    from support.figures import _run

    runs = {k: _run(conn, k) for k in ("dns-ttl", "dns-ecs", "tls", "tls-lifetime", "tls-shared", "quic-discover",
                                           "tfo-lb", "quic-turnover", "atlas")}
    # four probes in AS 64500; resolver .1 in the same AS, .2 in another
    conn.execute("INSERT INTO atlas_asn (run_id, address, asn) VALUES (%(r)s, '198.18.8.1', 64500),"
                 " (%(r)s, '198.18.8.2', 64501)", {"r": runs["atlas"]})
    for prb, (resolver, rtt) in enumerate([(".1", 5.0), (".1", 20.0), (".2", 8.0), (".2", 30.0)], start=1):
        conn.execute("INSERT INTO atlas_probe (run_id, prb_id, address_v4) VALUES (%s, %s, %s)",
                     (runs["atlas"], prb, f"198.18.7.{prb}"))
        conn.execute("INSERT INTO atlas_asn (run_id, address, asn) VALUES (%s, %s, 64500)",
                     (runs["atlas"], f"198.18.7.{prb}"))
        conn.execute("INSERT INTO atlas_ping (run_id, msm_id, prb_id, ts, role, af, dst_addr, sent, rcvd, avg_ms)"
                     " VALUES (%s, 1, %s, 0, 'ping-egress-resolver', 4, %s, 3, 3, %s)",
                     (runs["atlas"], prb, "198.18.8" + resolver, rtt))
    # three connections each: x.test always TFO on two addresses, y.test on one, z.test only once
    for host, addrs, cookies in [("x", ["198.18.3.1", "198.18.3.2", "198.18.3.1"], [1, 1, 1]),
                                 ("y", ["198.18.3.3"] * 3, [1, 1, 1]), ("z", ["198.18.3.4"] * 3, [1, 0, 0])]:
        for rnd, (addr, c) in enumerate(zip(addrs, cookies), start=1):
            conn.execute("INSERT INTO tfo_probe (run_id, round, rank, hostname, address, port, status, reply, cookie,"
                         " cookie_len) VALUES (%s, %s, 1, %s, %s, 80, 'success', 'syn-ack', %s, %s)",
                         (runs["tfo-lb"], rnd, host + ".test", addr, b"\x01\x02\x03\x04" if c else None,
                          4 if c else None))
    for i, (qtype, ttl) in enumerate([("A", 30), ("A", 300), ("A", 300), ("A", 3600), ("AAAA", 300), ("AAAA", 60)]):
        conn.execute("INSERT INTO dns_ttl_probe (run_id, hostname, qtype, outcome, ttl) VALUES (%s, %s, %s,"
                     " 'answer', %s)", (runs["dns-ttl"], f"d{i}.test", qtype, ttl))
    for i, scope in enumerate([0, 0, 0, 24]):
        conn.execute("INSERT INTO dns_ecs_probe (run_id, hostname, qtype, resolver, subnet, outcome, scope_prefix)"
                     " VALUES (%s, %s, 'A', '198.18.0.53', '198.18.64.0/24', 'answer', %s)",
                     (runs["dns-ecs"], f"e{i}.test", scope))
    for i, (sid, tickets, hint) in enumerate([(32, 1, 300), (32, 1, 90000), (0, 0, None), (32, 0, None)]):
        conn.execute("INSERT INTO tls_handshake (run_id, hostname, port, version, status, session_id_len,"
                     " ticket_count, ticket_lifetime) VALUES (%s, %s, 443, '1.2', 'success', %s, %s, %s)",
                     (runs["tls"], f"t{i}.test", sid, tickets, hint))
    for i, (mech, age, ok) in enumerate([("id", 10.0, False), ("id", 9000.0, True), ("ticket", 600.0, True)]):
        conn.execute("INSERT INTO tls_resumption (run_id, mechanism, version, origin_host, origin_address, host,"
                     " address, age_s, resumed, status) VALUES (%s, %s, '1.2', %s, '198.18.2.1', %s, '198.18.2.1',"
                     " %s, %s, 'success')", (runs["tls-lifetime"], mech, f"l{i}.test", f"l{i}.test", age, ok))
    for kind, gid, host in [("resumption", 1, "a"), ("resumption", 1, "b"), ("resumption", 2, "c"),
                            ("san", 1, "a"), ("san", 2, "b"), ("san", 3, "c"),
                            # Fig 5.4: www.a.test is in a.test's domain tree (its root is a.test)
                            ("union", 1, "a"), ("union", 1, "b"), ("union", 1, "www.a"), ("union", 2, "c")]:
        conn.execute("INSERT INTO tls_shared_group (run_id, kind, group_id, hostname) VALUES (%s, %s, %s, %s)",
                     (runs["tls-shared"], kind, gid, host + ".test"))
    for rank in range(1, 13):
        vn = rank in (1, 2, 11)
        conn.execute("INSERT INTO quic_discovery (run_id, rank, hostname, address, port, status, probed_at,"
                     " vn_answer, vn_versions, alt_svc_h3, https_rr_alpn) VALUES (%s, %s, %s, '198.18.5.1', 443,"
                     " 'success', now(), %s, %s, %s, %s)",
                     (runs["quic-discover"], rank, f"q{rank}.test", "version-negotiation" if vn else None,
                      [1] if vn else None, vn, None))
    return runs


def test_every_figure_lists_its_thesis_values(db, tmp_path):
    with db.connect() as conn:
        runs = _fill(conn)
    expect = {  # figure -> (runs, key -> our value in the thesis's unit)
        "dns-ttl-cdf": ((runs["dns-ttl"],), {"share_300s_a": 50.0, "share_over_30min_a": 25.0,
                                             "share_under_60s_a": 25.0, "share_under_60s_aaaa": 0.0}),
        "dns-ecs-scopes": ((runs["dns-ecs"],), {"share_global_scope": 75.0, "share_scope_23_24": 25.0}),
        "tls-support": ((runs["tls"],), {"share_session_id": 75.0, "share_ticket": 50.0, "n_tls_sites": 4}),
        # "~10% of the remaining sites" > 24 h: of the hints above 600 s (90000 s: 1 of 1)
        "tls-lifetime-hint": ((runs["tls"], runs["tls-lifetime"]), {"share_hint_le_600s": 50.0,
                                                                    "share_hint_gt_24h": 100.0,
                                                                    "share_ticket_not_resumed": 0.0,
                                                                    "share_gt_5min_ticket": 100.0}),
        "tls-lifetime-hint-tail": ((runs["tls"],), {"share_hint_le_28h": 100.0}),
        "tls-lifetime-measured": ((runs["tls-lifetime"],), {"share_id_not_resumed": 50.0, "share_id_gt_2h": 100.0}),
        "tls-shared-groups": ((runs["tls-shared"],), {"share_not_shared": 100 / 3, "largest_group": 2.0}),
        "tls-shared-table": ((runs["tls-shared"],), {"mean_size_resumption": 1.5, "mean_size_san": 1.0}),
        # roots a.test, b.test (2 relations each: the union group a, b, www.a) and c.test (0)
        "tls-root-trust-group": ((runs["tls-shared"],), {"share_root_related": 200 / 3, "share_root_lt_11": 100.0,
                                                          "share_root_1": 0.0, "share_root_2": 200 / 3}),
        "quic-support": ((runs["quic-discover"],), {"quic_share_top_10": 20.0}),
        "tfo-addresses-per-host": ((runs["tfo-lb"],), {"share_several_addresses": 50.0, "mean_addresses": 1.5,
                                                       "n_always_tfo": 2, "share_always_tfo": 200 / 3}),
        "tfo-lb-failure-rate": ((runs["tfo-lb"],), {"failure_connection_2": 50.0, "failure_connection_3": 0.0}),
        "atlas-resolver-rtt": ((runs["atlas"],), {"share_below_10ms_same_as": 50.0,
                                                  "share_below_10ms_other_as": 50.0, "p95_ms_all": 30.0,
                                                  "n_probes": 4}),
        "quic-lifetimes": ((runs["quic-turnover"],), {}),     # no hosts: the values are listed, ours empty
        "quic-turnover": ((runs["quic-turnover"],), {}),
    }
    for name, (rids, ours) in expect.items():
        out = tmp_path / name
        _plot(db, name, out, *rids)
        rows = {r["key"]: r for r in _csv(out / f"{name}-thesis.csv")}
        assert set(rows) == {r.key for r in for_figure(name)}, name
        for key, value in ours.items():
            assert float(rows[key]["ours"]) == pytest.approx(value, abs=1e-3), (name, key, rows[key])
        svg = (out / f"{name}.svg").read_text() if (out / f"{name}.svg").exists() else ""
        for r in for_figure(name):
            shown = rows[r.key]["drawn"]
            assert shown == ("no" if not r.draw or not svg else shown), (name, r.key)
            if shown != "no":        # drawn or listed: its label is on the figure
                assert html_escape(r.label()) in svg, (name, r.key)
    quic = {r["top_cut"]: r for r in _csv(tmp_path / "quic-support" / "quic-support.csv")}
    assert quic["10"]["thesis_quic_share_percent"] == "20.0" and quic["100"]["thesis_quic_share_percent"] == ""
    table = {r["kind"]: r for r in _csv(tmp_path / "tls-shared-table" / "tls-shared-table.csv")}
    assert table["resumption"]["thesis_mean_group_size"] == "1.5" and table["san"]["thesis_mean_group_size"] == "2.13"
    rows = {r["key"]: r for r in _csv(tmp_path / "dns-ttl-cdf" / "dns-ttl-cdf-thesis.csv")}
    assert rows["share_under_60s_a"]["drawn"] == "marker" and rows["share_300s_a"]["drawn"] == "no"


def html_escape(text: str) -> str:
    from xml.sax.saxutils import escape

    return escape(text)


def _hint_run(conn, hints: dict[int, int]) -> int:
    """A tls run: rank -> the TLS 1.2 ticket lifetime hint of host r<rank>.test."""
    from support.figures import _run

    rid = _run(conn, "tls")
    for rank, hint in hints.items():
        conn.execute("INSERT INTO tls_handshake (run_id, rank, hostname, port, version, status, ticket_count,"
                     " ticket_lifetime) VALUES (%s, %s, %s, 443, '1.2', 'success', 1, %s)",
                     (rid, rank, f"r{rank}.test", hint))
    return rid


def test_values_compare_with_their_own_series_and_cut(db, tmp_path):
    """Each published value is compared with the series and population the thesis states it
    for: 46 % / 71 % hints of five minutes per top list (Top 100K / Top 1M, thesis line 1153),
    "~10 % of the remaining sites" above 24 h among the hints above ten minutes (line 1157),
    "~40 % above five minutes" for IDs AND tickets (line 1164, "in both figures")."""
    with db.connect() as conn:
        small = _hint_run(conn, {1: 300, 2: 300, 3: 7200, 4: 300000})
        cut = _hint_run(conn, {1: 300, 2: 7200, 100000: 300, 100001: 86400})
    _plot(db, "tls-lifetime-hint", tmp_path / "s", small)
    rows = {r["key"]: r for r in _csv(tmp_path / "s" / "tls-lifetime-hint-thesis.csv")}
    # four names are neither the Top 100K nor the Top 1M: nothing to compare
    assert rows["share_hint_300s_top100k"]["ours"] == "" and rows["share_hint_300s_top1m"]["ours"] == ""
    # above 24 h: one of the two hints above ten minutes (of all four: 25 %)
    assert float(rows["share_hint_gt_24h"]["ours"]) == 50.0
    assert rows["share_hint_gt_24h"]["drawn"] == "legend"          # not a point of the CDF
    _plot(db, "tls-lifetime-hint", tmp_path / "c", cut)
    rows = {r["key"]: r for r in _csv(tmp_path / "c" / "tls-lifetime-hint-thesis.csv")}
    # ranks 1..100000: 300, 7200, 300 -> 2 of 3 (rank 100001 is outside the cut)
    assert float(rows["share_hint_300s_top100k"]["ours"]) == pytest.approx(200 / 3, abs=1e-3)
    assert rows["share_hint_300s_top1m"]["ours"] == ""               # the list stops at rank 100001
    # the ~40 % above five minutes is stated for both mechanisms' measured lines
    by = {(r.figure, r.series) for r in REFERENCES if r.quote.startswith("We observe in both figures")}
    assert by == {("tls-lifetime-measured", "id TLS 1.2"), ("tls-lifetime-measured", "ticket TLS 1.2"),
                  ("tls-lifetime-hint", "ticket TLS 1.2")}
    for r in REFERENCES:
        if r.key.startswith("share_hint_300s"):
            assert r.top == {"top100k": 100000, "top1m": 1000000}[r.key.split("_")[-1]], r.key
