"""Demo step: the DNS TTL and ECS surveys on the testbed, compared with its ground truth."""
from __future__ import annotations

import ipaddress
import os
import tempfile
from pathlib import Path

from netsurvey.demo import vantage_cli_json

STEP = "DNS TTLs and ECS scopes (scan dns-ttl, dns-ecs)"
FIGURES = Path("out/figures")


def _scan(state, *args: str) -> dict:
    return vantage_cli_json(state, "scan", *args, "--json", timeout=80)



def run(state, out) -> str:
    if os.geteuid() != 0:
        return "skipped: the testbed needs root"
    from rich.table import Table

    from analysis.figures import render
    from netsurvey.targets import import_list
    from testbed.dns import ecs_expected
    from testbed.manager import Testbed
    from testbed.model import DEFAULT_TESTBED_CONFIG, load_testbed_config

    cfg = load_testbed_config(DEFAULT_TESTBED_CONFIG)
    tb = Testbed(cfg, DEFAULT_TESTBED_CONFIG)
    tb.up(log=lambda m: None)
    truth = tb.status()["ground_truth"]["dns"]
    zones = set(truth["zones"])
    cuts = [n for n, t in truth["names"].items() if "NS" in t and n not in zones]
    names = sorted(n for n, t in truth["names"].items() if {"A", "AAAA"} & set(t) and "*" not in n
                   and not any(n == c or n.endswith("." + c) for c in cuts))
    db = state.db
    db.migrate()
    with tempfile.NamedTemporaryFile("w", suffix=".csv", delete=False) as fh:
        fh.write("".join(f"{i},{n}\n" for i, n in enumerate(names, 1)))
    try:
        import_list(db, Path(fh.name), "testbed-dns", replace=True)
    finally:
        os.unlink(fh.name)

    ttl = _scan(state, "dns-ttl", "--list", "testbed-dns")
    subnets = ["198.18.0.0/24", "198.18.7.0/24", "10.1.2.0/24"]
    ecs = _scan(state, "dns-ecs", "--list", "testbed-dns", *[a for n in truth["ecs"] for a in ("--name", n)],
                "--resolver", truth["authoritative"]["v4"], *[a for s in subnets for a in ("--subnet", s)])

    with db.connect() as conn:
        rows = conn.execute("SELECT hostname, qtype, outcome, ttl FROM dns_ttl_probe WHERE run_id = %s",
                            (ttl["run_id"],)).fetchall()
        summary = conn.execute("SELECT qtype, n_answers, share_60s, share_300s, share_600s, share_under_60s, "
                               "share_over_30min FROM dns_ttl_summary WHERE run_id = %s ORDER BY qtype",
                               (ttl["run_id"],)).fetchall()
        erows = conn.execute("SELECT hostname, subnet::text, scope_prefix FROM dns_ecs_probe WHERE run_id = %s",
                             (ecs["run_id"],)).fetchall()
    ttl_ok = sum(1 for h, q, o, t in rows
                 if (q in truth["names"][h] and o == "answer" and t == truth["names"][h][q]["ttl"])
                 or (q not in truth["names"][h] and o == "nodata"))
    ecs_checked = [(h, s, sc) for h, s, sc in erows if h in truth["ecs"]]
    ecs_ok = sum(sc == ecs_expected(cfg, h, str(ipaddress.ip_network(s).network_address))[1]
                 for h, s, sc in ecs_checked)
    t = Table("type", "records", "=60 s", "=300 s", "=600 s", "<60 s", ">30 min", title="authoritative TTLs (Fig 2.5)")
    for r in summary:
        t.add_row(r[0], str(r[1]), *[f"{float(v):.1%}" if v is not None else "-" for v in r[2:]])
    out.print(t)
    written = []
    for name in ("dns-ttl-cdf", "dns-ecs-scopes"):
        ctx = render(db, name, FIGURES, [ttl["run_id"] if name == "dns-ttl-cdf" else ecs["run_id"]])
        written += [p.name for p in ctx.written if p.suffix == ".png"]
    out.print(f"figures: {', '.join(str(FIGURES / w) for w in written)}")
    return (f"TTL probes matching ground truth {ttl_ok}/{len(rows)} (run {ttl['run_id']}); "
            f"ECS scopes exact {ecs_ok}/{len(ecs_checked)} (run {ecs['run_id']}); figures in {FIGURES}")
