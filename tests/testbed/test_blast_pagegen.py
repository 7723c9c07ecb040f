"""Generated validation pages (issue 25, item 6; testbed/pagegen.py): their composition must
follow the published statistics the module cites, and the files must describe exactly the
generated trees. The slow root test serves them from the testbed, loads them in Chromium and
Firefox, checks the recorded trees against the generated ones and renders BLAST's Fig 5."""
from __future__ import annotations

import json
import os
import statistics
import sys

import pytest

from conftest import REPO, run_cli
from testbed import pagegen


def _height(page) -> int:
    def h(i):
        return 1 + max((h(c) for c in page.resources[i].children), default=0)
    return h(0)


def test_composition_follows_the_published_statistics():
    pages = pagegen.generate(30, seed=25)
    assert pages == pagegen.generate(30, seed=25) and pages != pagegen.generate(30, seed=26)
    s = pagegen.summary(pages)
    n = sorted(len(p.resources) for p in pages)
    # Web Almanac 2019 Page Weight Fig 8 (desktop): median 74, p10 24, p90 179 requests
    assert 66 <= s["median_requests"] <= 82
    assert 24 <= n[3] <= 44 and 118 <= n[26] <= 179
    # Third Parties 2019: median 9 third-party domains, 49% third-party requests
    assert s["median_third_party_domains"] == 9
    assert abs(s["third_party_request_share"] - 0.49) < 0.04
    # BLAST sec. III-D1: mean tree height 15.4; every page's tree is as tall as drawn
    assert all(_height(p) == p.height for p in pages)
    assert 12 <= statistics.mean(p.height for p in pages) <= 19
    # bytes: Page Weight Fig 4 (desktop) median 1934 KB, scaled by 0.1
    kb = statistics.median(sum(r.size_bytes for r in p.resources) for p in pages) / 1000
    assert 150 <= kb <= 240


def test_written_files_are_the_trees(tmp_path):
    pages = pagegen.generate(3, seed=1, tag="t")
    for h in pagegen.HOSTS:
        (tmp_path / h).mkdir()
    written = pagegen.write(pages, tmp_path)
    assert written == sum(r.size_bytes for p in pages for r in p.resources)
    for p in pages:
        for r in p.resources:
            body = (tmp_path / r.host / r.path).read_bytes()
            assert len(body) == r.size_bytes
            if r.kind == "html":
                text = body.decode()
                for c in r.children:
                    assert p.resources[c].url in text
                assert text.count("https://") == len(r.children)
            elif r.kind == "img":
                assert body.startswith(b"\x89PNG\r\n\x1a\n") and body.endswith(b"IEND\xaeB`\x82")
    pagegen.remove(tmp_path, "t")
    assert not any((tmp_path / h / "gen").exists() for h in pagegen.HOSTS)
    with pytest.raises(FileNotFoundError):
        pagegen.write(pages, tmp_path / "nothing")


@pytest.mark.slow
@pytest.mark.root
@pytest.mark.timeout(900)
@pytest.mark.skipif(os.geteuid() != 0 or not os.path.exists("/usr/bin/chromedriver"),
                    reason="needs root (testbed) and chromium-driver")
def test_thirty_generated_pages_in_two_browsers(db, testbed, tmp_path):
    from analysis.figures import render
    from testbed.manager import state_dir

    www = state_dir() / "nginx" / "www"
    tag = f"v{os.getpid()}"
    pages = pagegen.generate(30, seed=25, tag=tag)
    pagegen.write(pages, www)
    runs = {}
    try:
        for browser in ("chromium", "firefox"):
            r = run_cli("testbed", "exec", "--", sys.executable, "-m", "netsurvey.cli", "--dsn", db.dsn, "browser",
                        "pageload", "--json", "--browser", browser, "--browsers", "2", "--page-timeout", "60",
                        *[a for p in pages for a in ("--url", p.url)], dsn=db.dsn, timeout=800)
            assert r.returncode == 0, r.stderr[-2000:]
            runs[browser] = json.loads(r.stdout.strip().splitlines()[-1])
    finally:
        pagegen.remove(www, tag)
    want = {p.url: p for p in pages}
    exact = {"chromium": 0, "firefox": 0}
    with db.connect() as conn:
        visits = conn.execute("SELECT v.id, v.browser, v.url, v.status, v.tree_height FROM browser_visit v").fetchall()
        for vid, browser, url, status, height in visits:
            assert status == "complete", (url, status)
            g = want[url]
            got = {u for (u,) in conn.execute("SELECT url FROM browser_resource WHERE visit_id = %s", (vid,))}
            gen = {r.url for r in g.resources}
            favicon = f"https://{g.resources[0].host}/favicon.ico"
            assert got <= gen | {favicon}, (browser, url, sorted(got - gen)[:3])
            if browser == "firefox" and g.height > 11:
                # Gecko loads no content frame nested deeper than 10 (dom/base/nsFrameLoader.cpp,
                # MAX_DEPTH_CONTENT_FRAMES 10): the tree stops at the 10th document (+ a leaf)
                assert height in (10, 11), (url, height, g.height)
                exact[browser] += 1
            elif height == g.height and got >= gen:
                exact[browser] += 1
    # the recorded trees are the generated ones (a visit the logger ended before a deep
    # frame loaded would show here: allowed once per browser, and printed)
    print(json.dumps({"visits_matching_the_generated_tree": exact}))
    assert exact["chromium"] >= 29 and exact["firefox"] >= 29, exact
    assert {b: s["complete"] for b, s in runs.items()} == {"chromium": 30, "firefox": 30}
    ctx = render(db, "blast-validation", tmp_path, runs=[s["run_id"] for s in runs.values()])
    stats = ctx.notes["stats"]
    print(json.dumps({"rtt_s": ctx.notes["rtt_s"], "bandwidth_Bps": ctx.notes["bandwidth_Bps"], "stats": stats}))
    assert set(stats) == {"chromium", "firefox"} and all(s["n"] == 30 for s in stats.values())
    assert all(s["r"] is not None and s["r"] > 0.3 for s in stats.values())


@pytest.mark.slow
@pytest.mark.root
@pytest.mark.timeout(3600)
@pytest.mark.skipif(os.geteuid() != 0 or not os.path.exists("/usr/bin/chromedriver"),
                    reason="needs root (timing testbed) and chromium-driver")
def test_validation_under_two_delay_profiles(db, tmp_path, monkeypatch):
    """Issue 25 item 6 under delay: the 30 generated pages on the timing testbed's page server,
    loaded by Chromium and Firefox under the 'cable' (20 ms) and 'lte' (60 ms) profiles
    (scripts/blast_validation.py), simulated at each profile's RTT; prints r and the error
    distribution per profile and browser (BLAST Fig 5: r = 0.63). BLAST_VALIDATION_PAGES
    sets fewer pages for a quick look."""
    sys.path.insert(0, str(REPO / "scripts"))
    import blast_validation

    from analysis.figures import render

    monkeypatch.setenv("NETSURVEY_DSN", db.dsn)
    n = int(os.environ.get("BLAST_VALIDATION_PAGES", "30"))
    res = blast_validation.run(["cable", "lte"], ["chromium", "firefox"], n_pages=n)
    runs = [s["run_id"] for per in res["runs"].values() for s in per.values()]
    for prof, per in res["runs"].items():
        for b, s in per.items():
            assert s["complete"] >= n - 1, (prof, b, s)
    with db.connect() as conn:
        got = dict(conn.execute("SELECT id, parameters->>'link_profile' FROM scan_run WHERE id = ANY(%s)", (runs,)))
    assert sorted(got.values()) == ["cable", "cable", "lte", "lte"]
    ctx = render(db, "blast-validation", tmp_path, runs=runs)
    groups = ctx.notes["groups"]
    print(json.dumps({g: {"rtt_s": v["rtt_s"], "bandwidth_Bps": v["bandwidth_Bps"],
                          "bandwidth_source": v["bandwidth_source"], "stats": v["stats"]} for g, v in groups.items()}))
    assert set(groups) == {"cable", "lte"}
    assert groups["cable"]["rtt_s"] == 0.02 and groups["lte"]["rtt_s"] == 0.06
    for g in groups.values():
        assert set(g["stats"]) == {"chromium", "firefox"}
        assert all(s["n"] >= n - 1 and s["r"] is not None for s in g["stats"].values())
    if n >= 10:
        for b in ("chromium", "firefox"):
            cable, lte = groups["cable"]["stats"][b], groups["lte"]["stats"][b]
            # three times the RTT: longer loads, recorded and simulated
            assert lte["mean_recorded_s"] > cable["mean_recorded_s"] and lte["mean_simulated_s"] > cable["mean_simulated_s"]
            # BLAST's method (constants measured from the runs): within 50% for the median page
            assert cable["measured"]["median_abs_error"] < 0.5 and lte["measured"]["median_abs_error"] < 0.5
        # Chromium's trees (heights 6..25) spread the load times: the simulator follows them
        # (two runs: r 0.56-0.61 at 20 ms, 0.72-0.74 at 60 ms). Firefox cuts every tree at its
        # 10th document (MAX_DEPTH_CONTENT_FRAMES): simulated times barely vary (sd 0.05 s at
        # 20 ms) and its r (0.21-0.53 in two runs) is reported, not asserted.
        assert all(groups[p]["stats"]["chromium"]["r"] > 0.3 for p in ("cable", "lte")), groups


@pytest.mark.timeout(120)
@pytest.mark.parametrize("args", [["--pages", "abc"], ["--bogus"], ["--pages", "0"], ["--profiles", "nosuch"]],
                         ids=["pages-abc", "bogus-option", "pages-0", "unknown-profile"])
def test_blast_validation_bad_input_one_line(args):
    """scripts/blast_validation.py: bad input is one line on stderr, exit 2, before anything
    is started (argparse printed its usage line too; an unknown profile was found only after
    'testbed timing up' and the pages were written: exit 1)."""
    import subprocess
    import sys

    p = subprocess.run([sys.executable, str(REPO / "scripts" / "blast_validation.py"), *args],
                       capture_output=True, text=True, timeout=60, cwd=REPO)
    assert p.returncode == 2 and len(p.stderr.strip().splitlines()) == 1, (p.returncode, p.stderr)
    assert p.stdout == ""
