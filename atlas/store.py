"""Writes of the campaign (idempotent: every insert is ON CONFLICT DO NOTHING, so a
re-fetch adds nothing twice). Volumes are small (a few rows per probe), so plain
executemany is used rather than the COPY writer, which cannot skip duplicates."""
from __future__ import annotations

import json
import math
from typing import Iterable, Optional

from .parse import DnsObservation, PingObservation, result_key


def _exec(conn, sql: str, rows: list) -> int:
    if not rows:
        return 0
    with conn.cursor() as cur:
        cur.executemany(sql, rows)
        return max(cur.rowcount, 0)


def add_measurement(conn, run_id: int, msm_id: int, role: str, af: int, target: Optional[str],
                    prb_ids: list[int], definition: dict) -> None:
    conn.execute(
        "INSERT INTO atlas_measurement (run_id, msm_id, role, af, target, prb_ids, definition)"
        " VALUES (%s,%s,%s,%s,%s,%s,%s) ON CONFLICT DO NOTHING",
        (run_id, msm_id, role, af, target, prb_ids, json.dumps(definition)))


def set_measurement_status(conn, run_id: int, msm_id: int, status: str, fetched: bool) -> None:
    conn.execute("UPDATE atlas_measurement SET status=%s,"
                 " fetched_at = CASE WHEN %s THEN now() ELSE fetched_at END"
                 " WHERE run_id=%s AND msm_id=%s", (status, fetched, run_id, msm_id))


def _jsonb_text(obj) -> str:
    """JSON text jsonb accepts: non-finite numbers (which Python's json reads from
    'Infinity' / 1e999) become strings, NUL characters U+FFFD (jsonb holds neither)."""
    def fix(o):
        if isinstance(o, float) and not math.isfinite(o):
            return str(o)
        if isinstance(o, dict):
            return {k: fix(v) for k, v in o.items()}
        if isinstance(o, list):
            return [fix(v) for v in o]
        return o
    try:
        text = json.dumps(obj, allow_nan=False)
    except ValueError:
        text = json.dumps(fix(obj))
    return text.replace("\\u0000", "\\ufffd")


def add_raw(conn, run_id: int, results: Iterable[dict], msm_id: Optional[int] = None) -> int:
    """Raw result objects, keyed by parse.result_key (``msm_id``: the measurement fetched,
    standing in for an object without a usable one)."""
    return _exec(conn, "INSERT INTO atlas_result_raw (run_id, msm_id, prb_id, ts, result)"
                       " VALUES (%s,%s,%s,%s,%s) ON CONFLICT DO NOTHING",
                 [(run_id, *result_key(r, msm_id), _jsonb_text(r)) for r in results])


def add_dns(conn, run_id: int, rows: Iterable[DnsObservation]) -> int:
    return _exec(conn, "INSERT INTO atlas_dns_response (run_id, msm_id, prb_id, ts, subid, af,"
                       " resolver_addr, src_addr, qname, rt_ms, egress_addr, error)"
                       " VALUES (%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s) ON CONFLICT DO NOTHING",
                 [(run_id, o.msm_id, o.prb_id, o.ts, o.subid, o.af, o.resolver_addr, o.src_addr,
                   o.qname, o.rt_ms, o.egress_addr, o.error) for o in rows])


def add_resolvers(conn, run_id: int, rows: Iterable[tuple]) -> int:
    """rows: (prb_id, address, kind, local_addr, subid, is_private, ping_skipped)."""
    return _exec(conn, "INSERT INTO atlas_resolver (run_id, prb_id, address, kind, local_addr,"
                       " subid, is_private, ping_skipped) VALUES (%s,%s,%s,%s,%s,%s,%s,%s)"
                       " ON CONFLICT DO NOTHING", [(run_id, *r) for r in rows])


def add_pings(conn, run_id: int, role: str, rows: Iterable[PingObservation]) -> int:
    return _exec(conn, "INSERT INTO atlas_ping (run_id, msm_id, prb_id, ts, role, af, dst_addr,"
                       " dst_name, sent, rcvd, avg_ms, min_ms, max_ms, rtts_ms, error)"
                       " VALUES (%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s) ON CONFLICT DO NOTHING",
                 [(run_id, o.msm_id, o.prb_id, o.ts, role, o.af, o.dst_addr, o.dst_name, o.sent,
                   o.rcvd, o.avg_ms, o.min_ms, o.max_ms, list(o.rtts_ms), o.error) for o in rows])


def add_probes(conn, run_id: int, probes: Iterable[dict]) -> int:
    return _exec(conn, "INSERT INTO atlas_probe (run_id, prb_id, country_code, asn_v4, asn_v6,"
                       " address_v4, address_v6, status) VALUES (%s,%s,%s,%s,%s,%s,%s,%s)"
                       " ON CONFLICT DO NOTHING",
                 [(run_id, p["id"], p.get("country_code"), p.get("asn_v4"), p.get("asn_v6"),
                   p.get("address_v4"), p.get("address_v6"),
                   (p.get("status") or {}).get("name")) for p in probes])


def add_asn(conn, run_id: int, mappings) -> int:
    return _exec(conn, "INSERT INTO atlas_asn (run_id, address, asn, prefix) VALUES (%s,%s,%s,%s)"
                       " ON CONFLICT (run_id, address) DO UPDATE SET asn=EXCLUDED.asn,"
                       " prefix=EXCLUDED.prefix",
                 [(run_id, m.address, m.asn, m.prefix) for m in mappings])


def add_server_ping(conn, run_id: int, address: str, status: str, r, error: Optional[str]) -> int:
    row = (run_id, address, status, r.sent if r else None, r.rcvd if r else None,
           r.avg_ms if r else None, r.min_ms if r else None, r.max_ms if r else None,
           list(r.rtts_ms) if r else None, error)
    return _exec(conn, "INSERT INTO atlas_server_ping (run_id, address, status, sent, rcvd, avg_ms,"
                       " min_ms, max_ms, rtts_ms, error) VALUES (%s,%s,%s,%s,%s,%s,%s,%s,%s,%s)"
                       " ON CONFLICT DO NOTHING", [row])
