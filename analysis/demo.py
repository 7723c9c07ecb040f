"""Demo step: run the simulation models on the thesis's published inputs, compare with the
thesis's published outputs, and write the HTML report of everything the database holds
(the scanner steps run before this one)."""
from __future__ import annotations

from pathlib import Path

STEP = "analysis: models and report"


def run(state, out) -> str:
    from .models.quic import OobOptions, RttTriplet, oob_tokens, quicsocks_latency
    from .models.tfo_revisits import tfo_revisits
    from .models.trust import Costs, savings
    from .report import build_report

    checks = []
    t36 = tfo_revisits([0.393, 0.247, 0.0956])["revisits"]
    worst = max(abs(r["tfo_tls"]["mean_delay_saved_ms"] - pub) for r, pub in zip(t36, (36.4, 45.5, 63.1)))
    checks.append(("Table 3.6 mean delay saved", worst <= 0.1, f"max |ours - thesis| = {worst:.2f} ms"))
    lat = quicsocks_latency(RttTriplet("LTE", 30, 30, 60))
    checks.append(("Table 9.2", (lat["status_quo"], lat["proposal"], lat["status_quo_retry"], lat["proposal_retry"])
                   == (90, 60, 150, 90), str(lat)))
    eq = savings(20.24, 8.35, 4.04, 2.46, Costs())
    checks.append(("eq. 5.5 Δ_connect", round(eq["delta_connect_ms"], 2) == 36.07, f"{eq['delta_connect_ms']:.2f} ms"))
    oob = oob_tokens(OobOptions())["web_browsing"]["delay_saved_until_last_connection_ms"]
    checks.append(("Fig 8.3 web gain", round(oob, 1) == 363.6, f"{oob:.1f} ms"))
    for name, ok, detail in checks:
        out.print(f"{'ok ' if ok else 'MISMATCH'} {name}: {detail}")
    db = state.db
    db.migrate()
    import os

    summary = build_report(db, Path(os.environ.get("NETSURVEY_DEMO_OUT", "out")) / "report", ())
    out.print(f"report: {summary['index']} ({summary['rendered']} rendered, {summary['missing']} without data, "
              f"{summary['failed']} failed)")
    good = sum(ok for _, ok, _ in checks)
    if good != len(checks) or summary["failed"]:
        raise RuntimeError(f"{len(checks) - good} thesis checks mismatched, {summary['failed']} figures failed")
    return (f"{good}/{len(checks)} thesis worked numbers reproduced (Table 3.6 within 0.1 ms, Table 9.2 and eq. 5.5 exact); "
            f"report {summary['index']}: {summary['rendered']} figures, {summary['missing']} without data")
