"""A stand-in for the RIPE Atlas REST API v2 (the part ``ripe.atlas.cousteau`` uses).

Stdlib only (``http.server`` + ``ssl``, one thread per connection) plus dnspython, which
the project already depends on, for the DNS wire answers (``abuf``).  It always speaks
HTTPS, because cousteau always builds ``https://<server>/...`` URLs.

Command line::

    python -m testbed.atlas_api --listen 198.18.2.200 [--listen 2001:2:0:2::200] --port 443 \\
        --cert atlas.pem --key atlas.key --fixtures testbed/atlas_fixtures --state DIR \\
        --api-key KEY [--api-key KEY2] [--stop-delay 1.0] [--fail-429 N] [--fail-5xx N] \\
        [--retry-after S] [--quiet]

``--port 0`` binds a free port.  Once listening, the server prints one line
``READY https://ADDR:PORT ...`` on stdout and writes ``STATE/ready.json``
(``{"pid": .., "endpoints": [[addr, port], ...]}``).

Endpoints (paths with or without the trailing slash):

* ``POST /api/v2/measurements/``  (AtlasCreateRequest) -> 201 ``{"measurements": [ids]}``;
  needs ``Authorization: Key <key>`` (or the old ``?key=``), else 401; invalid bodies -> 400
  with RIPE's error shape ``{"error": {"status", "code", "title", "detail", "errors": [...]}}``.
* ``GET /api/v2/measurements/<id>/``  metadata; ``status.name`` goes Specified -> Ongoing ->
  Stopped (``--stop-delay`` seconds after creation; "No suitable probes" if none matched).
* ``GET /api/v2/measurements/<id>/results/`` (and ``/latest/``) with ``start``, ``stop``,
  ``probe_ids``: a JSON list in RIPE Atlas's result formats (fw 5080).  While Ongoing, the
  participants' results appear one after another; all are there once Stopped.
* ``DELETE /api/v2/measurements/<id>`` (AtlasStopRequest) -> 204, status Stopped.
* ``GET /api/v2/measurements/`` (MeasurementRequest) filters ``id__in``, ``status``, ``type``.
* ``GET /api/v2/probes/`` (ProbeRequest) filters ``id``, ``id__in``, ``country_code``,
  ``asn``, ``asn_v4``, ``asn_v6``, ``status``, ``is_anchor``, ``is_public``, ``prefix_v4``,
  ``tags``; ``page_size``/``page`` with an absolute ``next`` URL.  ``GET /api/v2/probes/<id>/``.
* Test hooks (no auth, not part of RIPE's API): ``POST /_standin/faults`` with
  ``{"http_429": N, "http_5xx": N, "retry_after": S, "status_5xx": 503, "match": "substr"}``
  replaces the fault plan; ``GET /_standin/faults`` shows what is left.

Every API request (not the ``/_standin`` hooks) is appended to ``STATE/requests.jsonl``:
``{"ts", "method", "path", "query", "headers": {authorization, user-agent, content-type},
"body", "status", "client"}``.  Measurements are kept in ``STATE/measurements.json``.

Fault plan: the first ``http_429`` API requests (whose path contains ``match``) get 429 with
``Retry-After``; the next ``http_5xx`` get ``status_5xx``; then normal service.

Results are a pure function of the fixtures, the definition, the probe and the measurement's
start time; the fixture format is in ``testbed/atlas_fixtures/README.md``;
:func:`atlas_ground_truth` returns the normalised fixtures for tests.
"""
from __future__ import annotations

import argparse
import base64
import copy
import hashlib
import ipaddress
import json
import os
import socket
import socketserver
import ssl
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Optional
from urllib.parse import parse_qs, urlencode, urlsplit

import dns.flags
import dns.message
import dns.name
import dns.rcode
import dns.rdata
import dns.rdataclass
import dns.rdatatype
import dns.rrset

DEFAULT_FIXTURES = Path(__file__).resolve().parent / "atlas_fixtures"
FIRMWARE = 5080
MVER = "2.6.2"

# Addresses fixtures may hold: testbed ranges plus private / CGNAT / ULA / link-local.
_DATA_NETS = [ipaddress.ip_network(n) for n in (
    "198.18.0.0/15", "10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "100.64.0.0/10",
    "169.254.0.0/16", "2001:2::/48", "fc00::/7", "fe80::/10")]

PROBE_STATUS = {"Never Connected": 0, "Connected": 1, "Disconnected": 2, "Abandoned": 3}
MSM_STATUS = {"Specified": 0, "Scheduled": 1, "Ongoing": 2, "Stopped": 4,
              "Forced to stop": 5, "No suitable probes": 6, "Failed": 7, "Denied": 8}
SOURCE_TYPES = {"area", "country", "prefix", "asn", "probes", "msm", "region", "countries"}
AREAS = {"WW", "West", "North-Central", "South-Central", "North-East", "South-East"}

_COMMON_FIELDS = {"type", "af", "description", "target", "is_public", "resolve_on_probe",
                  "tags", "spread", "skip_dns_check", "interval", "is_oneoff", "start_time",
                  "stop_time", "group_id"}
ALLOWED_FIELDS = {
    "dns": _COMMON_FIELDS | {
        "query_class", "query_type", "query_argument", "use_probe_resolver", "protocol",
        "udp_payload_size", "set_rd_bit", "set_do_bit", "set_cd_bit", "set_nsid_bit",
        "include_qbuf", "include_abuf", "prepend_probe_id", "retry", "timeout", "use_macros",
        "tls", "port"},
    "ping": _COMMON_FIELDS | {"packets", "size", "packet_interval", "include_probe_id"},
}
DNS_QTYPES = {"A", "AAAA", "ANY", "CNAME", "DNSKEY", "DS", "MX", "NS", "NSEC", "NSEC3",
              "PTR", "RRSIG", "SOA", "SRV", "TXT", "CAA", "HTTPS", "SVCB", "TLSA", "HINFO"}


class FixtureError(ValueError):
    """The fixture files are malformed."""


# --------------------------------------------------------------------------- fixtures

def _data_addr(value: Any, where: str, *, version: Optional[int] = None) -> Optional[str]:
    if value is None:
        return None
    try:
        ip = ipaddress.ip_address(value)
    except ValueError:
        raise FixtureError(f"{where}: {value!r} is not an IP address") from None
    if version and ip.version != version:
        raise FixtureError(f"{where}: {value} is not IPv{version}")
    if not any(ip in n for n in _DATA_NETS):
        raise FixtureError(f"{where}: {value} is outside 198.18.0.0/15, 2001:2::/48 and the "
                           "private ranges")
    return str(ip)


def _rtt(value: Any, where: str) -> Optional[float]:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
        raise FixtureError(f"{where}: RTT must be a non-negative number or null")
    return round(float(value), 3)


def _norm_name(name: str) -> str:
    return name.strip().rstrip(".").lower()


def _load_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        raise FixtureError(f"{path}: missing") from None
    except json.JSONDecodeError as exc:
        raise FixtureError(f"{path}: not valid JSON: {exc}") from None


def _norm_probe(p: dict, i: int) -> dict:
    where = f"probes.json: probes[{i}]"
    if not isinstance(p, dict) or not isinstance(p.get("id"), int) or isinstance(p.get("id"), bool):
        raise FixtureError(f"{where}: needs an integer 'id'")
    where = f"probes.json: probe {p['id']}"
    known = {"id", "country_code", "asn_v4", "asn_v6", "address_v4", "address_v6", "prefix_v4",
             "prefix_v6", "status", "is_anchor", "is_public", "description", "tags", "geometry",
             "fw", "lts", "ttl", "src_addr_v4", "src_addr_v6", "resolvers", "targets", "comment"}
    extra = set(p) - known
    if extra:
        raise FixtureError(f"{where}: unknown keys {sorted(extra)}")
    cc = p.get("country_code")
    if not (isinstance(cc, str) and len(cc) == 2 and cc.isupper()):
        raise FixtureError(f"{where}: country_code must be two capital letters")
    status = p.get("status", "Connected")
    if status not in PROBE_STATUS:
        raise FixtureError(f"{where}: status must be one of {sorted(PROBE_STATUS)}")
    a4 = _data_addr(p.get("address_v4"), f"{where}: address_v4", version=4)
    a6 = _data_addr(p.get("address_v6"), f"{where}: address_v6", version=6)
    if a4 is None and a6 is None:
        raise FixtureError(f"{where}: needs address_v4 or address_v6")
    out = {
        "id": p["id"], "country_code": cc,
        "asn_v4": p.get("asn_v4"), "asn_v6": p.get("asn_v6"),
        "address_v4": a4, "address_v6": a6,
        "prefix_v4": p.get("prefix_v4") or (str(ipaddress.ip_network(f"{a4}/24", strict=False))
                                            if a4 else None),
        "prefix_v6": p.get("prefix_v6") or (str(ipaddress.ip_network(f"{a6}/48", strict=False))
                                            if a6 else None),
        "status": status, "is_anchor": bool(p.get("is_anchor", False)),
        "is_public": bool(p.get("is_public", True)), "description": p.get("description", ""),
        "tags": list(p.get("tags", [])), "geometry": p.get("geometry"),
        "fw": int(p.get("fw", FIRMWARE)), "lts": int(p.get("lts", 20)), "ttl": int(p.get("ttl", 54)),
        "src_addr_v4": _data_addr(p.get("src_addr_v4", a4), f"{where}: src_addr_v4", version=4),
        "src_addr_v6": _data_addr(p.get("src_addr_v6", a6), f"{where}: src_addr_v6", version=6),
    }
    for k in ("asn_v4", "asn_v6"):
        if out[k] is not None and (not isinstance(out[k], int) or isinstance(out[k], bool)):
            raise FixtureError(f"{where}: {k} must be an integer or null")
    resolvers = []
    for j, r in enumerate(p.get("resolvers", [])):
        rw = f"{where}: resolvers[{j}]"
        if not isinstance(r, dict) or "address" not in r:
            raise FixtureError(f"{rw}: needs 'address'")
        extra = set(r) - {"address", "egress_v4", "egress_v6", "rtt_ms", "comment"}
        if extra:
            raise FixtureError(f"{rw}: unknown keys {sorted(extra)}")
        addr = _data_addr(r["address"], f"{rw}: address")
        resolvers.append({
            "address": addr,
            "af": ipaddress.ip_address(addr).version,
            "egress_v4": _data_addr(r.get("egress_v4"), f"{rw}: egress_v4", version=4),
            "egress_v6": _data_addr(r.get("egress_v6"), f"{rw}: egress_v6", version=6),
            "rtt_ms": _rtt(r.get("rtt_ms"), f"{rw}: rtt_ms"),
            "timeout": r.get("rtt_ms") is None,
        })
    out["resolvers"] = resolvers
    targets = {}
    for key, t in (p.get("targets") or {}).items():
        tw = f"{where}: targets[{key!r}]"
        if not isinstance(t, dict) or set(t) - {"dns_rtt_ms", "ping_rtts_ms", "comment"}:
            raise FixtureError(f"{tw}: only dns_rtt_ms and ping_rtts_ms are allowed")
        pings = t.get("ping_rtts_ms", [])
        if not isinstance(pings, list) or not pings:
            raise FixtureError(f"{tw}: ping_rtts_ms must be a non-empty list")
        targets[key if key == "*" else _norm_name(key)] = {
            "dns_rtt_ms": _rtt(t.get("dns_rtt_ms"), f"{tw}: dns_rtt_ms"),
            "ping_rtts_ms": [_rtt(x, f"{tw}: ping_rtts_ms") for x in pings],
        }
    if "*" not in targets:
        raise FixtureError(f"{where}: targets needs a '*' entry (the default for any target)")
    out["targets"] = targets
    return out


def load_fixtures(fixtures_dir: os.PathLike | str) -> dict:
    """Read and validate ``probes.json`` and ``world.json``; returns the normalised data."""
    d = Path(fixtures_dir)
    raw_probes = _load_json(d / "probes.json")
    world = _load_json(d / "world.json")
    if not isinstance(raw_probes, dict) or not isinstance(raw_probes.get("probes"), list):
        raise FixtureError("probes.json: needs a 'probes' list")
    probes = [_norm_probe(p, i) for i, p in enumerate(raw_probes["probes"])]
    ids = [p["id"] for p in probes]
    if len(set(ids)) != len(ids):
        raise FixtureError("probes.json: duplicate probe ids")
    records: dict[tuple[str, str], dict] = {}
    for i, r in enumerate(world.get("records", [])):
        try:
            name, rtype = _norm_name(r["name"]), r["type"].upper()
            ttl = int(r.get("ttl", 300))
            for v in r["values"]:
                dns.rdata.from_text("IN", rtype, v)
        except Exception as exc:  # noqa: BLE001 - report any malformation the same way
            raise FixtureError(f"world.json: records[{i}]: {exc}") from None
        records[(name, rtype)] = {"ttl": ttl, "values": list(r["values"])}
    whoami = {}
    for w in world.get("whoami", []):
        whoami[_norm_name(w["name"])] = {"ttl": int(w.get("ttl", 0))}
    resolvers = {}
    for addr, r in (world.get("resolvers") or {}).items():
        resolvers[_data_addr(addr, "world.json: resolvers")] = {
            "egress_v4": _data_addr(r.get("egress_v4"), f"world.json: resolvers[{addr}]", version=4),
            "egress_v6": _data_addr(r.get("egress_v6"), f"world.json: resolvers[{addr}]", version=6),
        }
    faults = {"http_429": 0, "http_5xx": 0, "retry_after": 1, "status_5xx": 503, "match": ""}
    faults.update(world.get("faults") or {})
    return {
        "probes": {p["id"]: p for p in probes},
        "records": records,
        "whoami": whoami,
        "resolvers": resolvers,
        "first_msm_id": int(world.get("first_msm_id", 90000001)),
        "stop_delay_s": float(world.get("stop_delay_s", 1.0)),
        "faults": faults,
    }


def atlas_ground_truth(fixtures_dir: os.PathLike | str = DEFAULT_FIXTURES) -> dict:
    """What the stand-in will report, per probe, for tests to compare parsed values with.

    ``{"probes": {id: {..., "resolvers": [{"address", "af", "egress_v4", "egress_v6",
    "rtt_ms" (None = timeout), "timeout"}], "targets": {"*" | addr | name: {"dns_rtt_ms"
    (None = timeout), "ping_rtts_ms": [rtt | None (lost)]}}}}, "records": {"name/TYPE":
    {...}}, "whoami": [...], "resolvers": {...}, "first_msm_id": int}``.
    Use :func:`target_profile` and :func:`ping_series` to get the values for one target.
    """
    fx = load_fixtures(fixtures_dir)
    gt = copy.deepcopy(fx)
    gt["records"] = {f"{n}/{t}": v for (n, t), v in fx["records"].items()}
    gt["whoami"] = sorted(fx["whoami"])
    return gt


def resolve_name(fx: dict, name: str, af: int) -> Optional[str]:
    """The address a DNS/ping target resolves to in the stand-in's world (None if none)."""
    try:
        ip = ipaddress.ip_address(name)
        return str(ip) if ip.version == af else None
    except ValueError:
        pass
    rec = fx["records"].get((_norm_name(name), "A" if af == 4 else "AAAA"))
    return rec["values"][0] if rec else None


def target_profile(probe: dict, target: str, address: Optional[str] = None) -> dict:
    """The fixture entry used for ``target`` (as given, then its address, then '*')."""
    t = probe["targets"]
    for key in (_norm_name(target), address):
        if key and key in t:
            return t[key]
    return t["*"]


def ping_series(profile: dict, packets: int) -> list[Optional[float]]:
    """The per-packet RTTs (None = lost) of ``packets`` pings: the pattern, repeated."""
    pat = profile["ping_rtts_ms"]
    return [pat[i % len(pat)] for i in range(packets)]


# --------------------------------------------------------------------------- validation

class ApiError(Exception):
    def __init__(self, status: int, detail: str, errors: Optional[list] = None,
                 title: Optional[str] = None, headers: Optional[dict] = None):
        super().__init__(detail)
        self.status, self.detail, self.errors = status, detail, errors or []
        self.title = title or {400: "Bad Request", 401: "Unauthorized", 403: "Forbidden",
                               404: "Not Found", 405: "Method Not Allowed",
                               429: "Too Many Requests"}.get(status, "Error")
        self.headers = headers or {}

    def body(self) -> dict:
        err = {"status": self.status, "code": 102 if self.status == 400 else 104,
               "title": self.title, "detail": self.detail}
        if self.errors:
            err["errors"] = [{"source": {"pointer": p}, "detail": d} for p, d in self.errors]
        return {"error": err}


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def validate_create(body: Any) -> list[tuple[str, str]]:
    """Errors (JSON pointer, message) of a measurement-creation body; [] if it is valid."""
    errs: list[tuple[str, str]] = []
    if not isinstance(body, dict):
        return [("/", "the body must be a JSON object")]
    extra = set(body) - {"definitions", "probes", "is_oneoff", "start_time", "stop_time",
                         "bill_to", "is_public"}
    for k in sorted(extra):
        errs.append((f"/{k}", "unknown field"))
    if "is_oneoff" in body and not isinstance(body["is_oneoff"], bool):
        errs.append(("/is_oneoff", "must be a boolean"))
    oneoff = body.get("is_oneoff") is True
    for k in ("start_time", "stop_time"):
        if k in body and not _is_int(body[k]):
            errs.append((f"/{k}", "must be a UNIX timestamp (integer)"))
    defs = body.get("definitions")
    if not isinstance(defs, list) or not defs:
        errs.append(("/definitions", "a non-empty list of measurement definitions is required"))
        defs = []
    for i, d in enumerate(defs):
        p = f"/definitions/{i}"
        if not isinstance(d, dict):
            errs.append((p, "must be an object"))
            continue
        mtype = d.get("type")
        if mtype not in ALLOWED_FIELDS:
            errs.append((f"{p}/type", f"{mtype!r}: the stand-in supports 'dns' and 'ping'"))
            continue
        for k in sorted(set(d) - ALLOWED_FIELDS[mtype]):
            errs.append((f"{p}/{k}", f"unknown field for a {mtype} measurement"))
        if d.get("af") not in (4, 6) or isinstance(d.get("af"), bool):
            errs.append((f"{p}/af", "must be 4 or 6"))
        if not isinstance(d.get("description"), str) or not d["description"].strip():
            errs.append((f"{p}/description", "this field is required"))
        if not oneoff and d.get("is_oneoff") is not True:
            errs.append((f"{p}/is_oneoff", "the stand-in supports one-off measurements only"))
        target = d.get("target")
        if target is not None and (not isinstance(target, str) or not target.strip()):
            errs.append((f"{p}/target", "must be a host name or an address"))
        if mtype == "dns":
            upr = d.get("use_probe_resolver", False)
            if not isinstance(upr, bool):
                errs.append((f"{p}/use_probe_resolver", "must be a boolean"))
            if upr and target is not None:
                errs.append((f"{p}/target", "not allowed together with use_probe_resolver"))
            if not upr and target is None:
                errs.append((f"{p}/target", "required unless use_probe_resolver is true"))
            qa = d.get("query_argument")
            if not isinstance(qa, str) or not qa.strip():
                errs.append((f"{p}/query_argument", "this field is required"))
            else:
                try:
                    dns.name.from_text(qa)
                except Exception:  # noqa: BLE001
                    errs.append((f"{p}/query_argument", "not a valid domain name"))
            if str(d.get("query_type", "")).upper() not in DNS_QTYPES:
                errs.append((f"{p}/query_type", f"must be one of {sorted(DNS_QTYPES)}"))
            if str(d.get("query_class", "IN")).upper() not in ("IN", "CHAOS"):
                errs.append((f"{p}/query_class", "must be IN or CHAOS"))
            if str(d.get("protocol", "UDP")).upper() not in ("UDP", "TCP"):
                errs.append((f"{p}/protocol", "must be UDP or TCP"))
            for k, lo, hi in (("udp_payload_size", 512, 4096), ("timeout", 100, 30000),
                              ("retry", 0, 10)):
                if k in d and (not _is_int(d[k]) or not lo <= d[k] <= hi):
                    errs.append((f"{p}/{k}", f"must be an integer in [{lo}, {hi}]"))
        else:
            if target is None:
                errs.append((f"{p}/target", "this field is required"))
            for k, lo, hi in (("packets", 1, 16), ("size", 1, 2048)):
                if k in d and (not _is_int(d[k]) or not lo <= d[k] <= hi):
                    errs.append((f"{p}/{k}", f"must be an integer in [{lo}, {hi}]"))
    srcs = body.get("probes")
    if not isinstance(srcs, list) or not srcs:
        errs.append(("/probes", "a non-empty list of probe sources is required"))
        srcs = []
    for i, s in enumerate(srcs):
        p = f"/probes/{i}"
        if not isinstance(s, dict):
            errs.append((p, "must be an object"))
            continue
        for k in sorted(set(s) - {"type", "value", "requested", "tags"}):
            errs.append((f"{p}/{k}", "unknown field"))
        if s.get("type") not in SOURCE_TYPES:
            errs.append((f"{p}/type", f"must be one of {sorted(SOURCE_TYPES)}"))
        if not _is_int(s.get("requested")) or s["requested"] < 1:
            errs.append((f"{p}/requested", "must be a positive integer"))
        if s.get("value") in (None, ""):
            errs.append((f"{p}/value", "this field is required"))
        elif s.get("type") == "area" and s["value"] not in AREAS:
            errs.append((f"{p}/value", f"area must be one of {sorted(AREAS)}"))
        elif s.get("type") == "prefix":
            try:
                ipaddress.ip_network(str(s["value"]), strict=False)
            except ValueError:
                errs.append((f"{p}/value", "not a prefix"))
        elif s.get("type") in ("asn", "msm"):
            if not str(s["value"]).isdigit():
                errs.append((f"{p}/value", "must be a number"))
        elif s.get("type") == "probes":
            if not all(x.strip().isdigit() for x in str(s["value"]).split(",")):
                errs.append((f"{p}/value", "must be a comma-separated list of probe ids"))
        if "tags" in s and (not isinstance(s["tags"], dict)
                            or set(s["tags"]) - {"include", "exclude"}):
            errs.append((f"{p}/tags", "must be {'include': [...], 'exclude': [...]}"))
    return errs


# --------------------------------------------------------------------------- results

def _u16(*parts: Any) -> int:
    h = hashlib.sha256("|".join(map(str, parts)).encode()).digest()
    return int.from_bytes(h[:2], "big")


def dns_answer(fx: dict, qname: str, qtype: str, qclass: str, egress: tuple, msg_id: int,
               *, payload: int = 512, rd: bool = True, do: bool = False,
               strip_labels: int = 0) -> tuple[bytes, bytes, dns.message.Message]:
    """(query wire, answer wire, answer message) for ``qname``/``qtype``, as the resolver
    whose egress addresses are ``egress = (v4, v6)`` would answer in the stand-in's world."""
    q = dns.message.make_query(qname, qtype, qclass, use_edns=0, payload=payload,
                               want_dnssec=do, id=msg_id)
    if not rd:
        q.flags &= ~dns.flags.RD
    r = dns.message.make_response(q)
    r.use_edns(0, payload=1232)
    r.flags |= dns.flags.RA
    name = q.question[0].name
    lookup = _norm_name(dns.name.Name(name.labels[strip_labels:]).to_text()) if strip_labels \
        else _norm_name(name.to_text())
    rtype = dns.rdatatype.to_text(q.question[0].rdtype)
    if dns.rdataclass.to_text(q.question[0].rdclass) != "IN":
        r.set_rcode(dns.rcode.REFUSED)
    elif lookup in fx["whoami"]:
        ttl = fx["whoami"][lookup]["ttl"]
        v4, v6 = egress
        value = {"A": v4, "AAAA": v6, "TXT": f'"{v4 or v6}"' if (v4 or v6) else None}.get(rtype)
        if value:
            r.answer.append(dns.rrset.from_text(name, ttl, "IN", rtype, value))
    else:
        rec = fx["records"].get((lookup, rtype))
        if rec:
            r.answer.append(dns.rrset.from_text_list(name, rec["ttl"], "IN", rtype, rec["values"]))
        elif not any(n == lookup for n, _ in fx["records"]):
            r.set_rcode(dns.rcode.NXDOMAIN)
    return q.to_wire(), r.to_wire(), r


def _dns_payload(fx: dict, d: dict, probe: dict, qname: str, egress: tuple, msg_id: int,
                 rtt: float) -> tuple[dict, Optional[str]]:
    """The ``result`` object of one DNS response, and the qbuf (or None)."""
    qbuf, abuf, r = dns_answer(
        fx, qname, str(d.get("query_type", "A")).upper(), str(d.get("query_class", "IN")).upper(),
        egress, msg_id, payload=d.get("udp_payload_size", 512), rd=d.get("set_rd_bit", True),
        do=d.get("set_do_bit", False), strip_labels=2 if d.get("prepend_probe_id") else 0)
    res = {"ANCOUNT": sum(len(x) for x in r.answer), "ARCOUNT": len(r.additional) + 1,
           "ID": msg_id, "NSCOUNT": sum(len(x) for x in r.authority), "QDCOUNT": 1}
    if d.get("include_abuf", True):
        res["abuf"] = base64.b64encode(abuf).decode()
    res["rt"] = rtt
    res["size"] = len(abuf)
    return res, (base64.b64encode(qbuf).decode() if d.get("include_qbuf") else None)


def _base(msm: dict, probe: dict, ts: int, af: int) -> dict:
    return {"fw": probe["fw"], "lts": probe["lts"], "msm_id": msm["id"], "prb_id": probe["id"],
            "timestamp": ts, "group_id": msm["id"], "stored_timestamp": ts + 2,
            "from": probe[f"address_v{af}"] or probe["address_v4"] or probe["address_v6"]}


def build_result(fx: dict, msm: dict, probe: dict, ts: int) -> dict:
    """One RIPE Atlas result (dict) of ``probe`` for measurement ``msm`` at time ``ts``."""
    d = msm["definition"]
    af = d["af"]
    out = _base(msm, probe, ts, af)
    src = probe[f"src_addr_v{af}"]
    if d["type"] == "ping":
        target = d["target"]
        addr = resolve_name(fx, target, af)
        out.update({"af": af, "dst_name": target, "msm_name": "Ping", "mver": MVER,
                    "proto": "ICMP", "size": d.get("size", 48), "src_addr": src,
                    "step": None, "type": "ping"})
        if addr is None:
            out["dnserr"] = "non-recoverable failure in name resolution (1)"
            return dict(sorted(out.items()))
        rtts = ping_series(target_profile(probe, target, addr), d.get("packets", 3))
        got = [x for x in rtts if x is not None]
        out.update({
            "dst_addr": addr, "dup": 0, "sent": len(rtts), "rcvd": len(got), "ttl": probe["ttl"],
            "result": [{"rtt": x} if x is not None else {"x": "*"} for x in rtts],
            "avg": round(sum(got) / len(got), 3) if got else -1,
            "min": min(got) if got else -1, "max": max(got) if got else -1,
        })
        return dict(sorted(out.items()))

    # DNS
    qname = d["query_argument"]
    if d.get("prepend_probe_id"):
        qname = f"{probe['id']}.{ts}.{qname}"
    proto = str(d.get("protocol", "UDP")).upper()
    timeout = d.get("timeout", 5000)
    out.update({"msm_name": "Tdig", "mver": MVER, "type": "dns"})
    if d.get("use_probe_resolver"):
        resolvers = [r for r in probe["resolvers"] if r["af"] == af]
        if not resolvers:
            out["error"] = {"nameserver": f"no local IPv{af} resolver"}
            return dict(sorted(out.items()))
        rs = []
        for k, r in enumerate(resolvers, 1):
            e = {"af": af, "dst_addr": r["address"], "lts": probe["lts"], "proto": proto,
                 "src_addr": src, "subid": k, "submax": len(resolvers), "time": ts + k - 1}
            if r["rtt_ms"] is None:
                e["error"] = {"timeout": timeout}
            else:
                mid = _u16(msm["id"], probe["id"], k)
                e["result"], qb = _dns_payload(fx, d, probe, qname, (r["egress_v4"], r["egress_v6"]),
                                               mid, r["rtt_ms"])
                if qb:
                    e["qbuf"] = qb
            rs.append(dict(sorted(e.items())))
        out["resultset"] = rs
        return dict(sorted(out.items()))
    target = d["target"]
    addr = resolve_name(fx, target, af)
    out.update({"af": af, "proto": proto, "src_addr": src})
    if addr is None:
        out["dst_name"] = target
        out["error"] = {"getaddrinfo": "Name or service not known"}
        return dict(sorted(out.items()))
    out["dst_addr"] = addr
    if _norm_name(target) != addr:
        out["dst_name"] = target
    rtt = target_profile(probe, target, addr)["dns_rtt_ms"]
    if rtt is None:
        out["error"] = {"timeout": timeout}
        return dict(sorted(out.items()))
    known = fx["resolvers"].get(addr)
    egress = (known["egress_v4"], known["egress_v6"]) if known else \
        ((addr, None) if af == 4 else (None, addr))
    out["result"], qb = _dns_payload(fx, d, probe, qname, egress, _u16(msm["id"], probe["id"], 0), rtt)
    if qb:
        out["qbuf"] = qb
    return dict(sorted(out.items()))


# --------------------------------------------------------------------------- state

def select_probes(fx: dict, body: dict, af: int, measurements: dict) -> list[int]:
    """Participants: per source, the first ``requested`` matching connected probes (by id)
    able to measure over IPv``af``; sources' selections are united in order."""
    chosen: list[int] = []
    pool = [p for _, p in sorted(fx["probes"].items())
            if p["status"] == "Connected" and p[f"address_v{af}"]]
    for s in body["probes"]:
        t, v = s["type"], s["value"]
        if t == "country":
            m = [p for p in pool if p["country_code"] == str(v).upper()]
        elif t == "countries":
            ccs = {x.strip().upper() for x in str(v).split(",")}
            m = [p for p in pool if p["country_code"] in ccs]
        elif t == "asn":
            m = [p for p in pool if p[f"asn_v{af}"] == int(v)]
        elif t == "probes":
            ids = [int(x) for x in str(v).split(",")]
            m = [p for p in pool if p["id"] in ids]
        elif t == "prefix":
            net = ipaddress.ip_network(str(v), strict=False)
            m = [p for p in pool if p[f"address_v{net.version}"]
                 and ipaddress.ip_address(p[f"address_v{net.version}"]) in net]
        elif t == "msm":
            old = measurements.get(int(v))
            m = [p for p in pool if old and p["id"] in old["participants"]]
        else:  # area / region: the stand-in's world is one area
            m = list(pool)
        tags = s.get("tags") or {}
        m = [p for p in m if all(x in p["tags"] for x in tags.get("include", []))
             and not any(x in p["tags"] for x in tags.get("exclude", []))]
        m = [p for p in m if p["id"] not in chosen][: s["requested"]]
        chosen += [p["id"] for p in m]
    return chosen


class Store:
    """Measurements, the fault plan and the request log; thread-safe."""

    def __init__(self, fx: dict, state_dir: Path, api_keys: list[str], stop_delay: float,
                 faults: dict):
        self.fx, self.state_dir, self.api_keys = fx, state_dir, list(api_keys)
        self.stop_delay = stop_delay
        self.lock = threading.Lock()
        self.faults = dict(faults)
        state_dir.mkdir(parents=True, exist_ok=True)
        self.msm_file = state_dir / "measurements.json"
        self.req_file = state_dir / "requests.jsonl"
        self.measurements: dict[int, dict] = {}
        if self.msm_file.exists():
            for m in json.loads(self.msm_file.read_text()):
                self.measurements[m["id"]] = m
        self.next_id = max([fx["first_msm_id"] - 1, *self.measurements]) + 1

    def _save(self) -> None:
        tmp = self.msm_file.with_suffix(".tmp")
        tmp.write_text(json.dumps(list(self.measurements.values()), indent=1))
        tmp.replace(self.msm_file)

    def log(self, entry: dict) -> None:
        line = json.dumps(entry, sort_keys=True) + "\n"
        with self.lock, self.req_file.open("a") as fh:
            fh.write(line)

    def take_fault(self, path: str) -> Optional[ApiError]:
        with self.lock:
            f = self.faults
            if f.get("match") and f["match"] not in path:
                return None
            if f.get("http_429", 0) > 0:
                f["http_429"] -= 1
                ra = int(f.get("retry_after", 1))
                return ApiError(429, f"Request was throttled. Expected available in {ra} "
                                     "seconds.", headers={"Retry-After": str(ra)})
            if f.get("http_5xx", 0) > 0:
                f["http_5xx"] -= 1
                code = int(f.get("status_5xx", 503))
                return ApiError(code, "Simulated server error (stand-in fault plan).",
                                title="Service Unavailable" if code == 503 else "Server Error")
        return None

    def create(self, body: dict) -> list[int]:
        now = time.time()
        ids = []
        with self.lock:
            for d in body["definitions"]:
                d = dict(d)
                start = float(body.get("start_time") or d.get("start_time") or 0)
                mid = self.next_id
                self.next_id += 1
                self.measurements[mid] = {
                    "id": mid, "definition": d, "sources": body["probes"],
                    "created": now, "start": max(now, start), "stopped_at": None,
                    "participants": select_probes(self.fx, body, d["af"], self.measurements),
                }
                ids.append(mid)
            self._save()
        return ids

    def stop(self, mid: int) -> bool:
        with self.lock:
            m = self.measurements.get(mid)
            if not m:
                return False
            if m["stopped_at"] is None:
                m["stopped_at"] = time.time()
                self._save()
            return True

    # timeline -----------------------------------------------------------------------
    def status(self, m: dict, now: float) -> tuple[str, float]:
        created, start = m["created"], m["start"]
        end = start + self.stop_delay
        if m["stopped_at"] is not None and m["stopped_at"] < end:
            return "Stopped", m["stopped_at"]
        if now < start:
            return ("Specified", created) if now < created + 0.2 * self.stop_delay \
                else ("Scheduled", created + 0.2 * self.stop_delay)
        if not m["participants"] and now >= start + 0.2 * self.stop_delay:
            return "No suitable probes", start + 0.2 * self.stop_delay
        if now < start + 0.2 * self.stop_delay:
            return "Specified", created
        if now < end:
            return "Ongoing", start + 0.2 * self.stop_delay
        return "Stopped", end

    def visible(self, m: dict, now: float) -> list[int]:
        """Participants whose result has arrived by ``now``."""
        n = len(m["participants"])
        status, _ = self.status(m, now)
        if status == "Stopped":
            if m["stopped_at"] is not None and m["stopped_at"] < m["start"] + self.stop_delay:
                now = m["stopped_at"]
            else:
                return list(m["participants"])
        begin = m["start"] + 0.2 * self.stop_delay
        span = 0.8 * self.stop_delay
        return [pid for i, pid in enumerate(m["participants"])
                if now >= begin + span * (i + 1) / (n + 1)]

    def results(self, m: dict, now: float) -> list[dict]:
        ts0 = int(m["start"]) + 1
        seen = set(self.visible(m, now))
        out = []
        for i, pid in enumerate(m["participants"]):
            if pid in seen:
                out.append(build_result(self.fx, m, self.fx["probes"][pid], ts0 + i))
        return out

    def meta(self, m: dict, now: float, host: str) -> dict:
        d = m["definition"]
        status, since = self.status(m, now)
        stop = None
        if status in ("Stopped", "No suitable probes"):
            stop = int(since)
        out = {
            "id": m["id"], "af": d["af"], "type": d["type"], "description": d["description"],
            "is_oneoff": True, "is_public": d.get("is_public", True), "interval": None,
            "spread": None, "resolve_on_probe": d.get("resolve_on_probe", False),
            "creation_time": int(m["created"]), "start_time": int(m["start"]),
            "stop_time": stop,
            "status": {"id": MSM_STATUS[status], "name": status, "when": int(since)},
            "group_id": None, "participant_count": len(m["participants"]) if stop else None,
            "probes_requested": sum(s["requested"] for s in m["sources"]),
            "probes_scheduled": len(m["participants"]),
            "target": d.get("target"),
            "target_ip": resolve_name(self.fx, d["target"], d["af"]) if d.get("target") else None,
            "target_asn": None, "tags": d.get("tags", []),
            "result": f"https://{host}/api/v2/measurements/{m['id']}/results/",
        }
        if d["type"] == "dns":
            out.update({k: d.get(k) for k in ("query_argument", "query_class", "query_type")})
            out["use_probe_resolver"] = bool(d.get("use_probe_resolver", False))
            out["protocol"] = str(d.get("protocol", "UDP")).upper()
        else:
            out["packets"] = d.get("packets", 3)
            out["size"] = d.get("size", 48)
        return out


def probe_meta(p: dict) -> dict:
    return {
        "id": p["id"], "address_v4": p["address_v4"], "address_v6": p["address_v6"],
        "asn_v4": p["asn_v4"], "asn_v6": p["asn_v6"], "country_code": p["country_code"],
        "description": p["description"], "is_anchor": p["is_anchor"], "is_public": p["is_public"],
        "prefix_v4": p["prefix_v4"], "prefix_v6": p["prefix_v6"],
        "geometry": {"type": "Point", "coordinates": p["geometry"]} if p["geometry"] else None,
        "status": {"id": PROBE_STATUS[p["status"]], "name": p["status"],
                   "since": "2024-01-01T00:00:00"},
        "status_since": 1704067200, "first_connected": 1577836800, "last_connected": 1704067200,
        "tags": [{"name": t, "slug": t} for t in p["tags"]], "type": "Probe",
    }


def _probe_filter(params: dict[str, str]):
    def match(p: dict) -> bool:
        for k, v in params.items():
            if k in ("id__in",):
                if p["id"] not in {int(x) for x in v.split(",") if x.strip()}:
                    return False
            elif k == "id":
                if p["id"] != int(v):
                    return False
            elif k == "country_code":
                if p["country_code"] != v.upper():
                    return False
            elif k in ("asn_v4", "asn_v6"):
                if p[k] != int(v):
                    return False
            elif k == "asn":
                if int(v) not in (p["asn_v4"], p["asn_v6"]):
                    return False
            elif k in ("status", "status__in"):
                if PROBE_STATUS[p["status"]] not in {int(x) for x in v.split(",")}:
                    return False
            elif k in ("is_anchor", "is_public"):
                if p[k] != (v.lower() in ("1", "true")):
                    return False
            elif k == "prefix_v4":
                if p["prefix_v4"] != v:
                    return False
            elif k == "tags":
                if not all(t in p["tags"] for t in v.split(",")):
                    return False
        return True
    return match


# --------------------------------------------------------------------------- HTTP

class Handler(BaseHTTPRequestHandler):
    server_version = "AtlasStandIn/1.0"
    server: "TLSServer"

    def log_message(self, fmt, *args):  # noqa: D401 - stdlib signature
        if not self.server.quiet:
            sys.stderr.write("atlas_api: %s %s\n" % (self.address_string(), fmt % args))

    def do_GET(self):
        self._dispatch("GET")

    def do_POST(self):
        self._dispatch("POST")

    def do_DELETE(self):
        self._dispatch("DELETE")

    def do_PUT(self):
        self._dispatch("PUT")

    def do_PATCH(self):
        self._dispatch("PATCH")

    # ------------------------------------------------------------------------------
    def _send(self, status: int, payload: Any, headers: Optional[dict] = None) -> None:
        data = b"" if payload is None else json.dumps(payload).encode()
        self.send_response(status)
        if payload is not None:
            self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)

    def _dispatch(self, method: str) -> None:
        app: Store = self.server.app
        url = urlsplit(self.path)
        path = url.path
        query = {k: v[-1] for k, v in parse_qs(url.query, keep_blank_values=True).items()}
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        body: Any = None
        if raw:
            try:
                body = json.loads(raw)
            except ValueError:
                body = {"__unparsable__": raw.decode("utf-8", "replace")}
        if path.startswith("/_standin/"):
            return self._control(method, path, body)
        status, headers, payload = 500, {}, None
        try:
            fault = app.take_fault(path)
            if fault:
                raise fault
            status, payload, headers = self._route(method, path, query, body, raw)
        except ApiError as exc:
            status, payload, headers = exc.status, exc.body(), exc.headers
        except Exception as exc:  # noqa: BLE001 - an internal error must still answer
            status, payload = 500, ApiError(500, f"stand-in bug: {exc!r}").body()
        app.log({
            "ts": time.time(), "method": method, "path": path, "query": query,
            "headers": {k.lower(): self.headers.get(k) for k in
                        ("Authorization", "User-Agent", "Content-Type", "Accept")
                        if self.headers.get(k) is not None},
            "body": body, "status": status, "client": self.client_address[0],
        })
        self._send(status, payload, headers)

    def _control(self, method: str, path: str, body: Any) -> None:
        app: Store = self.server.app
        if path.rstrip("/") == "/_standin/faults":
            if method == "POST":
                if not isinstance(body, dict):
                    return self._send(400, ApiError(400, "JSON object expected").body())
                with app.lock:
                    app.faults = {"http_429": 0, "http_5xx": 0, "retry_after": 1,
                                  "status_5xx": 503, "match": "", **body}
            with app.lock:
                return self._send(200, dict(app.faults))
        return self._send(404, ApiError(404, "Not found.").body())

    def _auth(self, query: dict, required: bool) -> None:
        app: Store = self.server.app
        header = self.headers.get("Authorization")
        key = None
        if header:
            scheme, _, value = header.partition(" ")
            if scheme != "Key" or not value.strip():
                raise ApiError(401, "Authorization header must be 'Key <api key>'.")
            key = value.strip()
        elif query.get("key"):
            key = query["key"]
        if key is None:
            if required:
                raise ApiError(401, "Authentication credentials were not provided.")
            return
        if key not in app.api_keys:
            raise ApiError(401, "The provided API key does not exist.")

    def _host(self) -> str:
        return self.headers.get("Host") or "%s:%d" % self.server.server_address[:2]

    def _route(self, method: str, path: str, query: dict, body: Any, raw: bytes):
        app: Store = self.server.app
        parts = [p for p in path.split("/") if p]
        if parts[:2] != ["api", "v2"] or len(parts) < 3:
            raise ApiError(404, "Not found.")
        rest = parts[2:]
        now = time.time()
        if rest[0] == "measurements":
            if len(rest) == 1:
                if method == "POST":
                    self._auth(query, required=True)
                    if raw and isinstance(body, dict) and "__unparsable__" in body:
                        raise ApiError(400, "JSON parse error.")
                    errs = validate_create(body)
                    if errs:
                        raise ApiError(400, "There was a problem with your request", errs)
                    return 201, {"measurements": app.create(body)}, {}
                if method == "GET":
                    self._auth(query, required=False)
                    return 200, self._list_measurements(query, now), {}
                raise ApiError(405, f'Method "{method}" not allowed.')
            if not rest[1].isdigit():
                raise ApiError(404, "Not found.")
            m = app.measurements.get(int(rest[1]))
            if m is None:
                raise ApiError(404, "Not found.")
            if len(rest) == 2:
                if method == "GET":
                    self._auth(query, required=False)
                    return 200, app.meta(m, now, self._host()), {}
                if method == "DELETE":
                    self._auth(query, required=True)
                    app.stop(m["id"])
                    return 204, None, {}
                raise ApiError(405, f'Method "{method}" not allowed.')
            if len(rest) == 3 and rest[2] in ("results", "latest") and method == "GET":
                self._auth(query, required=False)
                return 200, self._results(m, query, now, latest=rest[2] == "latest"), {}
            raise ApiError(404, "Not found.")
        if rest[0] == "probes" and method == "GET":
            self._auth(query, required=False)
            if len(rest) == 2:
                p = app.fx["probes"].get(int(rest[1])) if rest[1].isdigit() else None
                if p is None:
                    raise ApiError(404, "Not found.")
                return 200, probe_meta(p), {}
            if len(rest) == 1:
                items = [probe_meta(p) for _, p in sorted(app.fx["probes"].items())
                         if _probe_filter(query)(p)]
                return 200, self._page(items, query, path), {}
        raise ApiError(404, "Not found.")

    def _results(self, m: dict, query: dict, now: float, latest: bool) -> list:
        app: Store = self.server.app
        res = app.results(m, now)
        try:
            if query.get("start"):
                res = [r for r in res if r["timestamp"] >= int(query["start"])]
            if query.get("stop"):
                res = [r for r in res if r["timestamp"] <= int(query["stop"])]
            if query.get("probe_ids"):
                ids = {int(x) for x in query["probe_ids"].split(",") if x.strip()}
                res = [r for r in res if r["prb_id"] in ids]
        except ValueError:
            raise ApiError(400, "start/stop must be UNIX timestamps and probe_ids a "
                                "comma-separated list of integers") from None
        return res

    def _list_measurements(self, query: dict, now: float) -> dict:
        app: Store = self.server.app
        items = []
        for mid, m in sorted(app.measurements.items()):
            meta = app.meta(m, now, self._host())
            if "id__in" in query and mid not in {int(x) for x in query["id__in"].split(",")}:
                continue
            if "status" in query and meta["status"]["id"] not in {
                    int(x) for x in query["status"].split(",")}:
                continue
            if "type" in query and meta["type"] != query["type"]:
                continue
            items.append(meta)
        return self._page(items, query, "/api/v2/measurements/")

    def _page(self, items: list, query: dict, path: str) -> dict:
        try:
            size = max(1, min(int(query.get("page_size", 50)), 500))
            page = max(1, int(query.get("page", 1)))
        except ValueError:
            raise ApiError(400, "page and page_size must be integers") from None
        chunk = items[(page - 1) * size: page * size]

        def link(n: int) -> str:
            q = dict(query, page=str(n))
            return f"https://{self._host()}{path}?{urlencode(q)}"
        return {"count": len(items),
                "next": link(page + 1) if page * size < len(items) else None,
                "previous": link(page - 1) if page > 1 else None,
                "results": chunk}


class TLSServer(ThreadingHTTPServer):
    """HTTPS server: TLS handshakes happen in the per-connection thread."""

    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 64

    def __init__(self, addr: tuple, ctx: ssl.SSLContext, app: Store, quiet: bool = False):
        self.address_family = socket.AF_INET6 if ":" in addr[0] else socket.AF_INET
        self.ssl_ctx, self.app, self.quiet = ctx, app, quiet
        super().__init__(addr, Handler)

    def server_bind(self):
        if self.address_family == socket.AF_INET6:
            self.socket.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
        # Not HTTPServer.server_bind: it calls getfqdn(), a reverse DNS lookup.
        socketserver.TCPServer.server_bind(self)
        self.server_name, self.server_port = self.server_address[:2]

    def finish_request(self, request, client_address):
        request.settimeout(15)
        try:
            tls = self.ssl_ctx.wrap_socket(request, server_side=True)
        except (ssl.SSLError, OSError):
            return
        try:
            self.RequestHandlerClass(tls, client_address, self)
        finally:
            try:
                tls.close()
            except OSError:
                pass


def make_ssl_context(cert: str, key: str) -> ssl.SSLContext:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    ctx.load_cert_chain(cert, key)
    return ctx


def serve(listen: list[str], port: int, cert: str, key: str, fixtures: str, state: str,
          api_keys: list[str], stop_delay: Optional[float] = None,
          faults: Optional[dict] = None, quiet: bool = False) -> list[TLSServer]:
    """Start one server per listen address (in daemon threads); returns them."""
    fx = load_fixtures(fixtures)
    plan = dict(fx["faults"])
    plan.update({k: v for k, v in (faults or {}).items() if v is not None})
    app = Store(fx, Path(state), api_keys,
                fx["stop_delay_s"] if stop_delay is None else stop_delay, plan)
    ctx = make_ssl_context(cert, key)
    servers = []
    for addr in listen:
        srv = TLSServer((addr, port), ctx, app, quiet)
        if port == 0:  # every further address shares the first free port
            port = srv.server_address[1]
        threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.2},
                         daemon=True, name=f"atlas-api-{addr}").start()
        servers.append(srv)
    return servers


def main(argv: Optional[list[str]] = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m testbed.atlas_api",
                                 description="RIPE Atlas API v2 stand-in (HTTPS).")
    ap.add_argument("--listen", action="append", required=True, metavar="ADDR",
                    help="address to bind (repeatable, IPv4 or IPv6)")
    ap.add_argument("--port", type=int, default=443, help="TCP port (0: any free port)")
    ap.add_argument("--cert", required=True, help="PEM certificate (chain) for the server")
    ap.add_argument("--key", required=True, help="PEM private key")
    ap.add_argument("--fixtures", default=str(DEFAULT_FIXTURES), help="fixture directory")
    ap.add_argument("--state", required=True, help="directory for requests.jsonl etc.")
    ap.add_argument("--api-key", action="append", required=True, dest="api_keys",
                    metavar="KEY", help="accepted API key (repeatable)")
    ap.add_argument("--stop-delay", type=float, default=None,
                    help="seconds from start to 'Stopped' (default: world.json, 1.0)")
    ap.add_argument("--fail-429", type=int, default=None, metavar="N",
                    help="answer the first N API requests with 429")
    ap.add_argument("--fail-5xx", type=int, default=None, metavar="N",
                    help="then answer N requests with a 5xx (--status-5xx)")
    ap.add_argument("--status-5xx", type=int, default=None)
    ap.add_argument("--retry-after", type=int, default=None, help="Retry-After seconds (429)")
    ap.add_argument("--fault-match", default=None, help="faults only hit paths containing this")
    ap.add_argument("--quiet", action="store_true", help="no per-request log on stderr")
    a = ap.parse_args(argv)
    ready = Path(a.state) / "ready.json"
    ready.unlink(missing_ok=True)
    try:
        servers = serve(a.listen, a.port, a.cert, a.key, a.fixtures, a.state, a.api_keys,
                        a.stop_delay, {"http_429": a.fail_429, "http_5xx": a.fail_5xx,
                                       "status_5xx": a.status_5xx, "retry_after": a.retry_after,
                                       "match": a.fault_match}, a.quiet)
    except (FixtureError, OSError, ssl.SSLError) as exc:
        print(f"atlas_api: {exc}", file=sys.stderr)
        return 2
    endpoints = [list(s.server_address[:2]) for s in servers]
    tmp = ready.with_suffix(".tmp")
    tmp.write_text(json.dumps({"pid": os.getpid(), "endpoints": endpoints}))
    tmp.replace(ready)
    print("READY " + " ".join(f"https://{'[%s]' % h if ':' in h else h}:{p}"
                              for h, p in endpoints), flush=True)
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        pass
    finally:
        for s in servers:
            s.shutdown()
            s.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
