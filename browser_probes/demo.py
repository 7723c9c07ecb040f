"""`netsurvey demo` step: page-load logger and two tracking experiments with real Chromium
on the testbed; stores results, writes figures, compares with the ground truth."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

STEP = "browser probes (Chromium + Firefox: page loads, TLS / QUIC tracking)"
REPO = Path(__file__).resolve().parent.parent
PAGES = ["https://tree.track.test/", "https://example.test/", "https://a.test/", "https://b.test/"]


def _cli(db, *args: str, timeout: float = 120) -> dict:
    cmd = [sys.executable, "-m", "netsurvey.cli", "testbed", "exec", "--", sys.executable, "-m", "netsurvey.cli",
           *args]  # the DSN goes by the environment (below), never on a command line
    r = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=timeout,
                       env=dict(os.environ, NETSURVEY_DSN=db.dsn))
    if r.returncode != 0:
        raise RuntimeError(r.stderr.strip().splitlines()[-1] if r.stderr.strip() else f"exit {r.returncode}")
    return json.loads(r.stdout.strip().splitlines()[-1])


def run(state, out) -> str:
    if os.geteuid() != 0:
        return "skipped: the testbed needs root"
    if not os.path.exists("/usr/bin/chromedriver"):
        return "skipped: chromium-driver not installed"
    from analysis.figures import render

    db = state.db
    db.migrate()
    pl = _cli(db, "browser", "pageload", "--json", "--browsers", "2", *[a for u in PAGES for a in ("--url", u)])
    with db.connect() as conn:
        h, n = conn.execute("SELECT tree_height, n_resources FROM browser_visit WHERE run_id=%s AND url=%s",
                            (pl["run_id"], PAGES[0])).fetchone()
    tr = _cli(db, "browser", "track", "--json", "--browser", "chromium", "--test", "lifetime", "--test", "hint",
              "--test", "quic-lifetime", "--wait", "6")
    ff = None
    from .drivers import geckodriver_path
    if geckodriver_path() and os.path.exists("/usr/lib/firefox-esr/firefox-esr"):
        ff = _cli(db, "browser", "track", "--json", "--browser", "firefox", "--test", "lifetime", "--wait", "6")
    figs = Path(os.environ.get("NETSURVEY_DEMO_OUT", "out")) / "figures"
    render(db, "browser-plt-cdf", figs, runs=(pl["run_id"],))
    render(db, "browser-tracking-table", figs, runs=(tr["run_id"],) + ((ff["run_id"],) if ff else ()))
    for x in (ff or {}).get("verdicts", []):
        out.print(f"  firefox {x['version']} {x['experiment']:9s} {x['mechanism']:15s} -> {x['verdict']}")
    v = {(x["experiment"], x["mechanism"]): x["verdict"] for x in tr["verdicts"]}
    for x in tr["verdicts"]:
        out.print(f"  {x['experiment']:9s} {x['mechanism']:15s} wait {x['wait_s']:g} s -> {x['verdict']}")
    # ground truth: tree.track.test = root -> a.test iframe -> its 2 resources: height 3;
    # lifetime hosts keep state 600 s (> 6 s wait): viable; hint host 4 s (< 6 s): blocked
    # QUIC host quic.track.test keeps tokens/tickets 600 s: presented after 6 s
    ok = (h == 3 and v.get(("lifetime", "tls13-psk")) == "viable" and v.get(("hint", "tls13-psk")) == "blocked"
          and v.get(("quic-lifetime", "quic-token")) == "viable")
    fv = {(x["experiment"], x["mechanism"]): x["verdict"] for x in (ff or {}).get("verdicts", [])}
    ok = ok and (ff is None or fv.get(("lifetime", "tls13-psk")) == "viable")
    return (f"{pl['complete']}/{len(PAGES)} page loads complete (tree height {h}, {n} resources; expected 3); "
            f"tracking: {sum(x == 'viable' for x in v.values())}/{len(v)} viable, TLS 1.3 PSK kept past 6 s at a "
            f"600 s host and dropped after a 4 s hint, QUIC token kept past 6 s (600 s host); Firefox: "
            f"{'skipped' if ff is None else fv.get(('lifetime', 'tls13-psk'))} -> "
            f"{'matches' if ok else 'DIFFERS FROM'} ground truth; "
            f"figures in {figs}")
