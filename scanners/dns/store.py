"""Rows for dns_ttl_probe and dns_ecs_probe (schema/0005_dns.sql) from scan outcomes."""
from __future__ import annotations

import functools
import ipaddress
from typing import Iterator, Optional

from netsurvey.db import Database
from netsurvey.scanning import ScanOutcome
from netsurvey.writer import ResultWriter

from .ecs import EcsResult
from .ttl import TtlResult

TTL_COLUMNS = [("run_id", "int8"), ("rank", "int4"), ("hostname", "text"), ("qtype", "text"), ("outcome", "text"),
               ("rcode", "text"), ("authoritative", "bool"), ("ttl", "int4"), ("answers", "text[]"),
               ("cname", "text"), ("zone", "text"), ("nameserver", "inet"), ("transport", "text"),
               ("truncated", "bool"), ("attempts", "int2"), ("rtt_ms", "float4"), ("error", "text"),
               ("authority_count", "int2")]
ECS_COLUMNS = [("run_id", "int8"), ("rank", "int4"), ("hostname", "text"), ("qtype", "text"), ("resolver", "inet"),
               ("subnet", "cidr"), ("outcome", "text"), ("rcode", "text"), ("source_prefix", "int2"),
               ("scope_prefix", "int2"), ("ecs_address", "inet"), ("ttl", "int4"), ("answers", "text[]"),
               ("transport", "text"), ("attempts", "int2"), ("rtt_ms", "float4"), ("error", "text")]


@functools.lru_cache(maxsize=65536)
def _ip(a: Optional[str]):
    """The address object psycopg stores as inet (cached: a scan asks few servers, and
    parsing one costs ~10 us)."""
    return ipaddress.ip_address(a) if a else None


def ttl_rows(run_id: int, o: ScanOutcome, qtypes: tuple[str, ...]) -> Iterator[tuple]:
    t = o.target
    host = (t.hostname or "").rstrip(".").lower()
    if not isinstance(o.result, TtlResult):  # the scanner raised: record every type as an error
        for q in qtypes:
            yield (run_id, t.rank, host, q, "blocked" if o.status.value == "blocked" else "error", None, None, None,
                   [], None, None, None, None, False, 0, None, (o.error or o.status.value)[:300], None)
        return
    for p in o.result.probes:
        yield (run_id, t.rank, host, p.qtype, p.outcome, p.rcode, p.authoritative, p.ttl, list(p.answers), p.cname,
               p.zone, _ip(p.nameserver), p.transport, p.truncated, min(p.attempts, 32767), p.rtt_ms,
               p.error[:300] if p.error else None, p.authority_count)


def ecs_rows(run_id: int, o: ScanOutcome, qtype: str, resolver: str, subnets) -> Iterator[tuple]:
    t = o.target
    host = (t.hostname or "").rstrip(".").lower()
    if not isinstance(o.result, EcsResult):
        for s in subnets:
            yield (run_id, t.rank, host, qtype, _ip(resolver), s, "error", None, None, None, None, None, [], None, 0,
                   None, (o.error or o.status.value)[:300])
        return
    for p in o.result.probes:
        yield (run_id, t.rank, host, qtype, _ip(resolver), p.subnet, p.outcome, p.rcode, p.source_prefix,
               p.scope_prefix, _ip(p.ecs_address), p.ttl, list(p.answers), p.transport, min(p.attempts, 32767),
               p.rtt_ms, p.error[:300] if p.error else None)


def writer(db: Database, table: str) -> ResultWriter:
    cols = TTL_COLUMNS if table == "dns_ttl_probe" else ECS_COLUMNS
    return ResultWriter(db, table, [c for c, _ in cols], types=[t for _, t in cols], background=True)
