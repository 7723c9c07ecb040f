"""The time a browser saves on a revisit with state (issue 25, item 4): `browser revisit`
on the timing testbed under the 60 ms profile (config/testbed.toml [[profile]] lte).

Ground truth: the configured RTT, the round trips each resumption saves (QUIC 0-RTT: the
request in the first flight, one RTT saved: RFC 9001 sec. 4.6.1), and the server's own log
(nginx's $ssl_session_reused / $ssl_early_data, the QUIC server's connection events), not
the browser's or our counters. Chromium here; all three engines in the slow test.
"""
from __future__ import annotations

import json
import os
import sys

import pytest

from conftest import run_cli
from support.sniffing import Capture

RTT_MS = 60.0


@pytest.fixture(scope="module")
def timing_lte():
    if os.geteuid() != 0:
        pytest.skip("the timing testbed needs root")
    from testbed import timing
    from testbed.model import load_testbed_config
    from testbed.profiles import apply

    cfg = load_testbed_config()
    timing.up(cfg, log=lambda *_: None)
    assert cfg.profile("lte").rtt_ms == RTT_MS
    apply(cfg, "lte", ["timing"])
    yield cfg
    if timing.healthy(cfg):
        apply(cfg, "none", ["timing"])


def _revisit(db, *args: str, timeout: float = 600):
    return run_cli("testbed", "timing", "exec", "--", sys.executable, "-m", "netsurvey.cli", "--dsn", db.dsn,
                   "browser", "revisit", *args, dsn=db.dsn, timeout=timeout)


def _visits(db, run_id: int) -> list[tuple]:
    with db.connect() as conn:
        return conn.execute("SELECT browser, transport, repetition, visit, ttfb_ms, server_protocol, server_resumed, "
                            "server_early_data, link_rtt_ms, error FROM browser_revisit_visit WHERE run_id = %s "
                            "ORDER BY 1, 2, 3, 4", (run_id,)).fetchall()


@pytest.mark.root
def test_chromium_revisits_resume_and_quic_0rtt_saves_one_rtt(db, timing_lte):
    r = _revisit(db, "--browser", "chromium", "--transport", "tls12,quic", "--repeat", "3", "--json")
    assert r.returncode == 0, r.stderr[-2000:]
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert out["link_profile"] == "lte" and out["link_rtt_ms"] == RTT_MS
    rows = _visits(db, out["run_id"])
    assert len(rows) == 2 * 3 * 2 and all(x[9] is None for x in rows), rows
    for _browser, transport, rep, visit, ttfb, proto, resumed, early, rtt, _ in rows:
        assert rtt == RTT_MS and ttfb > 0
        # the server's log: the first visit is a full handshake, the revisit resumes
        assert resumed is (visit == "revisit"), (transport, rep, visit, resumed)
        assert proto == {"tls12": "TLSv1.2", "quic": "quic"}[transport]
        if transport == "quic":
            assert early is (visit == "revisit"), (rep, visit, early)   # Chromium sends 0-RTT on resumption
    s = {x["transport"]: x for x in out["savings"]}
    assert s["quic"]["pairs"] == 3 and s["quic"]["revisits_early_data"] == 3
    # 0-RTT saves one round trip of the link (a median over 3 pairs; browser noise of a few ms)
    assert 0.5 * RTT_MS <= s["quic"]["saving_median_ms"] <= 1.5 * RTT_MS, s["quic"]
    # a resumed TLS 1.2 handshake never costs a round trip more than a full one
    assert s["tls12"]["saving_median_ms"] > -0.25 * RTT_MS, s["tls12"]


@pytest.mark.root
def test_a_browser_or_transport_named_twice_is_measured_once(db):
    """--browser chromium,chromium --transport tls12,tls12 measured the pair twice, and the
    second collided on browser_revisit_visit's key: an internal error, the run 'failed' and
    no row kept (adversary). Any link profile: only the rows are counted."""
    if os.geteuid() != 0:
        pytest.skip("the timing testbed needs root")
    from testbed import timing
    from testbed.model import load_testbed_config

    timing.up(load_testbed_config(), log=lambda *_: None)   # as it is when already up
    r = _revisit(db, "--browser", "chromium,chromium", "--transport", "tls12", "--transport", "tls12",
                 "--repeat", "1", "--json", timeout=300)
    assert r.returncode == 0 and "internal error" not in r.stderr, r.stderr[-2000:]
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert [(x[0], x[1], x[3]) for x in _visits(db, out["run_id"])] == [("chromium", "tls12", "first"),
                                                                        ("chromium", "tls12", "revisit")]
    with db.connect() as conn:
        assert conn.execute("SELECT status, parameters->'browsers', parameters->'transports' FROM scan_run "
                            "WHERE id = %s", (out["run_id"],)).fetchone() == ("finished", ["chromium"], ["tls12"])


def test_savings_plot_of_another_kind_of_run_is_one_line(db, tmp_path):
    """plot browser-revisit-savings --run N of another kind wrote an empty figure, exit 0
    (adversary)."""
    with db.connect() as conn:
        rid = conn.execute("INSERT INTO scan_run (kind, status) VALUES ('tls', 'finished') RETURNING id").fetchone()[0]
    r = run_cli("plot", "browser-revisit-savings", "--run", str(rid), "--out", str(tmp_path), dsn=db.dsn)
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1 and "('tls')" in r.stderr, r.stderr
    assert not list(tmp_path.iterdir())


@pytest.mark.root
def test_revisit_outside_the_timing_vantage_and_bad_input_are_one_line(db, timing_lte):
    p = run_cli("--dsn", db.dsn, "browser", "revisit", "--repeat", "1", dsn=db.dsn)
    assert p.returncode == 2 and p.stderr.count("\n") == 1 and "timing exec" in p.stderr, p.stderr
    for bad in (["--transport", "tcp"], ["--repeat", "0"], ["--browser", "lynx"]):
        p = _revisit(db, *bad, timeout=60)
        assert p.returncode == 2 and p.stderr.count("\n") == 1 and "Traceback" not in p.stderr, (bad, p.stderr)
    with db.connect() as conn:
        assert conn.execute("SELECT count(*) FROM scan_run WHERE kind = 'browser-revisit' AND status = 'running'"
                            ).fetchone()[0] == 0


@pytest.mark.root
@pytest.mark.slow
def test_three_engines_report_their_savings(db, timing_lte):
    """All three engines, 5 pairs each: what each saves (reported in the closing note of
    issue 25), with the server's evidence; WebKit's HTTP/3 is n/a."""
    r = _revisit(db, "--browser", "chromium,firefox,webkit", "--repeat", "5", "--json", timeout=1800)
    assert r.returncode == 0, r.stderr[-2000:]
    out = json.loads(r.stdout.strip().splitlines()[-1])
    print(json.dumps(out["savings"], indent=1))
    rows = _visits(db, out["run_id"])
    assert all(x[9].startswith("n/a") for x in rows if x[0] == "webkit" and x[1] == "quic")
    got = {(x["browser"], x["transport"]) for x in out["savings"]}
    assert {("chromium", "tls12"), ("chromium", "tls13"), ("chromium", "quic"), ("firefox", "tls12"),
            ("firefox", "tls13"), ("webkit", "tls13")} <= got, got


def _TimingSniffer(path) -> Capture:
    """The timing vantage's link (tmv0, a TUN device): every packet the vantage sends."""
    return Capture("nstt-vantage", "tmv0", path)


SERVER = {"198.18.250.2", "2001:2:0:250::2"}


@pytest.mark.root
def test_dry_run_and_a_blocked_server_send_nothing(db, timing_lte, tmp_path):
    """The run path's promises on the timing testbed (the promise matrix's lab cannot reach
    it): --dry-run and a blocklist holding the timing server contact nothing; control: a
    real run does."""
    with _TimingSniffer(tmp_path / "dry.jsonl") as dry:
        r = _revisit(db, "--browser", "chromium", "--transport", "tls12", "--repeat", "1", "--dry-run")
    assert r.returncode == 0, r.stderr[-1000:]
    assert dry.stats["kernel_drops"] == 0
    assert not [p for p in dry.packets if p["dst"] in SERVER], dry.packets[:5]
    cfg = tmp_path / "survey.toml"
    cfg.write_text('[etiquette]\nblock = ["198.18.250.2/32", "2001:2:0:250::2/128"]\n')
    with _TimingSniffer(tmp_path / "blocked.jsonl") as bl:
        r = run_cli("testbed", "timing", "exec", "--", sys.executable, "-m", "netsurvey.cli", "--config", str(cfg),
                    "--dsn", db.dsn, "browser", "revisit", "--browser", "chromium", "--repeat", "1", dsn=db.dsn,
                    timeout=120)
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "blocked" in r.stderr, r.stderr
    assert not [p for p in bl.packets if p["dst"] in SERVER], bl.packets[:5]
    with _TimingSniffer(tmp_path / "real.jsonl") as real:
        r = _revisit(db, "--browser", "chromium", "--transport", "tls12", "--repeat", "1")
    assert r.returncode == 0, r.stderr[-1000:]
    assert [p for p in real.packets if p["dst"] in SERVER and p.get("syn")], "control: the real run sent no SYN"
    with db.connect() as conn:
        st = conn.execute("SELECT status FROM scan_run WHERE kind = 'browser-revisit' ORDER BY id").fetchall()
    assert [s for (s,) in st][-2:] == ["cancelled", "finished"], st
