"""Measured constants for the models (issue 25): the thesis's handshake costs, or ours.

:class:`analysis.models.trust.Costs` defaults to the thesis's constants (Table 5.1: a full
TLS 1.3 handshake with a short transfer 29.17 ms at ~0.3 ms latency; eq. 5.3: Δ_1RTT 22.83 ms;
Table 5.2: ~8 ms CPU per peer for a full handshake, ~2 ms resumed; an LTE RTT of 60 ms).
:func:`measured_costs` reads the newest finished ``handshake-timing`` run (or the one given)
from the database and returns the costs it measured, each with a label saying where it
came from ("measured: run N ..." or "thesis ..."): a value the run lacks stays the thesis's.
Analysis never touches the network: this only reads the database.
"""
from __future__ import annotations

from typing import Optional

from .trust import Costs

THESIS_LABELS = {
    "full_ms": "thesis Table 5.1 (TLS 1.3 full, ~0.3 ms latency)",
    "delta_ms": "thesis eq. 5.3 (Δ_1RTT lower bound)",
    "full_cpu_ms": "thesis Table 5.2 (~8 ms per peer)",
    "resumed_cpu_ms": "thesis Table 5.2 (~2 ms per peer)",
    "rtt_ms": "thesis (U.S. LTE RTT, sec. 3.4)",
}


def measured_costs(db, run_id: Optional[int] = None, address: Optional[str] = None) -> tuple[Costs, dict]:
    """(Costs, labels): measured where the handshake-timing run has the value, else the thesis's."""
    thesis = Costs()
    values = {k: getattr(thesis, k) for k in THESIS_LABELS}
    labels = dict(THESIS_LABELS)
    with db.connect() as conn:
        if run_id is None:
            row = conn.execute("SELECT max(id) FROM scan_run WHERE kind = 'handshake-timing' AND status = 'finished'"
                               ).fetchone()
            run_id = row[0] if row else None
        if run_id is None:
            return thesis, labels
        q = ("SELECT method, avg(ttfb_mean_ms), avg(client_cpu_mean_ms), avg(server_cpu_mean_ms), max(link_rtt_ms) "
             "FROM handshake_timing_summary WHERE run_id = %s AND samples_ok > 0"
             + (" AND address = %s::inet" if address else "") + " GROUP BY method")
        rows = {r[0]: r[1:] for r in conn.execute(q, (run_id, address) if address else (run_id,)).fetchall()}
    tag = f"measured: handshake-timing run {run_id}"
    full, psk = rows.get("tls13_full"), rows.get("tls13_psk")
    if full and full[0] is not None:
        values["full_ms"], labels["full_ms"] = full[0], f"{tag}, tls13_full mean time to first byte"
        if full[3] is not None:
            values["rtt_ms"], labels["rtt_ms"] = full[3], f"{tag}, configured RTT of the path"
    if full and psk and full[0] is not None and psk[0] is not None:
        values["delta_ms"], labels["delta_ms"] = max(full[0] - psk[0], 0.0), f"{tag}, tls13_full - tls13_psk mean"

    def per_peer(r):
        cpus = [x for x in (r[1], r[2]) if x is not None]
        return sum(cpus) / len(cpus) if cpus else None, ("client and server" if len(cpus) == 2 else "client")

    if full:
        v, who = per_peer(full)
        if v is not None:
            values["full_cpu_ms"], labels["full_cpu_ms"] = v, f"{tag}, tls13_full CPU per peer ({who})"
    if psk:
        v, who = per_peer(psk)
        if v is not None:
            values["resumed_cpu_ms"], labels["resumed_cpu_ms"] = v, f"{tag}, tls13_psk CPU per peer ({who})"
    return Costs(**values), labels
