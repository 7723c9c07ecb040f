"""The campaign (thesis ch. 2.4.1 / 9.4.2): find each probe's real resolver, then measure
RTT_DNS (probe -> resolver), RTT_direct (probe -> test server) and RTT_Server (test server
-> resolver).

1. One DNS measurement through every probe's own resolvers for ``<prb_id>.<ts>.<zone>``
   (unique per probe); the whoami answer / the authoritative server's log gives each
   resolver's egress address.
2. Ping measurements (``packets`` each) from each probe to its public local resolver
   addresses and its egress addresses (one measurement per target, sourced from the probes
   that use it), and one from all probes to the test server.
3. ICMP pings from this host (the test server) to every egress address.
4. Origin ASNs of every address from the offline IP-to-ASN file.

Results are fetched idempotently (``fetch``), raw JSON and parsed rows stored, failures kept.
"""
from __future__ import annotations

import asyncio
import ipaddress
import time
from collections import defaultdict
from typing import Callable, Optional

from netsurvey.db import Database
from netsurvey.scanning import ScanContext, ScanTarget, run_scan

from . import store
from .api import AtlasApiError, AtlasClient
from .asmap import AsnMap
from .options import CampaignOptions
from .parse import is_private, parse_dns, parse_ping
from .serverping import ServerPingOptions, ServerPingScanner

TERMINAL = {"Stopped", "Forced to stop", "No suitable probes", "Failed", "Denied"}


def dns_definition(o: CampaignOptions) -> dict:
    return {"type": "dns", "af": o.af, "description": f"netsurvey resolver discovery {o.zone}",
            "query_class": "IN", "query_type": "A" if o.af == 4 else "AAAA",
            "query_argument": o.zone, "use_probe_resolver": True, "prepend_probe_id": True,
            "set_rd_bit": True, "protocol": "UDP", "timeout": o.dns_timeout_ms, "retry": 0,
            "include_abuf": True, "is_oneoff": True}


def ping_definition(o: CampaignOptions, target: str, role: str) -> dict:
    return {"type": "ping", "af": o.af, "target": target, "packets": o.packets,
            "description": f"netsurvey {role} {target}", "is_oneoff": True}


class Campaign:
    """Drives one campaign run; ``ctx`` is the open scan_run (kind ``atlas``)."""

    def __init__(self, client: AtlasClient, ctx: ScanContext, options: CampaignOptions,
                 log: Callable[[str], None] = lambda _m: None):
        self.api, self.ctx, self.o, self.log = client, ctx, options, log
        self.db: Database = ctx.db
        self.run_id = ctx.run.id

    # ------------------------------------------------------------------ steps
    def run(self) -> dict:
        o = self.o
        dns_id = self._create("dns-probe-resolver", dns_definition(o), o.sources(), [], o.zone)
        self._wait([dns_id])
        fetch(self.db, self.api, self.run_id, [dns_id])
        probes = self._probe_ids()
        self.log(f"DNS measurement {dns_id}: results from {len(probes)} probes")
        if probes:
            meta = self.api.probes({"id__in": ",".join(map(str, probes))})
            with self.db.connect() as conn:
                store.add_probes(conn, self.run_id, meta)
        targets = self._ping_targets()
        ids = []
        for (role, target), prbs in sorted(targets.items()):
            src = [{"type": "probes", "value": ",".join(map(str, sorted(prbs))),
                    "requested": len(prbs)}]
            ids.append(self._create(role, ping_definition(o, target, role), src, sorted(prbs), target))
        self.log(f"created {len(ids)} ping measurements")
        if o.server_ping:
            self._server_pings()
        self._wait(ids)
        fetch(self.db, self.api, self.run_id, ids)
        if o.asn_db:
            map_asns(self.db, self.run_id, AsnMap(o.asn_db), o.server)
        return counts(self.db, self.run_id)

    def _create(self, role: str, definition: dict, sources: list[dict], prb_ids: list[int],
                target: str) -> int:
        (msm_id,) = self.api.create([definition], sources)
        with self.db.connect() as conn:
            store.add_measurement(conn, self.run_id, msm_id, role, self.o.af, target, prb_ids,
                                  {"definitions": [definition], "probes": sources})
        return msm_id

    def _wait(self, ids: list[int]) -> None:
        """Poll until every measurement reached a terminal status (or the timeout)."""
        deadline = time.monotonic() + self.o.timeout_s
        pending = set(ids)
        while pending:
            for mid in sorted(pending):
                st = self.api.measurement(mid)["status"]["name"]
                with self.db.connect() as conn:
                    store.set_measurement_status(conn, self.run_id, mid, st, False)
                if st in TERMINAL:
                    pending.discard(mid)
            if not pending:
                break
            if time.monotonic() > deadline:
                raise AtlasApiError(f"measurements {sorted(pending)} not finished after "
                                    f"{self.o.timeout_s:.0f} s; fetch later with "
                                    f"'netsurvey atlas fetch --run {self.run_id}'")
            time.sleep(self.o.poll_interval_s)

    def _probe_ids(self) -> list[int]:
        with self.db.connect() as conn:
            return [r[0] for r in conn.execute(
                "SELECT DISTINCT prb_id FROM atlas_dns_response WHERE run_id=%s ORDER BY 1",
                (self.run_id,))]

    def _ping_targets(self) -> dict[tuple[str, str], set[int]]:
        """(role, address) -> probes: public local resolvers not equal to an egress of the
        same probe, every egress, and the test server for every probe that answered."""
        with self.db.connect() as conn:
            rows = conn.execute(
                "SELECT prb_id, host(address), kind, ping_skipped FROM atlas_resolver"
                " WHERE run_id=%s", (self.run_id,)).fetchall()
        egress = defaultdict(set)
        for prb, addr, kind, _ in rows:
            if kind == "egress":
                egress[prb].add(addr)
        out: dict[tuple[str, str], set[int]] = defaultdict(set)
        for prb, addr, kind, skipped in rows:
            if skipped:
                continue
            if kind == "egress":
                out[("ping-egress-resolver", addr)].add(prb)
            elif addr not in egress[prb]:
                out[("ping-local-resolver", addr)].add(prb)
        for prb in self._probe_ids():
            out[("ping-server", self.o.server)].add(prb)
        return out

    def _server_pings(self) -> None:
        with self.db.connect() as conn:
            addrs = [r[0] for r in conn.execute(
                "SELECT DISTINCT host(address) FROM atlas_resolver WHERE run_id=%s"
                " AND kind='egress' AND NOT is_private ORDER BY 1", (self.run_id,))]
        scanner = ServerPingScanner()
        scanner.init(ServerPingOptions(packets=self.o.packets), self.ctx)
        targets = [ScanTarget(None, a, 0) for a in addrs]
        conn = self.db.connect()

        def keep(outcome):
            store.add_server_ping(conn, self.run_id, outcome.target.address,
                                  outcome.status.value, outcome.result, outcome.error)
        try:
            asyncio.run(run_scan(scanner, targets, keep, concurrency=50,
                                 description="RTT_Server pings"))
            conn.commit()
        finally:
            conn.close()


def fetch(db: Database, api: AtlasClient, run_id: int, msm_ids: Optional[list[int]] = None) -> dict:
    """Fetch results of the run's measurements (all if ``msm_ids`` is None) and store what is
    new: raw JSON plus parsed rows. Safe to repeat. Returns {"raw": new raw rows, ...}."""
    with db.connect() as conn:
        ms = conn.execute("SELECT msm_id, role FROM atlas_measurement WHERE run_id=%s"
                          + (" AND msm_id = ANY(%s)" if msm_ids is not None else "")
                          + " ORDER BY msm_id",
                          (run_id, msm_ids) if msm_ids is not None else (run_id,)).fetchall()
    added = {"raw": 0, "dns": 0, "ping": 0, "resolvers": 0}
    for mid, role in ms:
        results = api.results(mid)
        status = api.measurement(mid)["status"]["name"]
        with db.connect() as conn:
            added["raw"] += store.add_raw(conn, run_id, results, mid)
            # a malformed result becomes a 'malformed-result: ...' failure row (atlas_failure)
            if role == "dns-probe-resolver":
                obs = [x for r in results for x in parse_dns(r, mid)]
                added["dns"] += store.add_dns(conn, run_id, obs)
                added["resolvers"] += store.add_resolvers(conn, run_id, _resolver_rows(obs))
            else:
                obs = [parse_ping(r, mid) for r in results]
                added["ping"] += store.add_pings(conn, run_id, role, obs)
            store.set_measurement_status(conn, run_id, mid, status, True)
    return added


def _resolver_rows(obs) -> list[tuple]:
    rows = {}
    for o in obs:
        if o.resolver_addr:
            priv = is_private(o.resolver_addr)
            rows[(o.prb_id, o.resolver_addr, "local")] = (
                o.prb_id, o.resolver_addr, "local", None, o.subid, priv,
                "private-address" if priv else None)
        if o.egress_addr:
            priv = is_private(o.egress_addr)
            rows[(o.prb_id, o.egress_addr, "egress")] = (
                o.prb_id, o.egress_addr, "egress", o.resolver_addr, o.subid, priv,
                "private-address" if priv else None)
    return list(rows.values())


def map_asns(db: Database, run_id: int, asmap: AsnMap, server: Optional[str] = None) -> int:
    """Origin ASN of every probe, resolver and server address of the run into atlas_asn."""
    with db.connect() as conn:
        addrs = [r[0] for r in conn.execute(
            """SELECT host(a) FROM (
                 SELECT address_v4 AS a FROM atlas_probe WHERE run_id=%(r)s
                 UNION SELECT address_v6 FROM atlas_probe WHERE run_id=%(r)s
                 UNION SELECT address FROM atlas_resolver WHERE run_id=%(r)s
                 UNION SELECT dst_addr FROM atlas_ping WHERE run_id=%(r)s) s
               WHERE a IS NOT NULL""", {"r": run_id})]
        if server:
            addrs.append(str(ipaddress.ip_address(server)))
        return store.add_asn(conn, run_id, asmap.lookup_many(addrs))


def counts(db: Database, run_id: int) -> dict:
    with db.connect() as conn:
        r = conn.execute(
            """SELECT (SELECT count(*) FROM atlas_probe WHERE run_id=%(r)s),
                      (SELECT count(*) FROM atlas_measurement WHERE run_id=%(r)s),
                      (SELECT count(*) FROM atlas_result_raw WHERE run_id=%(r)s),
                      (SELECT count(*) FROM atlas_dns_response WHERE run_id=%(r)s),
                      (SELECT count(*) FROM atlas_ping WHERE run_id=%(r)s),
                      (SELECT count(*) FROM atlas_server_ping WHERE run_id=%(r)s),
                      (SELECT count(*) FROM atlas_failure WHERE run_id=%(r)s),
                      (SELECT count(*) FROM atlas_resolver_rtt WHERE run_id=%(r)s),
                      (SELECT count(*) FROM atlas_rtt_triplet WHERE run_id=%(r)s)""",
            {"r": run_id}).fetchone()
    keys = ["probes", "measurements", "raw_results", "dns_responses", "pings", "server_pings",
            "failures", "resolver_rtts", "triplets"]
    return dict(zip(keys, r))
