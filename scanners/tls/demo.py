"""`netsurvey demo` step: the TLS scanners on the testbed, results stored, figures written."""
from __future__ import annotations

import os
import tempfile
from pathlib import Path

from netsurvey.demo import vantage_cli_json

STEP = "TLS session resumption (scan tls, tls-lifetime, tls-shared)"


def _scan(state, *args: str) -> dict:
    return vantage_cli_json(state, "scan", *args, "--json")



def run(state, out) -> str:
    if os.geteuid() != 0:
        return "skipped: the testbed needs root"
    from analysis.figures import render
    from netsurvey.targets import import_list
    from testbed.manager import Testbed
    from testbed.model import DEFAULT_TESTBED_CONFIG, load_testbed_config

    tb = Testbed(load_testbed_config(DEFAULT_TESTBED_CONFIG), DEFAULT_TESTBED_CONFIG)
    gt = tb.status()["ground_truth"]
    hosts = {h["hostname"]: h for h in gt["tls_hosts"]}
    db = state.db
    db.migrate()
    with tempfile.TemporaryDirectory() as d:
        f = Path(d) / "tls-testbed.csv"
        f.write_text("".join(f"{i},{h}\n" for i, h in enumerate(hosts, 1)))
        import_list(db, f, "tls-testbed", replace=True)
    survey = _scan(state, "tls", "--list", "tls-testbed")
    short = hosts.get("short.example.test")
    life = _scan(state, "tls-lifetime", "--target", "short.example.test", "--no-ipv6", "--tls", "1.2",
                 "--max-age", str(short["session_timeout"] + 4), "--step", "2") if short else None
    shared = _scan(state, "tls-shared", "--list", "tls-testbed")
    with db.connect() as conn:
        rows = conn.execute("SELECT hostname, ticket_lifetime, encode(key_name, 'hex') FROM tls_handshake "
                            "WHERE run_id = %s AND ticket_count > 0", (survey["run_id"],)).fetchall()
        measured = conn.execute("SELECT mechanism, max_resumed_age_s FROM tls_lifetime_measured_v WHERE run_id = %s",
                                (life["run_id"],)).fetchall() if life else []
        groups = conn.execute("SELECT members FROM tls_shared_group_size_v WHERE run_id = %s AND kind = 'resumption' "
                              "AND size > 1", (shared["run_id"],)).fetchall()
    hint_ok = sum(1 for h, lt, _ in rows if lt == hosts[h]["session_timeout"])
    keys = gt["ticket_key_groups"]
    key_ok = sum(1 for h, _, k in rows if k is None or k == keys[hosts[h]["key_group"]]["current_key_name"]
                 or hosts[h]["key_group"] == "rotating")
    figdir = Path("out") / "figures"
    for name in ("tls-support", "tls-lifetime-hint", "tls-lifetime-hint-tail", "tls-lifetime-measured",
                 "tls-shared-groups", "tls-shared-table", "tls-key-rotation"):
        render(db, name, figdir)
    want_groups = sorted(sorted(m["hostname"] for m in hosts.values() if m["share_group"] == g)
                         for g in {m["share_group"] for m in hosts.values() if m["share_group"]})
    got_groups = sorted(sorted(g[0]) for g in groups)
    out.print(f"survey run {survey['run_id']}: {survey.get('success', 0)} addresses ok; lifetime run "
              f"{life and life['run_id']}: {measured}; shared groups {got_groups}; figures in {figdir}")
    return (f"hints {hint_ok}/{len(rows)} = session_timeout, key_names {key_ok}/{len(rows)} = testbed keys, "
            f"short.example.test measured {', '.join(f'{m}:{a}s' for m, a in measured)} "
            f"(configured {short['session_timeout'] if short else '?'}s, step 2s), shared groups "
            f"{'match' if got_groups == want_groups else 'DIFFER from'} config {want_groups}")
