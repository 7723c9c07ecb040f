"""`netsurvey demo` step: the TFO scans on the testbed, stored, with their figures."""
from __future__ import annotations

import os
import tempfile
from pathlib import Path

from netsurvey.demo import vantage_cli_json

STEP = "TCP Fast Open: support, load balancing, cookie reuse"


def _scan(state, *args: str) -> dict:
    return vantage_cli_json(state, "scan", *args, "--json")



def run(state, out) -> str:
    if os.geteuid() != 0:
        return "skipped: raw sockets and the testbed need root"
    from analysis.figures import render
    from netsurvey.targets import import_list
    from testbed.manager import Testbed
    from testbed.model import DEFAULT_TESTBED_CONFIG, load_testbed_config

    gt = Testbed(load_testbed_config(DEFAULT_TESTBED_CONFIG), DEFAULT_TESTBED_CONFIG).status()["ground_truth"]
    db = state.db
    db.migrate()
    names = [h["hostname"] for h in gt["tfo_hosts"]] + sorted(gt["dns"]["load_balanced"])
    with tempfile.TemporaryDirectory() as d:
        f = Path(d) / "tfo-demo.csv"
        f.write_text("".join(f"{i},{h}\n" for i, h in enumerate(names, 1)))
        import_list(db, f, "tfo-demo", replace=True)
    sup = _scan(state, "tfo", "--list", "tfo-demo", "--all-addresses", "--kernel-check", "2", "--cooldown", "0.5")
    lb = _scan(state, "tfo-lb", "--list", "tfo-demo", "--support-run", str(sup["run_id"]), "--rounds", "10",
               "--interval", "0", "--nameserver", gt["dns"]["authoritative"]["v4"], "--cooldown", "0.2")
    reuse = _scan(state, "tfo-reuse", "--list", "tfo-demo", "--lb-run", str(lb["run_id"]), "--cooldown", "0.5")
    figs = Path(os.environ.get("NETSURVEY_DEMO_OUT", "out")) / "figures"
    for name, runs in (("tfo-support-table", [sup["run_id"]]), ("tfo-addresses-per-host", [lb["run_id"]]),
                       ("tfo-lb-failure-rate", [lb["run_id"]])):
        render(db, name, figs, runs)
    with db.connect() as conn:
        wrong = conn.execute(
            "SELECT count(*) FROM tfo_probe p WHERE run_id=%s AND address IS NOT NULL AND (coalesce(cookie_len, 0) > 0) IS DISTINCT FROM "
            "(host(address) = ANY(%s))", (sup["run_id"], [a for h in gt["tfo_hosts"] if h["tfo"] for a in h["addresses"]]
                                         + [a for v in gt["dns"]["load_balanced"].values() for a in v["pool"]])).fetchone()[0]
        probed = conn.execute("SELECT count(*) FROM tfo_probe WHERE run_id=%s AND address IS NOT NULL",
                              (sup["run_id"],)).fetchone()[0]
        pools = dict(conn.execute("SELECT hostname, addresses FROM tfo_lb_host WHERE run_id=%s", (lb["run_id"],)).fetchall())
        kc = conn.execute("SELECT count(*) FILTER (WHERE raw_cookie = kernel_cookie AND syn_data_acked), count(*)"
                          " FROM tfo_kernel_check WHERE run_id=%s", (sup["run_id"],)).fetchone()
    lb_truth = ", ".join(f"{n}: {pools.get(n)} of {len(v['pool'])} pool addresses" for n, v in gt["dns"]["load_balanced"].items())
    out.print(f"support run {sup['run_id']}: {sup['counts']}; lb run {lb['run_id']}: {lb['counts']}; reuse run "
              f"{reuse['run_id']}: {reuse['counts']}; figures in {figs}")
    return (f"TFO classified {probed - wrong}/{probed} addresses as the testbed configures; {lb_truth} seen in 10 rounds; "
            f"cookie reuse accepted {reuse['counts']['accepted']} of {reuse['counts']['probes']} probes (truth: only the "
            f"issuing address, i.e. the controls); kernel cross-check agreed {kc[0]}/{kc[1]}")
