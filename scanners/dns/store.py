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

TTL_COLUMNS = ["run_id", "rank", "hostname", "qtype", "outcome", "rcode", "authoritative", "ttl", "answers",
               "cname", "zone", "nameserver", "transport", "truncated", "attempts", "rtt_ms", "error",
               "authority_count"]
ECS_COLUMNS = ["run_id", "rank", "hostname", "qtype", "resolver", "subnet", "outcome", "rcode",
               "source_prefix", "scope_prefix", "ecs_address", "ttl", "answers", "transport", "attempts",
               "rtt_ms", "error"]


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
    return ResultWriter(db, table, cols, types="catalog", background=True)
