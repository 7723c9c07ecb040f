"""CLI: ``netsurvey scan tls``, ``tls-lifetime``, ``tls-shared``, ``tls-zgrab``."""
from __future__ import annotations

import time
from pathlib import Path
from typing import Any, List, Mapping, Optional

import typer

from netsurvey.clictx import list_db
from netsurvey.errors import UsageError
from netsurvey.measure import measurement, text_summary
from netsurvey.options import (
    concurrency_option,
    deadline_option,
    duration_option,
    list_option,
    port_option,
    target_option,
    timeout_option,
    top_option,
)
from netsurvey.selection import TargetSelection, TargetSpelling

from . import promises
from .results import VERSIONS


def _versions(text: str) -> tuple[str, ...]:
    vs = tuple(dict.fromkeys(v.strip() for v in text.split(",") if v.strip()))
    bad = [v for v in vs if v not in VERSIONS]
    if bad or not vs:
        raise UsageError(f"--tls: unknown version {bad[0] if bad else text!r} (use 1.2, 1.3 or 1.2,1.3)")
    return vs


def _mechanisms(text: str) -> tuple[str, ...]:
    ms = tuple(dict.fromkeys(m.strip() for m in text.split(",") if m.strip()))
    if not ms or any(m not in ("id", "ticket") for m in ms):
        raise UsageError(f"--mechanism: expected id, ticket or id,ticket, got {text!r}")
    return ms


#: How the TLS commands' --target values are spelled: HOST (resolved; an address as a name
#: resolves to itself) or HOST=ADDRESS.
TARGETS = TargetSpelling("HOST[=ADDRESS]", names=True, pair="=")


def _hosts(list_name: Optional[str], top: Optional[int], targets: List[str], *,
           every_shard: bool = False) -> list[tuple[Optional[int], str, Optional[str]]]:
    """(rank, hostname, fixed address) of the --target entries, then the list's: the one
    builder's items (:mod:`netsurvey.selection`) held as the tls-lifetime, tls-shared and
    tls-zgrab runs keep them (in a shard the shard's share, or with ``every_shard`` all of
    them: tls-shared shares out its origins, each paired with every host)."""
    items = TargetSelection(list_name, top, tuple(targets)).items(TARGETS, targets_first=True,
                                                                   every_shard=every_shard)
    return [(t.rank, t.hostname, t.address) for t in items]  # type: ignore[misc]  # TARGETS: every entry named


def _render_survey(result: Mapping[str, Any]) -> str:
    """scan tls's text summary: one line per run (``--repeat`` makes several)."""
    runs = result.get("runs")
    return "\n".join(text_summary("tls", r) for r in runs) if isinstance(runs, list) else text_summary("tls", result)


def register(app: typer.Typer, scan_app: typer.Typer) -> None:

    @measurement(scan_app, "tls", tables=('tls_handshake',), promise=promises.TLS, render_text=_render_survey)
    def scan_tls(
        list_name: Optional[str] = list_option(help="Target list to scan (newest import)."),
        top: Optional[int] = top_option(help="Only the first N ranks."),
        target: List[str] = target_option(help="Ad-hoc target HOST or HOST=ADDRESS (repeatable)."),
        tls: str = typer.Option("1.2,1.3", "--tls", help="Versions to probe, each pinned: 1.2, 1.3 or 1.2,1.3."),
        port: int = port_option(443, help="TCP port."),
        timeout: float = timeout_option(5.0, help="Seconds per connect / read."),
        deadline: Optional[float] = deadline_option(help="Seconds one whole handshake may take (default 2 x --timeout)."),
        no_verify: bool = typer.Option(False, "--no-verify", help="Skip certificate verification (cert_verified NULL). By default a host whose certificate fails is measured regardless and the failure recorded."),
        no_check_resumption: bool = typer.Option(False, "--no-check-resumption",
                                                 help="Only the initial handshake (no immediate ID/ticket resumption)."),
        ipv6: bool = typer.Option(True, "--ipv6/--no-ipv6", help="Also probe IPv6 addresses."),
        tls13_request: str = typer.Option("HEAD", "--tls13-request", help="Request that collects TLS 1.3 tickets: HEAD or GET (BoringSSL sends its tickets only with a server write)."),
        concurrency: int = concurrency_option(100, help="Targets in flight."),
        repeat: int = typer.Option(1, "--repeat", min=1, help="Rounds (one scan_run each), for key_name rotation (Fig 4.10)."),
        interval: float = duration_option(0.0, "--interval", allow_zero=True, help="Time between round starts with --repeat."),
    ) -> dict:
        """TLS handshake survey: session IDs, tickets (key_name, lifetime), certificates (Fig 4.5-4.7, 4.10)."""
        from .results import TlsOptions
        from .run import run_survey

        versions = _versions(tls)
        if tls13_request not in ("HEAD", "GET"):
            raise UsageError("--tls13-request must be HEAD or GET")
        hosts = TargetSelection(list_name, top, tuple(target), port, ipv6).resolving(TARGETS)
        opts = TlsOptions(versions=versions, port=port, timeout=timeout, deadline=deadline, verify=not no_verify,
                          check_resumption=not no_check_resumption, ipv6=ipv6, tls13_request=tls13_request)
        runs = []
        for i in range(repeat):
            t0 = time.monotonic()
            runs.append(run_survey(hosts, opts, concurrency=concurrency, list_name=list_name))
            if i + 1 < repeat:
                time.sleep(max(0.0, interval - (time.monotonic() - t0)))
        return runs[0] if repeat == 1 else {"runs": runs}

    @measurement(scan_app, "tls-lifetime", tables=('tls_resumption',), promise=promises.TLS_LIFETIME)
    def scan_tls_lifetime(
        list_name: Optional[str] = list_option(help="Target list (newest import)."),
        top: Optional[int] = top_option(help="Only the first N ranks."),
        target: List[str] = target_option(help="Ad-hoc target HOST or HOST=ADDRESS (repeatable)."),
        max_age: float = duration_option(86400.0, "--max-age", help="Largest age tried."),
        step: float = duration_option(300.0, "--step", help="Spacing of ages."),
        mechanism: str = typer.Option("id,ticket", "--mechanism", help="id (TLS 1.2 session IDs), ticket, or both."),
        tls: str = typer.Option("1.2,1.3", "--tls", help="Versions: 1.2, 1.3 or 1.2,1.3."),
        chain: bool = typer.Option(False, "--chain", help="Present each renewed session (measures prolongation)."),
        keep_going: bool = typer.Option(False, "--keep-going", help="Try all ages even after a refusal."),
        ipv6: bool = typer.Option(True, "--ipv6/--no-ipv6", help="Also probe IPv6 addresses."),
        port: int = port_option(443),
        timeout: float = timeout_option(5.0, help="Seconds per connect / read."),
        no_verify: bool = typer.Option(False, "--no-verify", help="Accept any certificate."),
        concurrency: int = concurrency_option(100, help="Handshakes in flight."),
        sessions: int = typer.Option(0, "--sessions", min=0, help="Sessions held per host, mechanism and version "
                                     "(0 = ceil(sqrt(ages)): two search rounds)."),
        hosts_in_flight: int = typer.Option(1000, "--hosts-in-flight", min=1, help="Targets searched at once."),
        resume: Optional[int] = typer.Option(None, "--resume", help="Continue this interrupted run (its own "
                                             "targets and options)."),
    ) -> dict:
        """Measured maximum resumption lifetime per host and mechanism (Fig 4.6 measured, Fig 4.8)."""
        from .lifetime import LifetimeOptions
        from .run import resume_lifetime, run_lifetime

        if resume is not None:
            if list_name or target:
                raise UsageError("--resume takes the run's own targets: give no --list/--target")
            return resume_lifetime(resume)

        ma, st = max_age, step
        if st > ma:
            raise UsageError("--step must not exceed --max-age")
        opts = LifetimeOptions(max_age=ma, step=st, mechanisms=_mechanisms(mechanism), versions=_versions(tls),
                               chain=chain, stop_on_refusal=not keep_going, timeout=timeout, verify=not no_verify)
        hosts = _hosts(list_name, top, target)
        return run_lifetime(hosts, opts, port=port, ipv6=ipv6, concurrency=concurrency, slots=sessions,
                            hosts_in_flight=hosts_in_flight)

    @measurement(scan_app, "tls-shared", tables=('tls_resumption', 'tls_shared_group'), promise=promises.TLS_SHARED)
    def scan_tls_shared(
        list_name: Optional[str] = list_option(help="Target list (newest import)."),
        top: Optional[int] = top_option(help="Only the first N ranks."),
        target: List[str] = target_option(help="Ad-hoc target HOST or HOST=ADDRESS (repeatable)."),
        groups: Optional[Path] = typer.Option(None, "--groups", dir_okay=False,
                                              help="CSV 'group,hostname': pairs only within each group "
                                                   "(e.g. a site's domain tree)."),
        merge: List[int] = typer.Option([], "--merge", help="Only compute groups from these runs' attempts "
                                        "(e.g. of a run made with --shards/--procs, whose shards each probe "
                                        "their share of the origins and compute no groups)."),
        mechanism: str = typer.Option("id,ticket", "--mechanism", help="id, ticket or id,ticket."),
        tls: str = typer.Option("1.2,1.3", "--tls", help="Versions: 1.2, 1.3 or 1.2,1.3."),
        family: int = typer.Option(4, "--family", help="Address family of the pairs: 4 or 6."),
        port: int = port_option(443),
        timeout: float = timeout_option(5.0, help="Seconds per connect / read."),
        no_verify: bool = typer.Option(False, "--no-verify", help="Accept any certificate."),
        concurrency: int = concurrency_option(100, help="Handshakes in flight."),
    ) -> dict:
        """Cross-host resumption: shared-state groups, SAN groups and their union (Fig 4.9, Table 5.3)."""
        from .run import read_groups, run_shared
        from .shared import SharedOptions

        if family not in (4, 6):
            raise UsageError("--family must be 4 or 6")
        if merge:   # groups from runs that exist: a made-up id would record a run of nothing
            with list_db().connect() as conn:
                have = {r[0] for r in conn.execute("SELECT id FROM scan_run WHERE id = ANY(%s) AND kind = 'tls-shared'",
                                                   ([m for m in merge if 0 < m < 2**63],))}
            missing = [m for m in merge if m not in have]
            if missing:
                raise UsageError(f"--merge {missing[0]}: no tls-shared run has that id")
        group_map = read_groups(groups) if groups else None
        if group_map is not None:
            hosts: list[tuple[Optional[int], str, Optional[str]]]
            hosts = [(None, h, None) for h in sorted({h for g in group_map.values() for h in g})]
        else:
            hosts = _hosts(list_name, top, target, every_shard=True)   # the pairs' B side: every host
        opts = SharedOptions(mechanisms=_mechanisms(mechanism), versions=_versions(tls),
                             timeout=timeout, verify=not no_verify)
        return run_shared(hosts, opts, group_map=group_map, merge=tuple(merge), family=family, port=port,
                          concurrency=concurrency)

    @measurement(scan_app, "tls-zgrab", kind="tls", tables=('tls_handshake',), promise=promises.TLS_ZGRAB)
    def scan_tls_zgrab(
        list_name: Optional[str] = list_option(help="Target list (newest import)."),
        top: Optional[int] = top_option(help="Only the first N ranks."),
        target: List[str] = target_option(help="Ad-hoc target HOST or HOST=ADDRESS (repeatable)."),
        ingest: Optional[Path] = typer.Option(None, "--ingest", dir_okay=False, help="Import this zgrab2 JSON-lines file instead of running zgrab2 (- reads stdin)."),
        senders: int = typer.Option(100, "--senders", min=1, help="zgrab2 -s."),
        ipv6: bool = typer.Option(True, "--ipv6/--no-ipv6", help="Also probe IPv6 addresses."),
    ) -> dict:
        """Bulk TLS 1.2 ticket survey with zgrab2 (pinned), ingested into tls_handshake."""
        from .zgrab import run_zgrab

        if ingest is not None and str(ingest) != "-" and not ingest.exists():
            raise UsageError(f"{ingest}: file not found")
        hosts = _hosts(list_name, top, target) if ingest is None else []
        return run_zgrab(hosts, ingest=ingest, senders=senders, ipv6=ipv6)
