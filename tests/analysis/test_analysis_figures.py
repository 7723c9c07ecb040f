"""Figures that mean what their captions say: cuts capped at the list size with n per cut,
every figure obeying --run (tls-key-rotation, the measured line of tls-lifetime-hint), and
a report that pins run ids per section, orders sections by thesis chapter and says where
its data came from. Rows are written with SQL into a fresh database (no network)."""
from __future__ import annotations

import pytest

from conftest import run_cli
from support.figures import _csv, _key_run, _plot, _run, _tfo_run


def test_tfo_support_cuts_capped_with_n(db, tmp_path):
    with db.connect() as conn:
        seven = _tfo_run(conn, 7, {1, 2, 3, 4, 5, 6})
        many = _tfo_run(conn, 22, {1, 2, 3, 15})
    _plot(db, "tfo-support-table", tmp_path / "a", seven)
    rows = _csv(tmp_path / "a" / "tfo-support-table.csv")
    # seven hostnames: one bar for the whole list, not six identical "Top 10 .. Top 1M" bars
    assert [(r["top_list"], r["cut_rank"], r["hostnames"], r["tfo"], r["tfo_share_percent"]) for r in rows] == [
        ("all 7", "7", "7", "6", "85.7")]
    out = _plot(db, "tfo-support-table", tmp_path / "b", many)
    rows = _csv(tmp_path / "b" / "tfo-support-table.csv")
    assert [(r["top_list"], r["hostnames"], r["tfo"]) for r in rows] == [("Top 10", "10", "3"), ("all 22", "22", "4")]
    assert {"n": 22, "what": "hostnames in all 22"} in out["notes"]["samples"]
    svg = (tmp_path / "b" / "tfo-support-table.svg").read_text()
    assert "(n=10)" in svg and "(n=22)" in svg                     # n on the figure itself
    assert "testbed (nstb-vantage)" in svg and "2026-11-01" in svg   # and where the data came from
    tex = (tmp_path / "b" / "tfo-support-table.tex").read_text()     # the table for a paper, booktabs
    assert "\\toprule" in tex and "top\\_list & cut\\_rank" in tex and "all 22 & 22 & 22 &" in tex


def test_a_run_of_another_kind_is_refused_and_report_keeps_each_kind(db, tmp_path):
    """plot F --run N with N of another kind drew an empty (or wrong) figure, exit 0, for every
    figure but browser-revisit-savings; the report, which gives every figure the same --run
    list, still draws each figure from the runs of its own kind."""
    with db.connect() as conn:
        tfo = _tfo_run(conn, 3, {1})
        tls = _run(conn, "tls")
    r = run_cli("plot", "tfo-support-table", "--run", str(tls), "--out", str(tmp_path / "a"), dsn=db.dsn)
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert f"no 'tfo' run among --run {tls} ('tls')" in r.stderr, r.stderr
    assert not (tmp_path / "a").exists() or not list((tmp_path / "a").iterdir())
    out = _plot(db, "tfo-support-table", tmp_path / "b", tfo, tls)
    assert out["notes"]["runs"] == [tfo]


def test_tls_key_rotation_obeys_run(db, tmp_path):
    with db.connect() as conn:
        a = _key_run(conn, {"a.test": 100.0, "b.test": 200.0})
        b = _key_run(conn, {"c.test": 5000.0})
    out = _plot(db, "tls-key-rotation", tmp_path / "a", a)
    assert out["notes"]["runs"] == [a]
    spans = {float(r["span_s"]) for r in _csv(tmp_path / "a" / "tls-key-rotation.csv")}
    assert spans == {100.0, 200.0}                                   # run b's 5000 s not pooled in
    out = _plot(db, "tls-key-rotation", tmp_path / "all")            # no --run: every finished tls run
    assert out["notes"]["runs"] == [a, b]
    assert max(float(r["span_s"]) for r in _csv(tmp_path / "all" / "tls-key-rotation.csv")) == 5000.0


def _lifetime_run(conn, age: float) -> int:
    rid = _run(conn, "tls-lifetime")
    conn.execute("INSERT INTO tls_resumption (run_id, mechanism, version, origin_host, origin_address, host, address,"
                 " age_s, resumed, status) VALUES (%s, 'ticket', '1.2', 'a.test', '198.18.2.1', 'a.test', '198.18.2.1',"
                 " %s, true, 'success')", (rid, age))
    return rid


def test_tls_lifetime_hint_measured_line_uses_given_run(db, tmp_path):
    with db.connect() as conn:
        tls = _key_run(conn, {"a.test": 10.0})
        old = _lifetime_run(conn, 300.0)
        _lifetime_run(conn, 900.0)                                   # the newest
    out = _plot(db, "tls-lifetime-hint", tmp_path / "a", tls, old)
    measured = [r for r in _csv(tmp_path / "a" / "tls-lifetime-hint.csv") if r["series"] == "measured"]
    assert {float(r["lifetime_s"]) for r in measured} == {300.0}
    assert out["notes"]["runs"] == [tls, old] and out["notes"]["measured_runs"] == [old]
    hint = [r for r in _csv(tmp_path / "a" / "tls-lifetime-hint.csv") if r["series"] == "hint"]
    assert {float(r["lifetime_s"]) for r in hint} == {7200.0}
    out = _plot(db, "tls-lifetime-hint", tmp_path / "b", tls)        # only a tls run: no measured line
    assert not [r for r in _csv(tmp_path / "b" / "tls-lifetime-hint.csv") if r["series"] == "measured"]


def test_report_pins_runs_orders_by_chapter_and_states_provenance(db, tmp_path):
    with db.connect() as conn:
        tfo = _tfo_run(conn, 22, {1, 2})
        tls = _key_run(conn, {"a.test": 10.0})
        dns = _run(conn, "dns-ttl", netns=None)                      # run outside the testbed: "Internet"
    out = tmp_path / "report"
    r = run_cli("report", "--out", str(out), "--json", dsn=db.dsn, timeout=600)
    assert r.returncode == 0, r.stderr
    html = (out / "index.html").read_text()
    assert f"netsurvey plot tfo-support-table --run {tfo} --out figures" in html
    assert f"netsurvey plot tls-key-rotation --run {tls} --out figures" in html
    assert "Where the data came from" in html and "<b>Data: Internet and testbed</b>" in html
    assert f"<tr><td>{dns}</td><td>dns-ttl</td><td>finished</td><td>Internet</td>" in html
    assert f"<tr><td>{tfo}</td><td>tfo</td><td>finished</td><td>testbed</td><td>nstb-vantage</td>" in html
    ids = [s.split('"')[0] for s in html.split('<section id="')[1:]]
    from analysis.figures import load_all
    from analysis.report import thesis_order

    specs = load_all()
    keys = [thesis_order(specs[i].thesis, i) for i in ids]
    assert keys == sorted(keys)
    assert ids.index("tfo-support-table") < ids.index("tls-support") < ids.index("tls-key-rotation")


def test_quic_support_capped_with_n(db, tmp_path):
    with db.connect() as conn:
        rid = _run(conn, "quic-discover")
        for rank in range(1, 16):   # 15 hostnames: cuts 10 and "all 15", not 10 .. 100
            vn = rank <= 4
            conn.execute("INSERT INTO quic_discovery (run_id, rank, hostname, address, port, status, probed_at,"
                         " vn_answer, vn_versions, alt_svc_h3, https_rr_alpn) VALUES (%s, %s, %s, '198.18.5.1', 443,"
                         " 'success', now(), %s, %s, %s, %s)",
                         (rid, rank, f"q{rank}.test", "version-negotiation" if vn else None, [1] if vn else None,
                          vn, ["h3"] if vn else None))
    out = _plot(db, "quic-support", tmp_path, rid)
    rows = _csv(tmp_path / "quic-support.csv")
    assert [(r["top_cut"], r["hosts"], r["quic_hosts"]) for r in rows] == [("10", "10", "4"), ("100", "15", "4")]
    svg = (tmp_path / "quic-support.svg").read_text()
    assert "all 15" in svg and "(n=15)" in svg and "(n=10)" in svg
    assert {"n": 15, "what": "hostnames in the top 100"} in out["notes"]["samples"]
    # three series that coincide are all drawn (three lines in the legend and plot)
    assert svg.count("QUIC (Version Negotiation)") == 1 and "Alt-Svc h3" in svg and "HTTPS RR h3" in svg


def test_tls_shared_groups_weighted_by_host_and_table_mean(db, tmp_path):
    with db.connect() as conn:
        rid = _run(conn, "tls-shared")
        groups = {("resumption", 1): ["a", "b", "c", "d"], ("resumption", 2): ["e"], ("resumption", 3): ["f"],
                  ("san", 1): ["a", "b"], ("san", 2): ["c", "d"], ("san", 3): ["e"], ("san", 4): ["f"]}
        for (kind, gid), members in groups.items():
            for h in members:
                conn.execute("INSERT INTO tls_shared_group (run_id, kind, group_id, hostname) VALUES (%s, %s, %s, %s)",
                             (rid, kind, gid, h + ".test"))
    out = _plot(db, "tls-shared-groups", tmp_path, rid)
    rows = _csv(tmp_path / "tls-shared-groups.csv")
    res = {float(r["size"]): float(r["cdf"]) for r in rows if r["kind"] == "resumption"}
    # per host: 2 of 6 hosts are alone, 4 of 6 in the group of 4 (per group it would be 2/3 at size 1)
    assert res == {1.0: pytest.approx(2 / 6, abs=1e-3), 4.0: 1.0}    # (1000-point quantile grid)
    assert {"n": 6, "what": "hosts (resumption)"} in out["notes"]["samples"]
    _plot(db, "tls-shared-table", tmp_path, rid)
    table = {r["kind"]: r for r in _csv(tmp_path / "tls-shared-table.csv")}
    assert (table["san"]["groups_size_gt1"], table["san"]["hosts"], table["san"]["mean_group_size_gt1"]) == \
        ("2", "6", "2.0")
    assert table["resumption"]["mean_group_size_gt1"] == "4.0" and table["resumption"]["largest"] == "4"


def test_zoo_table_puts_the_second_opinion_next_to_ours(db, tmp_path):
    """zoo-table (issue 24): per host and fact our value, gnutls-cli's where it measures the
    same fact, and whether they agree (a disagreement reads NO)."""
    with db.connect() as conn:
        tls = _run(conn, "tls")
        so = _run(conn, "tls-second-opinion")
        for v, idr, tr in (("1.2", False, True), ("1.3", None, True)):
            conn.execute("INSERT INTO tls_handshake (run_id, hostname, port, version, status, ticket_count,"
                         " ticket_lifetime, id_resumed, ticket_resumed, ticket_family, ticket_key_id_len)"
                         " VALUES (%s, 'gotls.zoo.test', 443, %s, 'success', 1, %s, %s, %s, 'go', 0)",
                         (tls, v, 0 if v == "1.2" else 604800, idr, tr))
        for v, m, res in (("1.2", "ticket", True), ("1.3", "ticket", True), ("1.2", "id", True)):
            conn.execute("INSERT INTO tls_second_opinion (run_id, hostname, port, version, mechanism, client, status,"
                         " resumed) VALUES (%s, 'gotls.zoo.test', 443, %s, %s, 'gnutls-cli 3.7.9', 'success', %s)",
                         (so, v, m, res))
    _plot(db, "zoo-table", tmp_path, tls, so)
    t = {r["fact"]: r for r in _csv(tmp_path / "zoo-table.csv")}
    assert (t["ticket_resumption_tls12"]["netsurvey"], t["ticket_resumption_tls12"]["agree"]) == ("true", "yes")
    assert (t["session_id_resumption_tls12"]["second_opinion"], t["session_id_resumption_tls12"]["agree"]) == \
        ("true", "NO")
    assert (t["ticket_family"]["netsurvey"], t["ticket_family"]["agree"]) == ("go", "")
    assert t["tls13_ticket_lifetime_s"]["netsurvey"] == "604800"


def test_zoo_table_documented_default_and_testssl(db, tmp_path):
    """zoo-table: the documented default of a zoo host (cited, recorded by testbed zoo-record) beside our
    value, and testssl.sh as one more client: one row per client measuring a fact."""
    with db.connect() as conn:
        tls = _run(conn, "tls")
        so = _run(conn, "tls-second-opinion")
        for v, idr, tr in (("1.2", False, True), ("1.3", None, True)):
            conn.execute("INSERT INTO tls_handshake (run_id, hostname, port, version, status, ticket_count,"
                         " ticket_lifetime, id_resumed, ticket_resumed, ticket_family, ticket_key_id_len)"
                         " VALUES (%s, 'gotls.zoo.test', 443, %s, 'success', 1, %s, %s, %s, 'go', 16)",
                         (tls, v, 0 if v == "1.2" else 604800, idr, tr))
        for v, m, res, life, client in (("1.3", "ticket", True, None, "gnutls-cli 3.7.9"),
                                        ("1.3", "ticket", False, None, "testssl 3.0.8"),
                                        ("1.3", "lifetime-hint", None, 604800, "testssl 3.0.8"),
                                        ("1.3", "id", True, None, "testssl 3.0.8")):
            conn.execute("INSERT INTO tls_second_opinion (run_id, hostname, port, version, mechanism, client, status,"
                         " resumed, lifetime_hint_s) VALUES (%s, 'gotls.zoo.test', 443, %s, %s, %s, 'success', %s, %s)",
                         (so, v, m, client, res, life))
    r = run_cli("testbed", "zoo-record", "--json", dsn=db.dsn)     # the documented defaults, into the database
    assert r.returncode == 0, r.stderr
    _plot(db, "zoo-table", tmp_path, tls, so)
    rows = _csv(tmp_path / "zoo-table.csv")
    by = {(r["fact"], r["second_opinion_client"]): r for r in rows}
    t13 = [r for r in rows if r["fact"] == "ticket_resumption_tls13"]
    assert sorted((r["second_opinion_client"], r["agree"]) for r in t13) == [("gnutls-cli 3.7.9", "yes"),
                                                                         ("testssl 3.0.8", "NO")]
    life = by[("tls13_ticket_lifetime_s", "testssl 3.0.8")]
    assert (life["documented"], life["netsurvey_matches_documented"], life["second_opinion"], life["agree"]) == \
        ("604800", "yes", "604800", "yes")
    assert "maxSessionTicketLifetime" in life["documented_source"]
    # Go tickets have no key id: a measured 16 contradicts the cited source
    kid = by[("ticket_key_id_len", "")]
    assert (kid["documented"], kid["netsurvey"], kid["netsurvey_matches_documented"]) == ("0", "16", "NO")
    sid = by[("session_id_resumption_tls12", "")]   # testssl's 'id' at TLS 1.3 is not this fact
    assert (sid["documented"], sid["netsurvey"], sid["netsurvey_matches_documented"], sid["agree"]) == \
        ("false", "false", "yes", "")
