"""Database-backed parts of analysis/: the CDF engine, the prolongation model (computed in
PostgreSQL), the `simulate` CLI, and the HTML report rendered in headless Chromium."""
from __future__ import annotations

import json
import shutil
import subprocess

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from analysis.engine import cdf, percentiles, shares
from analysis.models.prolongation import ProlongationOptions, drop_table, load_log, prolongation
from conftest import run_cli

# u1 visits s at 0, 100, 250, 1000; u2 visits x at 500 and y at 400, 450 (sample 0..1000)
LOG = "user_id,unix_time,hostname\nu1,0,s\nu1,100,s\nu1,250,s\nu1,1000,s\nu2,500,x\nu2,400,y\nu2,450,y\n"


def test_engine_cdf_percentiles_shares(db):
    with db.connect() as conn:
        conn.execute("CREATE TABLE obs (grp text, value float8)")
        conn.execute("INSERT INTO obs SELECT 'a', g FROM generate_series(1, 100) g")
        conn.execute("INSERT INTO obs SELECT 'b', g * 10 FROM generate_series(1, 4) g")
        conn.commit()
    a, b = cdf(db, "SELECT grp, value FROM obs", points=4)
    assert (a.group, a.n, a.values, a.probs) == ("a", 100, (25.0, 50.0, 75.0, 100.0), (0.25, 0.5, 0.75, 1.0))
    assert (b.n, b.values) == (4, (10.0, 20.0, 30.0, 40.0)) and b.at(25) == 0.5
    assert percentiles(db, "SELECT grp, value FROM obs", probs=(0.5,))["a"] == {0.5: 50.0}
    assert shares(db, "SELECT grp, (value > 20)::text AS category FROM obs WHERE grp = 'b'") == [
        ("b", "false", 2, 0.5), ("b", "true", 2, 0.5)]


def test_prolongation_hand_computed(db, tmp_path):
    f = tmp_path / "log.csv"
    f.write_text(LOG)
    r = run_cli("simulate", "prolongation", "--input", str(f), "--lifetimes", "100,150,500,750", dsn=db.dsn)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert (out["users"], out["revisits"], out["sample_start"], out["sample_end"]) == (2, 4, 0, 1000)
    rows = {x["lifetime_s"]: x for x in out["lifetimes"]}
    # lcp u1: 100 / 250 / 250 / 1000; u2: 50 always
    assert [rows[l]["lcp_median_s"] for l in (100, 150, 500, 750)] == [75, 150, 150, 525]
    assert [rows[l]["lcp_mean_s"] for l in (100, 150, 500, 750)] == [75, 150, 150, 525]
    # permanently trackable: u2 needs 500 (site x: 500 from start), u1 needs 750 (its largest gap)
    assert [rows[l]["share_permanently_trackable"] for l in (100, 150, 500, 750)] == [0, 0, 0.5, 1]
    # revisit gaps 100, 150, 750, 50
    assert [rows[l]["share_revisits_within_lifetime"] for l in (100, 150, 500, 750)] == [0.5, 0.75, 0.75, 1]
    assert out["revisit_interval_cdf"]["values_s"][-1] == 750
    # the temporary tables are gone
    with db.connect() as conn:
        assert conn.execute("SELECT count(*) FROM pg_tables WHERE tablename LIKE 'sim\\_%'").fetchone()[0] == 0


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.tuples(st.sampled_from("uvw"), st.integers(0, 10**6), st.sampled_from("abc")), min_size=1, max_size=40))
def test_prolongation_monotone_in_lifetime(db, tmp_path_factory, visits):
    f = tmp_path_factory.mktemp("log") / "log.csv"
    f.write_text("".join(f"{u},{t},{h}\n" for u, t, h in visits))
    table = load_log(db, f)
    try:
        r = prolongation(db, table, ProlongationOptions(lifetimes_s=(0, 10, 1000, 10**4, 10**5, 10**6)))
    finally:
        drop_table(db, table)
    for key in ("lcp_median_s", "lcp_mean_s", "share_permanently_trackable", "share_revisits_within_lifetime"):
        vals = [x[key] for x in r["lifetimes"]]
        assert vals == sorted(vals), key
    assert r["lifetimes"][-1]["share_permanently_trackable"] == 1.0  # l >= sample length
    assert r["lifetimes"][-1]["share_revisits_within_lifetime"] == (1.0 if r["revisits"] else 0.0)


def test_simulate_cli_files_and_errors(db, tmp_path):
    trees = tmp_path / "trees.json"
    trees.write_text(json.dumps({"sites": [{"root": "a", "edges": [["a", "b"], ["b", "c"], ["c", "d"]],
                                            "groups": [["a", "c"]], "trust_pairs": [["b", "d"]]}]}))
    r = run_cli("simulate", "tls-across-hostnames", "--input", str(trees), dsn=db.dsn)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["mean_full_handshakes"]["across_hostnames"] == 2 and out["mean_longest_path_full"]["across_hostnames"] == 2
    r = run_cli("simulate", "oob-tokens", "--input", str(trees), dsn=db.dsn)
    assert json.loads(r.stdout)["web_browsing"]["delay_saved_until_last_connection_ms"] == 4 * 90
    rtts = tmp_path / "rtt.csv"
    rtts.write_text("client,rtt_dns,rtt_server,rtt_direct\np1,30,30,60\np2,10,20,15\n")
    out = json.loads(run_cli("simulate", "quicsocks", "--input", str(rtts), dsn=db.dsn).stdout)
    assert out["per_client"][0]["status_quo_retry"] == 150 and out["share_faster"] == 0.5
    page = tmp_path / "page.json"
    page.write_text(json.dumps({"rtt_s": 0.1, "bandwidth_Bps": 1000, "pages": [
        {"name": "p", "recorded_plt_s": 0.9, "servers": [{"name": "a"}],
         "resources": [{"id": "r", "server": "a", "size": 100}, {"id": "c", "server": "a", "size": 200, "parent": "r"}]}]}))
    out = json.loads(run_cli("simulate", "pageload", "--input", str(page), dsn=db.dsn).stdout)
    assert out["per_page"][0]["plt_s"] == pytest.approx(0.7) and out["validation"]["pages_with_recorded_plt"] == 1
    # bad input: one line, exit 2, nothing on stdout
    for args in (("simulate", "tfo-revisits", "--failure-rate", "0.2,x"),
                 ("simulate", "tfo-revisits", "--failure-rate", "1.2"),
                 ("simulate", "quicsocks", "--rtt-dns", "30"),
                 ("simulate", "tls-across-hostnames", "--input", str(tmp_path / "missing.json")),
                 ("simulate", "prolongation", "--input", str(rtts)),
                 ("simulate", "tfo-revisits")):  # no --input and no model_tfo_revisit_failure view
        r = run_cli(*args, dsn=db.dsn)
        assert r.returncode == 2, (args, r.stdout, r.stderr)
        assert r.stdout == "" and len(r.stderr.strip().splitlines()) == 1, (args, r.stderr)


def _chromium() -> str:
    for name in ("chromium", "chromium-browser"):
        if shutil.which(name):
            return shutil.which(name)
    pytest.skip("chromium is not installed (scripts/install.sh installs it)")


def test_report_renders_in_headless_chromium(db, tmp_path):
    # real measurement rows for one DB-backed figure: a DNS query log under scan run 1
    with db.connect() as conn:
        rid = conn.execute("INSERT INTO scan_run (kind, status) VALUES ('dns-log', 'finished') RETURNING id").fetchone()[0]
        conn.execute("CREATE TABLE dnslog (scan_run_id bigint REFERENCES scan_run(id), user_id text, ts float8, hostname text)")
        conn.execute("INSERT INTO dnslog SELECT %s, 'u' || (g %% 7), g * 3600.0, 'h' || (g %% 3) FROM generate_series(1, 500) g", (rid,))
        conn.execute("CREATE VIEW model_dns_query AS SELECT scan_run_id, user_id, ts, hostname FROM dnslog")
        conn.commit()
    out = tmp_path / "report"
    r = run_cli("report", "--out", str(out), "--json", dsn=db.dsn)
    assert r.returncode == 0, r.stderr
    summary = json.loads(r.stdout)
    figs = summary["figures"]
    assert summary["failed"] == 0, {k: v["reason"] for k, v in figs.items() if v["status"] == "failed"}
    for name in ("oob-tokens", "quicsocks-table", "prolongation"):
        assert figs[name]["status"] == "ok"
    assert figs["prolongation"]["notes"]["runs"] == [rid]
    assert {"n": 7, "what": "users"} in figs["prolongation"]["notes"]["samples"]
    assert figs["tfo-revisits-table"]["status"] == "missing"
    html = (out / "index.html").read_text()
    assert "Missing data" in html and "netsurvey plot prolongation" in html and "363.6" in html
    assert "src=\"figures/" not in html  # self-contained: images are inlined

    chromium = _chromium()
    flags = [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
             "--disable-background-networking", "--disable-component-update", "--disable-sync",
             f"--user-data-dir={tmp_path / 'profile'}", "--virtual-time-budget=5000"]
    url = (out / "index.html").resolve().as_uri()
    shot = tmp_path / "report.png"
    subprocess.run([*flags, f"--screenshot={shot}", "--window-size=1200,2400", url], capture_output=True, timeout=120)
    assert shot.exists() and shot.stat().st_size > 10_000
    import matplotlib.image as mpimg

    pixels = mpimg.imread(shot)
    assert pixels.std() > 0.05  # not a blank page
    dom = subprocess.run([*flags, "--dump-dom", url], capture_output=True, text=True, timeout=120).stdout
    assert 'data-broken-images="0"' in dom, "broken images in the report"
    n_img = dom.count('data-loaded="yes"')
    # (tls-key-rotation without any tls run now says "Missing data" instead of drawing an empty CDF)
    assert n_img == sum(1 for v in figs.values() for f in v["files"] if f.endswith(".png")) and n_img >= 5
    assert figs["tls-key-rotation"]["status"] == "missing"
    # every section has content: figures/tables, or an explicit missing-data statement
    for sec in dom.split("<section")[1:]:
        body = sec.split("</section>")[0]
        assert ("<img" in body and "<table>" in body) or "Missing data" in body, body[:300]
