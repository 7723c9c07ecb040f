"""A small real scanner used by the job tests (loaded with NETSURVEY_PLUGINS): TCP connect
to one address per target of a list, in the testbed's scale range 198.19.0.0/16
(address = 198.19.<rank // 256>.<rank % 256>), port 80, storing one row per target in
``test_tcp_probe`` through the shared ResultWriter."""
from __future__ import annotations

import asyncio
import ipaddress
import time
from dataclasses import dataclass

import typer

from netsurvey.clictx import migrated_db, open_scan
from netsurvey.measure import measurement
from netsurvey.scanning import Scanner, ScanOutcome, ScanStatus, ScanTarget, run_scan
from netsurvey.targets import select_targets
from netsurvey.writer import ResultWriter

TABLE_SQL = """CREATE TABLE IF NOT EXISTS test_tcp_probe (
    run_id bigint NOT NULL, hostname text NOT NULL, address inet NOT NULL,
    status text NOT NULL, connect_ms double precision)"""


@dataclass(frozen=True)
class ConnectResult:
    connect_ms: float  # time to complete the TCP handshake, milliseconds


class TcpConnectScanner(Scanner):
    name = "tcp-connect"

    async def scan(self, target: ScanTarget) -> ScanOutcome:
        await asyncio.sleep(self.options["delay"])
        t0 = time.perf_counter()
        try:
            _, w = await asyncio.wait_for(asyncio.open_connection(target.address, target.port), 3)
        except ConnectionRefusedError:
            return ScanOutcome(target, ScanStatus.CONNECTION_REFUSED)
        except asyncio.TimeoutError:
            return ScanOutcome(target, ScanStatus.CONNECTION_TIMEOUT)
        ms = (time.perf_counter() - t0) * 1000
        w.close()
        return ScanOutcome(target, ScanStatus.SUCCESS, ConnectResult(ms))


def register(app, scan_app) -> None:
    @measurement(scan_app, "tcp-connect", tables=("test_tcp_probe",))
    def tcp_connect(list_name: str = typer.Option(..., "--list"), delay: float = typer.Option(0.0, "--delay"),
                    concurrency: int = typer.Option(10, "--concurrency"),
                    fail_shard: int = typer.Option(-1, "--fail-shard", help="this shard fails after scanning")) -> None:
        """(test plugin) TCP connect to 198.19.x.y per target."""
        targets = [ScanTarget(t.hostname, str(ipaddress.ip_address("198.19.0.0") + t.rank), 80, t.rank)
                   for t in select_targets(migrated_db(), list_name)]
        with migrated_db().connect() as conn, conn.transaction():
            # CREATE TABLE IF NOT EXISTS is not safe against itself: two shards starting
            # together collided on pg_type (UniqueViolation) - the test's flake
            conn.execute("SELECT pg_advisory_xact_lock(hashtext('test_tcp_probe'))")
            conn.execute(TABLE_SQL)
        ctx = open_scan({"list": list_name, "delay": delay}, targets=targets, concurrency=concurrency)
        s = TcpConnectScanner()
        s.init({"delay": delay}, ctx)
        w = ResultWriter(ctx.db, "test_tcp_probe", ["run_id", "hostname", "address", "status", "connect_ms"],
                         types=["int8", "text", "inet", "text", "float8"], batch_rows=5)

        def store(o: ScanOutcome) -> None:
            w.write((ctx.run.id, o.target.hostname, ipaddress.ip_address(o.target.address), o.status.value,
                     o.result.connect_ms if o.result else None))

        counts = asyncio.run(run_scan(s, targets, store, concurrency=concurrency))
        w.close()
        from netsurvey import shard

        spec = shard.current()
        if spec is not None and spec.index == fail_shard:  # as a scanner that raised: commit as failed, exit 1
            ctx.run.finish("failed", counts)
            raise SystemExit(1)
        ctx.run.finish("finished", counts)
