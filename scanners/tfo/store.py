"""Storage of TFO observations (tables of schema/0002_tfo.sql) through ResultWriter."""
from __future__ import annotations

import ipaddress
from typing import Optional

from netsurvey.db import Database
from netsurvey.scanning import ScanOutcome
from netsurvey.writer import ResultWriter

PROBE_COLUMNS = ["run_id", "round", "rank", "hostname", "address", "port", "status", "reply", "tfo_kind",
                 "cookie", "cookie_len", "options", "rcv_window", "error"]


def _inet(a: Optional[str]):
    return ipaddress.ip_address(a) if a else None


class ProbeStore:
    """Writes one tfo_probe row per outcome; ``round`` 0 = support scan."""

    def __init__(self, db: Database, run_id: int, round_no: int = 0):
        self.run_id, self.round = run_id, round_no
        self.writer = ResultWriter(db, "tfo_probe", PROBE_COLUMNS, types="catalog")

    def __call__(self, o: ScanOutcome) -> None:
        r = o.result
        t = o.target
        self.writer.write((self.run_id, self.round, t.rank, t.hostname, _inet(t.address), t.port, o.status.value,
                           r.reply if r else None, r.tfo_kind if r else None, r.cookie if r else None,
                           r.cookie_len if r else None, list(r.options) if r else None,
                           r.window if r else None, o.error))

    def close(self) -> None:
        self.writer.close()


REUSE_COLUMNS = ["run_id", "hostname", "cookie_from", "address", "control", "cookie", "data_len", "reply",
                 "data_acked", "new_cookie", "status", "cookie_run_id"]

KERNEL_COLUMNS = ["run_id", "hostname", "address", "port", "raw_cookie", "kernel_cookie", "syn_data_acked", "error"]
