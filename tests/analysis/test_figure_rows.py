"""Rows and tables that each come from their own experiment: Table 3.2 (TFO tracking) fills a
row only from the experiment that row names, else says "not measured"; Table 5.6 (two sites
visited in a row, trust from certificates only) is drawn beside the thesis's rows. Rows are
written with SQL into a fresh database (no network)."""
from __future__ import annotations

from support.figures import _csv, _plot, _run


def _verdict(conn, rid: int, experiment: str, mechanism: str, verdict: str, presented) -> None:
    conn.execute("INSERT INTO browser_track_verdict (run_id, browser, browser_version, os, experiment, mechanism,"
                 " wait_s, presented, verdict, detail) VALUES (%s, 'chromium', '140', 'Linux', %s, %s, -1, %s, %s,"
                 " 'test row')", (rid, experiment, mechanism, presented, verdict))


def test_table_3_2_rows_each_from_their_own_experiment(db, tmp_path):
    """The cross-application run (curl's cookie presented by the browser: viable; kernel
    linkage curl -> curl: blocked) says nothing about third parties, virtual hosts, private
    mode, restarts or tracking periods: those rows read "not measured", not the cross-app
    verdict; "IP address changes" is a row of its own (the thesis: blocked)."""
    with db.connect() as conn:
        rid = _run(conn, "browser-track")
        _verdict(conn, rid, "cross-app", "tfo-cookie", "viable", True)
        _verdict(conn, rid, "cross-app", "tfo-cookie-kernel", "blocked", False)
        _verdict(conn, rid, "private", "tls13-psk", "viable", True)
    _plot(db, "browser-tracking-table", tmp_path, rid)
    rows = _csv(tmp_path / "browser-tracking-table-thesis.csv")
    t32 = [r for r in rows if r["table"] == "Table 3.2"]
    ours = {r["row"]: r["value"] for r in t32 if r["source"] == "ours"}
    thesis = {r["row"]: r["value"] for r in t32 if r["column"] == "Chrome v68 (thesis)"}
    assert list(ours) == ["TFO status", "TFO tracking period", "TFO third-parties", "TFO virtual hosts",
                          "TFO IP address changes", "TFO private mode", "TFO user applications",
                          "TFO browser restarts"]
    for row in ("TFO tracking period", "TFO third-parties", "TFO virtual hosts", "TFO IP address changes",
                "TFO private mode", "TFO browser restarts"):
        assert ours[row].startswith("not measured"), (row, ours[row])
    assert ours["TFO user applications"] == "blocked"              # its own verdict (tfo-cookie-kernel)
    assert ours["TFO status"] == "TFO option in its SYNs"
    assert thesis["TFO IP address changes"] == "blocked"
    # a TLS private-mode verdict stays in Table 4.2, not in the TFO row
    assert {r["row"]: r["value"] for r in rows if r["table"] == "Table 4.2" and r["source"] == "ours"}[
        "Private mode"] == "viable"


def test_table_5_6_two_sites_drawn_beside_the_thesis(db, tmp_path):
    """Two sites: a.test {a, x} and b.test {b, x, z}; certificates make x and z one trust
    group in b.test, a measured resumption a <-> x is not a certificate relation (Table 5.6
    uses certificates only). Visiting both: 2 + 3 = 5 full handshakes without resumption, 4
    with per-hostname resumption (x twice), 3 across hostnames (a, b, {x, z})."""
    with db.connect() as conn:
        rid = _run(conn, "browser-pageload")
        conn.execute("DROP VIEW model_domain_tree_edge CASCADE")
        conn.execute(f"CREATE VIEW model_domain_tree_edge AS SELECT * FROM (VALUES ({rid}::bigint, 'a', 'a', 'a'),"
                     f" ({rid}, 'a', 'a', 'x'), ({rid}, 'b', 'b', 'b'), ({rid}, 'b', 'b', 'x'), ({rid}, 'b', 'x', 'z'))"
                     " AS t (scan_run_id, site, parent, child)")
        conn.execute(f"CREATE VIEW model_trust_pair AS SELECT * FROM (VALUES ({rid}::bigint, 'b', 'x', 'z', 'san'),"
                     f" ({rid}, 'a', 'a', 'x', 'resumption')) AS t (scan_run_id, site, a, b, source)")
    out = _plot(db, "tls-across-hostnames", tmp_path, rid)
    rows = _csv(tmp_path / "tls-across-hostnames-5_6.csv")
    assert [(r["sites_visited"], r["pairs"], r["without_tls_resumption"], r["with_tls_resumption"],
             r["with_tls_resumption_across_hostnames"], r["source"]) for r in rows] == [
        ("two of our sites (every pair)", "1", "5", "4", "3", "ours"),
        ("Alexa Top 100", "", "25.98", "25.34", "9.3", "thesis (line 1656-1658)"),
        ("Alexa Top 1K", "", "41.78", "40.04", "18.58", "thesis (line 1656-1658)")]
    for ext in ("png", "svg", "tex"):
        assert (tmp_path / f"tls-across-hostnames-5_6.{ext}").exists(), ext
    assert f"data: run {rid} (browser-pageload)" in (tmp_path / "tls-across-hostnames-5_6.svg").read_text()
    cmp = {c["quantity"]: c for c in out["notes"]["compare"]}
    across = cmp["two sites: full handshakes converted by resumption across hostnames (Table 5.6, Alexa Top 100;"
                 " line 1654)"]
    assert (across["thesis"], across["ours"]) == ("64.2%", "40.0%")
    assert {"n": 1, "what": "pairs of sites (Table 5.6)"} in out["notes"]["samples"]
