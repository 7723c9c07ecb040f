"""``netsurvey new-measurement NAME``: the scaffold of a new measurement (after zgrab2's
module scaffold). It writes exactly three things, and nothing else needs editing:

- ``scanners/<pkg>/`` — the package: ``__init__.py``, ``scanner.py`` (frozen options and
  result dataclasses with units, a ``Scanner`` with one ``scan(target) -> ScanOutcome``),
  ``cli.py`` (the declaration: ``@measurement(scan_app, NAME, tables=..., promise=...)``),
  ``promises.py`` (its promise case: how tests/promises/test_promises.py aims it at the
  testbed); found by ``scanners/__init__.py`` because it exists;
- ``schema/NNNN_<pkg>.sql`` — its table, every column commented with its unit;
- ``tests/scanners/<pkg>/test_scan_<pkg>.py`` — a test that runs it against a local listener
  (tests/ mirrors the code: each scanner package's tests in tests/scanners/<pkg>/).

The generated measurement is a working TCP connect-time probe; replace ``_probe`` with the
protocol. See docs/adding-a-measurement.md.
"""
from __future__ import annotations

import re
from pathlib import Path

from .errors import UsageError

_NAME = re.compile(r"^[a-z][a-z0-9]*(-[a-z0-9]+)*$")


def scaffold(name: str, root: Path) -> list[Path]:
    """Write the three parts of measurement ``name`` under ``root``; returns the paths."""
    if not _NAME.match(name):
        raise UsageError(f"{name!r}: a measurement name is lower-case letters, digits and '-' (e.g. ssh-hostkey)")
    pkg = name.replace("-", "_")
    root = Path(root)
    scanners, schema, tests = root / "scanners", root / "schema", root / "tests"
    for d in (scanners, schema, tests):
        if not d.is_dir():
            raise UsageError(f"{d}: not found (run in a netsurvey checkout or pass --root)")
    pkg_dir = scanners / pkg
    if pkg_dir.exists():
        raise UsageError(f"{pkg_dir}: already exists")
    numbers = [int(m.group(1)) for p in schema.glob("*.sql") if (m := re.match(r"^(\d{4})_", p.name))]
    migration = schema / f"{max(numbers, default=0) + 1:04d}_{pkg}.sql"
    test_dir = tests / "scanners" / pkg
    test = test_dir / f"test_scan_{pkg}.py"
    if test.exists():
        raise UsageError(f"{test}: already exists")
    sub = {"NAME": name, "PKG": pkg, "TABLE": f"{pkg}_probe", "CONST": pkg.upper()}
    files = {
        pkg_dir / "__init__.py": f'"""The {name} measurement (netsurvey new-measurement scaffold)."""\n',
        pkg_dir / "scanner.py": _fill(_SCANNER, sub),
        pkg_dir / "cli.py": _fill(_CLI, sub),
        pkg_dir / "promises.py": _fill(_PROMISES, sub),
        migration: _fill(_SQL, sub),
        test: _fill(_TEST, sub),
    }
    pkg_dir.mkdir()
    test_dir.mkdir(parents=True, exist_ok=True)
    for path, text in files.items():
        path.write_text(text)
    return list(files)


def _fill(template: str, sub: dict[str, str]) -> str:
    for k, v in sub.items():
        template = template.replace("{{" + k + "}}", v)
    return template


_SCANNER = '''"""Probing for the {{NAME}} measurement: options and result as frozen dataclasses with
units; one ``scan(target) -> ScanOutcome``; the wire work in private helpers."""
from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass

from netsurvey.scanning import Scanner, ScanOutcome, ScanStatus, ScanTarget


@dataclass(frozen=True)
class Options:
    """:ivar timeout_s: seconds one probe may take."""

    timeout_s: float = 3.0


@dataclass(frozen=True)
class Result:
    """:ivar connect_ms: time to complete the TCP handshake, milliseconds."""

    connect_ms: float


class {{PKG}}Scanner(Scanner):
    name = "{{NAME}}"

    async def scan(self, target: ScanTarget) -> ScanOutcome:
        if target.address is None:   # --target takes addresses: nothing to resolve
            return ScanOutcome(target, ScanStatus.UNKNOWN_ERROR, None, "no address")
        try:
            ms = await _probe(target.address, target.port, self.options.timeout_s)
        except ConnectionRefusedError:
            return ScanOutcome(target, ScanStatus.CONNECTION_REFUSED, None, "refused")
        except (asyncio.TimeoutError, TimeoutError):
            return ScanOutcome(target, ScanStatus.CONNECTION_TIMEOUT, None, "timeout")
        except OSError as exc:
            return ScanOutcome(target, ScanStatus.UNKNOWN_ERROR, None, str(exc)[:200])
        return ScanOutcome(target, ScanStatus.SUCCESS, Result(ms))


async def _probe(address: str, port: int, timeout_s: float) -> float:
    t0 = time.perf_counter()
    _, writer = await asyncio.wait_for(asyncio.open_connection(address, port), timeout_s)
    ms = (time.perf_counter() - t0) * 1000
    writer.close()
    return ms
'''

_CLI = '''"""`netsurvey scan {{NAME}}`: the declaration (its options are its CLI) and the output."""
from __future__ import annotations

import asyncio
import ipaddress
from typing import List

import typer

from netsurvey.measure import measurement
from netsurvey.options import concurrency_option, timeout_option
from netsurvey.selection import TargetSpelling, parse_target

from . import promises

COLUMNS = ["run_id", "address", "port", "status", "error", "connect_ms"]   # types: the table's, from the catalog

#: --target ADDRESS:PORT (an IPv6 address in brackets), read by the core's one target parser;
#: no default port, so the port must be given.
TARGETS = TargetSpelling("ADDRESS:PORT", names=False, addresses=True, ports=True)


def register(app: typer.Typer, scan_app: typer.Typer) -> None:
    @measurement(scan_app, "{{NAME}}", tables=("{{TABLE}}",), promise=promises.{{CONST}})
    def scan_{{PKG}}(
        target: List[str] = typer.Option(..., "--target", help="ADDRESS:PORT to probe (repeatable)."),
        timeout_s: float = timeout_option(3.0, help="How long one probe may take."),
        concurrency: int = concurrency_option(10, help="Probes in flight."),
    ) -> dict:
        """(scaffold) TCP connect time to each target, milliseconds."""
        from netsurvey.clictx import open_scan
        from netsurvey.scanning import run_scan
        from netsurvey.writer import ResultWriter

        from .scanner import Options, {{PKG}}Scanner

        targets = [parse_target(t, TARGETS, None) for t in target]
        ctx = open_scan({"targets": list(target), "timeout_s": timeout_s}, targets=targets,
                        concurrency=concurrency)
        scanner = {{PKG}}Scanner()
        scanner.init(Options(timeout_s=timeout_s), ctx)
        with ResultWriter(ctx.db, "{{TABLE}}", COLUMNS, types="catalog") as w:
            counts = asyncio.run(run_scan(scanner, targets, lambda o: w.write((
                ctx.run.id, ipaddress.ip_address(str(o.target.address)), o.target.port, o.status.value, o.error,
                o.result.connect_ms if o.result else None)), concurrency=concurrency, show_progress=False))
        ctx.counts.update(counts)   # the run path ends the run with these counts
        return {"run_id": ctx.run.id, "counts": counts}   # and prints this summary (text, or JSON with --json)
'''

_PROMISES = '''"""How the promise matrix (tests/promises/test_promises.py) aims {{NAME}} at the testbed:
--dry-run contacts nothing, a blocked address is never contacted, the rates hold, SIGTERM
keeps the rows, the worker's --config reaches the shards, no secret is recorded. Aim it at
hosts the measurement can contact (testbed/README.md): TCP 443 of a.test (198.18.2.20) and
b.test (198.18.2.21, the blocked one), and the 'scale' range (every address of 198.19.0.0/16
answers TCP 80 and 443) for the rate and SIGTERM cases, which need many attempts and a run
that lasts. A promise that does not apply goes into ``na`` with the reason."""
from __future__ import annotations

from netsurvey.measure import PromiseCase

SCALE = [f"198.19.0.{i}" for i in range(1, 25)]


def _targets(addresses, port=443):
    return [w for a in addresses for w in ("--target", f"{a}:{port}")]


{{CONST}} = PromiseCase(
    cmd=("scan", "{{NAME}}"),
    args=[*_targets(["198.18.2.20", "198.18.2.21"]), "--timeout", "2"],
    block="198.18.2.21", targets={"198.18.2.20", "198.18.2.21"},
    rate_args=[*_targets(SCALE), "--timeout", "1"], rate_targets=set(SCALE),
    term_args=[*_targets(SCALE), "--timeout", "1", "--concurrency", "1"])
'''

_SQL = '''-- {{NAME}}: one row per probed target (scaffold; netsurvey new-measurement).
CREATE TABLE {{TABLE}} (
    run_id      bigint NOT NULL REFERENCES scan_run (id) ON DELETE CASCADE,
    address     inet NOT NULL,
    port        integer NOT NULL,
    status      text NOT NULL,
    error       text,
    connect_ms  double precision,
    shard_id    bigint
);
CREATE INDEX ON {{TABLE}} (run_id);
COMMENT ON TABLE {{TABLE}} IS '{{NAME}}: one row per probed target';
COMMENT ON COLUMN {{TABLE}}.run_id IS 'scan_run.id of the run';
COMMENT ON COLUMN {{TABLE}}.address IS 'address probed';
COMMENT ON COLUMN {{TABLE}}.port IS 'TCP port probed';
COMMENT ON COLUMN {{TABLE}}.status IS 'zgrab2-style status (success, connection-refused, ...)';
COMMENT ON COLUMN {{TABLE}}.error IS 'short error text for anything but success';
COMMENT ON COLUMN {{TABLE}}.connect_ms IS 'time to complete the TCP handshake, milliseconds';
COMMENT ON COLUMN {{TABLE}}.shard_id IS 'job_shard.id of the shard that wrote the row (stamped by ResultWriter): its round and vantage; NULL for a run without shards (see row_vantage, shard_origin)';
'''

_TEST = '''"""The {{NAME}} measurement against a local listener (scaffold test)."""
from __future__ import annotations

import json
import socket
import threading

from conftest import run_cli


def test_{{PKG}}_probes_a_local_listener(db, tmp_path):
    srv = socket.create_server(("127.0.0.1", 0))
    port = srv.getsockname()[1]
    threading.Thread(target=lambda: [srv.accept()[0].close() for _ in range(2)], daemon=True).start()
    cfg = tmp_path / "survey.toml"
    cfg.write_text('[etiquette]\\nallow = ["127.0.0.1/32"]\\n')
    r = run_cli("--config", str(cfg), "scan", "{{NAME}}", "--target", f"127.0.0.1:{port}", "--json", dsn=db.dsn)
    assert r.returncode == 0, r.stderr
    run_id = json.loads(r.stdout.strip().splitlines()[-1])["run_id"]
    with db.connect() as conn:
        rows = conn.execute("SELECT status, connect_ms FROM {{TABLE}} WHERE run_id = %s", (run_id,)).fetchall()
    assert len(rows) == 1 and rows[0][0] == "success" and rows[0][1] > 0
    srv.close()


def test_{{PKG}}_dry_run_contacts_nothing(db, tmp_path):
    srv = socket.create_server(("127.0.0.1", 0))
    srv.settimeout(0.5)
    port = srv.getsockname()[1]
    cfg = tmp_path / "survey.toml"
    cfg.write_text('[etiquette]\\nallow = ["127.0.0.1/32"]\\n')
    r = run_cli("--config", str(cfg), "scan", "{{NAME}}", "--target", f"127.0.0.1:{port}", "--dry-run", dsn=db.dsn)
    assert r.returncode == 0 and "1 targets would be probed" in r.stdout, r.stderr
    try:
        srv.accept()
        raise AssertionError("the dry run connected")
    except socket.timeout:
        pass
    srv.close()
'''
