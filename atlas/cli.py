"""`netsurvey atlas ...`: the instrumented authoritative server, the campaign, re-fetching
and AS mapping (output formatting only; the work is in the sibling modules)."""
from __future__ import annotations

import ipaddress
import json
from pathlib import Path
from typing import List, Optional

import typer
from rich.console import Console

from netsurvey.clictx import migrated_db, open_scan, state
from netsurvey.errors import UsageError
from netsurvey.measure import measurement, run_path
from netsurvey.options import json_option, port_option, timeout_option

from . import promises

atlas_app = typer.Typer(no_args_is_help=True,
                        help="RIPE Atlas: resolver RTT campaign (thesis 2.4.1, 9.4.2).")
err = Console(stderr=True)


def _fail(exc: Exception, run=None) -> None:
    from .api import AtlasAuthError

    if run is not None:   # the run path ends it 'failed' with this
        run.counts["error"] = str(exc)[:300]
    if isinstance(exc, AtlasAuthError):
        raise UsageError(str(exc))
    err.print(f"netsurvey: error: {exc}", highlight=False, markup=False, soft_wrap=True)
    raise typer.Exit(1)


def _zone(zone: str) -> str:
    import dns.name

    z = zone.strip().rstrip(".").lower()
    try:
        n = dns.name.from_text(z)
    except Exception:  # noqa: BLE001
        raise UsageError(f"--zone {zone!r}: not a domain name") from None
    if len(n.labels) < 3 or not z:
        raise UsageError(f"--zone {zone!r}: not a domain name")
    return z


def _addr(value: str, flag: str) -> str:
    try:
        return str(ipaddress.ip_address(value))
    except ValueError:
        raise UsageError(f"{flag} {value!r}: not an IP address") from None


@atlas_app.command("authoritative")
def authoritative_cmd(
    zone: str = typer.Option(..., "--zone", help="Zone to answer for (delegated to this server)."),
    listen: List[str] = typer.Option(..., "--listen", help="Address to bind (repeatable)."),
    port: int = port_option(53, help="UDP/TCP port."),
    max_seconds: Optional[float] = typer.Option(None, "--max-seconds",
                                                help="Stop after this many seconds (default: until SIGTERM)."),
) -> None:
    """Serve ZONE and log every query (name, source, time, ECS) to atlas_auth_query."""
    from .authoritative import AuthOptions

    opts = AuthOptions(zone=_zone(zone), listen=tuple(_addr(a, "--listen") for a in listen), port=port)
    with run_path("atlas-authoritative"):   # the core ends the run: finished, or failed with the error
        _serve(opts, port, max_seconds)


def _serve(opts, port: int, max_seconds) -> None:
    import asyncio

    from netsurvey.writer import ResultWriter

    from .authoritative import AuthServer, serve_until_stopped

    ctx = open_scan({"zone": opts.zone, "listen": list(opts.listen), "port": port}, kind="atlas-authoritative")
    cols = ["run_id", "received_at", "zone", "qname", "qtype", "proto", "src_addr", "src_port",
            "ecs_addr", "ecs_source_prefix", "rcode"]
    writer = ResultWriter(ctx.db, "atlas_auth_query", cols, batch_rows=1000)
    server = AuthServer(opts, lambda r: writer.write(
        (ctx.run.id, r.received_at, r.zone, r.qname, r.qtype, r.proto, r.src_addr, r.src_port,
         r.ecs_addr, r.ecs_source_prefix, r.rcode)))

    def ready():
        print(f"READY run={ctx.run.id} zone={opts.zone} " +
              " ".join(f"{a}:{port}" for a in opts.listen), flush=True)
    try:
        asyncio.run(serve_until_stopped(server, writer.flush, opts.flush_s, max_seconds, ready))
    except OSError as exc:
        writer.close()
        ctx.counts["error"] = str(exc)[:300]
        raise UsageError(f"cannot listen on {', '.join(opts.listen)} port {port}: {exc}") from None
    writer.close()
    ctx.counts.update({"queries": server.queries})


def _api(host: Optional[str], ca_bundle: Optional[Path], need_key: bool = True):
    from .options import api_options, atlas_config

    cfg = atlas_config(state.config)
    opts = api_options(cfg, host, str(ca_bundle) if ca_bundle else None, need_key)
    _check_api_host(opts.host)
    return cfg, opts


def _check_api_host(host: str) -> None:
    """The API host (the testbed's stand-in atlas.test, or an address of it) must not be a
    testbed address this namespace reaches by its default route (the session-31 adversary:
    'atlas run --api-host 198.18.77.80' outside the testbed made 10 HTTPS connections over
    it); a name is checked at the addresses it resolves to, as the API client will resolve it."""
    import socket

    from netsurvey.etiquette import check_on_machine
    from netsurvey.resolve import system_resolver

    bare = host[1:].partition("]")[0] if host.startswith("[") else (host if host.count(":") > 1
                                                                      else host.partition(":")[0])
    try:
        ipaddress.ip_address(bare)
        check_on_machine("--api-host", bare)
        return
    except ValueError:
        pass
    system_resolver(option="--api-host")   # resolv.conf's resolver first: the lookup below asks it
    try:
        infos = socket.getaddrinfo(bare, 443, type=socket.SOCK_STREAM)
    except OSError:
        return   # unresolvable: the API client fails the same way, contacting nobody
    for addr in dict.fromkeys(i[4][0] for i in infos):
        check_on_machine(f"--api-host {host} resolves to", addr)


@measurement(atlas_app, "atlas", command="run", tables=("atlas_measurement", "atlas_result_raw"), promise=promises.ATLAS)
def run_cmd(
    probes: List[str] = typer.Option(..., "--probes", help="Probe source TYPE:VALUE (repeatable): "
                                     "country:DE, asn:3320, area:WW, prefix:P, probes:1,2,3."),
    count: int = typer.Option(800, "--count", help="Probes requested per source."),
    server: Optional[str] = typer.Option(None, "--server", help="Test server address (RTT_direct "
                                         "target); default [scanners.atlas] server_v4/v6."),
    zone: Optional[str] = typer.Option(None, "--zone", help="Instrumented zone (default [scanners.atlas] zone)."),
    af: int = typer.Option(4, "--af", help="Address family, 4 or 6."),
    asn_db: Optional[Path] = typer.Option(None, "--asn-db", dir_okay=False, help="pyasn IP-to-ASN file for the AS classification."),
    api_host: Optional[str] = typer.Option(None, "--api-host", help="API host (default atlas.ripe.net)."),
    ca_bundle: Optional[Path] = typer.Option(None, "--ca-bundle", dir_okay=False, help="CA bundle to verify the API with."),
    poll: Optional[float] = typer.Option(None, "--poll", help="Seconds between status polls."),
    timeout: Optional[float] = timeout_option(None, help="Give up waiting after this many seconds."),
    no_server_ping: bool = typer.Option(False, "--no-server-ping", help="Skip RTT_Server pings from this host."),
) -> Optional[dict]:
    """Run a campaign: resolver discovery, probe pings, server pings, AS mapping."""
    from .api import AtlasApiError, AtlasClient
    from .campaign import Campaign
    from .options import CampaignOptions

    cfg, api_opts = _api(api_host, ca_bundle)
    if af not in (4, 6):
        raise UsageError(f"--af {af}: must be 4 or 6")
    if count < 1:
        raise UsageError(f"--count {count}: must be positive")
    server = server or cfg.get(f"server_v{af}")
    if not server:
        raise UsageError(f"--server is required (or [scanners.atlas] server_v{af})")
    server = _addr(server, "--server")
    if ipaddress.ip_address(server).version != af:
        raise UsageError(f"--server {server}: not an IPv{af} address (--af {af})")
    zone = _zone(zone or cfg.get("zone") or "")
    asn_db = asn_db or (Path(cfg["asn_db"]) if cfg.get("asn_db") else None)
    if asn_db is not None:
        from .asmap import AsnMap
        AsnMap(asn_db)  # fail before creating anything
    o = CampaignOptions(selectors=tuple(probes), count=count, server=server, zone=zone, af=af,
                        asn_db=asn_db, server_ping=not no_server_ping,
                        poll_interval_s=poll if poll is not None else float(cfg.get("poll_interval_s", 10)),
                        timeout_s=timeout if timeout is not None else float(cfg.get("timeout_s", 1800)))
    o.sources()  # validate selectors before opening a run
    params = {k: (str(v) if isinstance(v, Path) else v) for k, v in o.__dict__.items()}
    params["api_host"] = api_opts.host
    ctx = open_scan(params, packages=("ripe.atlas.cousteau", "ripe.atlas.sagan", "pyasn", "icmplib"))
    client = AtlasClient(api_opts, log=lambda m: err.print(m, markup=False, highlight=False))
    try:
        counts = Campaign(client, ctx, o, log=lambda m: err.print(m, markup=False, highlight=False)).run()
    except AtlasApiError as exc:
        _fail(exc, ctx.run)
        return None
    counts["api_retries"] = client.retries_done
    ctx.counts.update(counts)
    return {"run_id": ctx.run.id, **counts}


@atlas_app.command("fetch")
def fetch_cmd(
    run: int = typer.Option(..., "--run", help="Campaign run id."),
    api_host: Optional[str] = typer.Option(None, "--api-host", help="API host (default atlas.ripe.net)."),
    ca_bundle: Optional[Path] = typer.Option(None, "--ca-bundle", dir_okay=False, help="CA bundle to verify the API with."),
    as_json: bool = json_option(help="JSON output."),
) -> None:
    """Fetch (again) the results of a campaign's measurements; adds only what is new."""
    from .api import AtlasApiError, AtlasClient
    from .campaign import counts, fetch

    db = migrated_db()
    _check_run(db, run)
    _cfg, api_opts = _api(api_host, ca_bundle, need_key=False)
    try:
        added = fetch(db, AtlasClient(api_opts), run)
    except AtlasApiError as exc:
        _fail(exc)
        return
    res = {"run_id": run, "added": added, "totals": counts(db, run)}
    print(json.dumps(res)) if as_json else Console().print(res)


@atlas_app.command("asmap")
def asmap_cmd(
    run: int = typer.Option(..., "--run", help="Campaign run id."),
    asn_db: Path = typer.Option(..., "--asn-db", dir_okay=False, help="pyasn IP-to-ASN file."),
    as_json: bool = json_option(help="JSON output."),
) -> None:
    """(Re)map every address of a campaign to its origin AS (same-AS vs other-AS)."""
    from .asmap import AsnMap
    from .campaign import counts, map_asns

    db = migrated_db()
    amap = AsnMap(asn_db)
    _check_run(db, run)
    with db.connect() as conn:
        params = conn.execute("SELECT parameters FROM scan_run WHERE id=%s", (run,)).fetchone()[0]
    n = map_asns(db, run, amap, params.get("server"))
    res = {"run_id": run, "mapped": n, "totals": counts(db, run)}
    print(json.dumps(res)) if as_json else Console().print(res)


def _check_run(db, run: int) -> None:
    with db.connect() as conn:
        row = conn.execute("SELECT kind FROM scan_run WHERE id=%s", (run,)).fetchone()
    if not row or row[0] != "atlas":
        raise UsageError(f"--run {run}: no atlas campaign run with that id")


def register(app: typer.Typer, scan_app: typer.Typer) -> None:
    app.add_typer(atlas_app, name="atlas")


def demo_steps():
    """This package's demo step (netsurvey/plugins.py)."""
    from . import demo

    return [(60, demo.STEP, demo.run)]
