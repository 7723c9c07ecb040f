"""A small real scanner for the three-vantage campaign test (tests/core/test_three_vantages.py),
loaded with NETSURVEY_PLUGINS: one TCP connect per target of a list to port 80 of an
address in the test's own range - odd ranks IPv4 198.18.162.<rank>, even ranks IPv6
2001:2:0:162::<rank> (rank <= 254) - one row per target in ``test_vantage_probe`` through
the shared ResultWriter, which stamps ``shard_id`` (the committing shard: round, vantage)."""
from __future__ import annotations

import asyncio
import datetime as dt
import ipaddress
import time
from dataclasses import dataclass

import typer

from netsurvey.clictx import migrated_db, open_scan
from netsurvey.measure import measurement
from netsurvey.scanning import Scanner, ScanOutcome, ScanStatus, ScanTarget, run_scan
from netsurvey.targets import select_targets
from netsurvey.writer import ResultWriter

TABLE_SQL = """CREATE TABLE IF NOT EXISTS test_vantage_probe (
    run_id bigint NOT NULL REFERENCES scan_run(id), hostname text NOT NULL, address inet NOT NULL,
    status text NOT NULL, connect_ms double precision, probed_at timestamptz NOT NULL, shard_id bigint)"""


def address_of(rank: int) -> str:
    if not 1 <= rank <= 254:
        raise ValueError("rank out of the test's range")
    return f"198.18.162.{rank}" if rank % 2 else f"2001:2:0:162::{rank:x}"


@dataclass(frozen=True)
class ConnectResult:
    connect_ms: float
    probed_at: dt.datetime


class VantageProbeScanner(Scanner):
    name = "vantage-probe"

    async def scan(self, target: ScanTarget) -> ScanOutcome:
        await asyncio.sleep(self.options["delay"])
        at = dt.datetime.now(dt.timezone.utc)
        t0 = time.perf_counter()
        try:
            _, w = await asyncio.wait_for(asyncio.open_connection(target.address, target.port), 3)
        except ConnectionRefusedError:
            return ScanOutcome(target, ScanStatus.CONNECTION_REFUSED, ConnectResult(0.0, at))
        except asyncio.TimeoutError:
            return ScanOutcome(target, ScanStatus.CONNECTION_TIMEOUT, ConnectResult(0.0, at))
        ms = (time.perf_counter() - t0) * 1000
        w.close()
        return ScanOutcome(target, ScanStatus.SUCCESS, ConnectResult(ms, at))


def register(app, scan_app) -> None:
    @measurement(scan_app, "vantage-probe", tables=("test_vantage_probe",))
    def vantage_probe(list_name: str = typer.Option(..., "--list"), delay: float = typer.Option(0.0, "--delay"),
                      concurrency: int = typer.Option(1, "--concurrency")) -> None:
        """(test plugin) TCP connect to 198.18.162.x / 2001:2:0:162::x per target."""
        targets = [ScanTarget(t.hostname, address_of(t.rank), 80, t.rank)
                   for t in select_targets(migrated_db(), list_name)]
        with migrated_db().connect() as conn, conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(hashtext('test_vantage_probe'))")
            conn.execute(TABLE_SQL)
        ctx = open_scan({"list": list_name, "delay": delay}, targets=targets, concurrency=concurrency)
        s = VantageProbeScanner()
        s.init({"delay": delay}, ctx)
        w = ResultWriter(ctx.db, "test_vantage_probe", ["run_id", "hostname", "address", "status", "connect_ms",
                                                        "probed_at"],
                         types=["int8", "text", "inet", "text", "float8", "timestamptz"], batch_rows=5)

        def store(o: ScanOutcome) -> None:
            w.write((ctx.run.id, o.target.hostname, ipaddress.ip_address(o.target.address), o.status.value,
                     o.result.connect_ms if o.result else None, o.result.probed_at if o.result else
                     dt.datetime.now(dt.timezone.utc)))

        counts = asyncio.run(run_scan(s, targets, store, concurrency=concurrency))
        w.close()
        ctx.run.finish("finished", counts)
