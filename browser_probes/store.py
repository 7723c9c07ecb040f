"""Writing browser measurements to PostgreSQL (tables of schema/0007_browser.sql)."""
from __future__ import annotations

import ipaddress
from typing import Optional

from netsurvey.db import Database

from .pageload import VisitResult

_RES_COLS = ["run_id", "visit_id", "resource_no", "parent_no", "redirected_from_no", "url", "hostname",
             "resource_type", "initiator_type", "method", "http_status", "protocol", "connection_id",
             "connection_reused", "from_cache", "remote_address", "remote_port", "created_ms", "dispatched_ms",
             "first_byte_sent_ms", "first_byte_received_ms", "last_byte_received_ms", "encoded_bytes", "failed"]


def _ip(a: Optional[str]):
    if not a:
        return None
    try:
        return ipaddress.ip_address(a.strip("[]"))
    except ValueError:
        return None


class VisitStore:
    """Stores each visit at once (one transaction per visit: visit, resources, domain edges)."""

    def __init__(self, db: Database, run_id: int):
        self.conn = db.connect()
        self.run_id = run_id

    def __call__(self, v: VisitResult) -> int:
        with self.conn.transaction():
            vid = self.conn.execute(
                """INSERT INTO browser_visit (run_id, browser, browser_version, worker, url, final_url, started_at,
                   duration_s, status, error, n_resources, page_load_time_ms, tree_height, longest_new_conn_path)
                   VALUES (%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s) RETURNING id""",
                (self.run_id, v.browser, v.browser_version, v.worker, v.url, v.final_url, v.started_at, v.duration_s,
                 v.status, v.error, len(v.resources), v.page_load_time_ms, v.tree_height,
                 v.longest_new_conn_path)).fetchone()[0]
            if v.resources:
                with self.conn.cursor().copy(
                        f"COPY browser_resource ({', '.join(_RES_COLS)}) FROM STDIN") as cp:
                    for r in v.resources:
                        cp.write_row((self.run_id, vid, r.no, r.parent_no, r.redirected_from_no, r.url, r.hostname,
                                      r.resource_type, r.initiator_type, r.method, r.http_status, r.protocol,
                                      r.connection_id, r.connection_reused, r.from_cache, _ip(r.remote_address),
                                      r.remote_port, r.created_ms, r.dispatched_ms, r.first_byte_sent_ms,
                                      r.first_byte_received_ms, r.last_byte_received_ms, r.encoded_bytes, r.failed))
            if v.domain_edges:
                self.conn.cursor().executemany(
                    "INSERT INTO browser_domain_edge (run_id, visit_id, parent_hostname, hostname, first_resource_no,"
                    " depth) VALUES (%s,%s,%s,%s,%s,%s)",
                    [(self.run_id, vid, e.parent_hostname, e.hostname, e.first_resource_no, e.depth)
                     for e in v.domain_edges])
        return vid

    def close(self) -> None:
        self.conn.close()
