"""Optional bulk backend for ``scan dns-ecs``: zdns v2.0.5 (pinned in tools/go, built by
scripts/build_go_tools.sh zdns). zdns takes one global client subnet, so this backend
serves exactly one ``--subnet``; its JSON lines are mapped to the same EcsProbe records as
the native engine. zdns has no rate limit of its own: ``--threads`` bounds what is in flight."""
from __future__ import annotations

import asyncio
import json
import tempfile
from pathlib import Path
from typing import AsyncIterator, Iterable

from netsurvey.gotools import require_tool, tool_version
from netsurvey.scanning import ScanOutcome, ScanStatus, ScanTarget

from .ecs import EcsProbe, EcsResult, EcsScanner

_OUTCOME = {"NOERROR": "answer", "NXDOMAIN": "nxdomain", "SERVFAIL": "servfail", "REFUSED": "refused",
            "TIMEOUT": "timeout", "ITERATIVE_TIMEOUT": "timeout"}


def zdns_binary() -> Path:
    """zdns on PATH, else tools/go/bin/zdns (netsurvey.gotools); UsageError if neither."""
    return require_tool("zdns")


def zdns_version() -> str:
    """The zdns version recorded in scan_run.parameters: the tools/go/go.mod pin for the
    repo's build, else the PATH binary's path and --version line."""
    return tool_version("zdns")


def probe_from_zdns(record: dict, subnet, qtype: str) -> EcsProbe:
    """One zdns output line -> EcsProbe (see ecs.EcsProbe for the fields)."""
    res = record.get("results", {}).get(qtype, {})
    data = res.get("data", {})
    status = res.get("status", "ERROR")
    ecs = next((a["csubnet"] for a in data.get("additionals", []) if "csubnet" in a), None)
    answers = [a for a in data.get("answers", []) if a.get("type") == qtype]
    outcome = _OUTCOME.get(status, "error")
    if outcome == "answer" and not answers:
        outcome = "nodata"
    return EcsProbe(
        subnet=subnet, outcome=outcome, rcode=status if outcome not in ("timeout", "error") else None,
        source_prefix=ecs["source_netmask"] if ecs else None, scope_prefix=ecs["source_scope"] if ecs else None,
        ecs_address=ecs["address"] if ecs else None,
        ttl=min(a["ttl"] for a in answers) if answers else None,
        answers=tuple(sorted(a["answer"] for a in answers)), transport=data.get("protocol"),
        error=None if outcome in ("answer", "nodata") else (res.get("error") or status)[:300])


class ZdnsEcsScanner(EcsScanner):
    """dns-ecs through zdns (one subnet)."""

    threads: int = 100

    async def scan_many(self, targets: Iterable[ScanTarget], concurrency: int) -> AsyncIterator[ScanOutcome]:
        o = self.options
        (subnet,) = o.subnets
        host, port = o.resolver
        server = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
        by_name = {t.hostname.rstrip(".").lower(): t for t in targets}  # type: ignore[union-attr]  # a survey of names
        self.engine.stats = {"sent": 0, "replies": 0, "retransmits": 0, "timeouts": 0, "stray": 0, "mismatched": 0,
                             "tcp": 0, "window_cuts": 0, "backend": "zdns"}  # type: ignore[dict-item]  # names the backend
        with tempfile.NamedTemporaryFile("w", suffix=".txt") as fh:
            fh.write("\n".join(by_name) + "\n")
            fh.flush()
            proc = await asyncio.create_subprocess_exec(
                str(zdns_binary()), o.qtype, "--name-servers", server, "--client-subnet", str(subnet),
                "--threads", str(min(self.threads, concurrency)), "-f", fh.name, "-q", "--retries", str(o.engine.retries),
                "--network-timeout", str(max(1, round(o.engine.initial_rto))),
                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL)
            assert proc.stdout is not None   # a PIPE
            async for line in proc.stdout:
                try:
                    rec = json.loads(line)
                    t = by_name.pop(rec["name"].rstrip(".").lower())
                except (ValueError, KeyError):
                    continue
                p = probe_from_zdns(rec, subnet, o.qtype)
                self.engine.stats["replies"] += p.outcome not in ("timeout", "error")
                ok = p.outcome in ("answer", "nodata")
                status = ScanStatus.SUCCESS if ok else (ScanStatus.IO_TIMEOUT if p.outcome == "timeout" else
                                                        ScanStatus.RESOLUTION_FAILED if p.outcome == "nxdomain"
                                                        else ScanStatus.APPLICATION_ERROR)
                yield ScanOutcome(t, status, EcsResult(t.hostname, host, (p,)), None if ok else p.error)  # type: ignore[arg-type]  # a name
            await proc.wait()
        for t in by_name.values():  # zdns printed nothing for these
            yield ScanOutcome(t, ScanStatus.UNKNOWN_ERROR, None, f"zdns exited {proc.returncode} without a result")
