"""`netsurvey demo` step: QUIC discovery, handshakes and a short turnover run on the
testbed, stored, with figures, compared with the testbed's ground truth."""
from __future__ import annotations

import os
import tempfile
from pathlib import Path

from netsurvey.demo import vantage_cli_json

STEP = "QUIC: discovery, tokens, tickets, turnover"


def _scan(state, *args: str, timeout: float = 120) -> dict:
    return vantage_cli_json(state, "scan", *args, "--json", timeout=timeout)



def run(state, out) -> str:
    if os.geteuid() != 0:
        return "skipped: the testbed needs root"
    from rich.table import Table

    from analysis.figures import render
    from netsurvey.targets import import_list
    from testbed.manager import Testbed
    from testbed.model import DEFAULT_TESTBED_CONFIG, load_testbed_config

    gt = Testbed(load_testbed_config(DEFAULT_TESTBED_CONFIG), DEFAULT_TESTBED_CONFIG).status()["ground_truth"]
    quic = {h["hostname"]: h for h in gt["quic_hosts"]}
    db = state.db
    db.migrate()
    names = list(quic) + [h["hostname"] for h in gt["tls_hosts"] if h["hostname"] not in quic][:5]
    with tempfile.TemporaryDirectory() as d:
        f = Path(d) / "quic-demo.csv"
        f.write_text("".join(f"{i},{h}\n" for i, h in enumerate(names, 1)))
        import_list(db, f, "quic-demo", replace=True)
    disc = _scan(state, "quic-discover", "--list", "quic-demo", "--timeout", "0.5s")
    hs = _scan(state, "quic", "--list", "quic-demo", "--timeout", "2s")
    turn = _scan(state, "quic-turnover", "--list", "quic-demo", "--top", str(len(quic)), "--every", "1s",
                 "--for", "41s", "--timeout", "0.9s", "--sessions", "41")   # every age in one round: ~41 s
    figs = Path(os.environ.get("NETSURVEY_DEMO_OUT", "out")) / "figures"
    for name, run_id in (("quic-support", disc["run_id"]), ("quic-lifetimes", turn["run_id"]),
                         ("quic-turnover", turn["run_id"]), ("quic-tracking", turn["run_id"])):
        render(db, name, figs, runs=[run_id])
    with db.connect() as conn:
        support = dict(conn.execute("SELECT hostname, coalesce(quic, false) FROM quic_support_host WHERE run_id = %s",
                                    (disc["run_id"],)).fetchall())
        rows = conn.execute(
            """SELECT hostname, host(address), retry_on_fresh, tokens_issued, ticket_lifetime_s,
                      ticket_max_early_data IS NOT NULL, token_accept_max_age_s, token_reject_min_age_s,
                      ticket_key_period_s, token_key_period_s, zero_rtt_accept_max_age_s
               FROM quic_turnover_host WHERE run_id = %s ORDER BY hostname, address""", (turn["run_id"],)).fetchall()
    t = Table("host", "addr", "Retry", "tokens", "ticket life [s]", "0-RTT", "token ok ≤ [s]", "ticket key [s]",
              title=f"quic-turnover run {turn['run_id']}: measured (testbed truth)")
    exact = 0
    for (h, a, retry, tok, life, early, tacc, trej, tkp, _tokp, _z) in rows:
        g = quic[h]
        ok = (retry is g["retry"] and tok is g["issue_tokens"] and life == g["ticket_lifetime"]
              and early is g["early_data"])
        exact += ok
        t.add_row(h.split(".")[0], a, f"{retry} ({g['retry']})", f"{tok} ({g['issue_tokens']})",
                  f"{life} ({g['ticket_lifetime']})", f"{early} ({g['early_data']})",
                  (f"{tacc:.1f}..{trej:.1f} ({g['token_max_age']})" if tacc is not None and trej is not None
                   else "-"),
                  f"{tkp:.1f} ({g['ticket_key_rotation']})" if tkp else f"- ({g['ticket_key_rotation']})")
    out.print(t)
    found = sum(1 for h, q in support.items() if q and h in quic)
    false_pos = sum(1 for h, q in support.items() if q and h not in quic)
    out.print(f"discovery run {disc['run_id']} {disc['counts']}; handshake run {hs['run_id']} {hs['counts']}; "
              f"figures in {figs}")
    return (f"QUIC found on {found}/{len(quic)} configured hosts ({false_pos} false positives); "
            f"Retry/tokens/ticket lifetime/0-RTT as configured on {exact}/{len(rows)} addresses; "
            f"token and ticket acceptance ages and key periods in {figs}/quic-tracking.csv")
