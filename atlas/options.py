"""Campaign options: command-line flags over ``[scanners.atlas]`` in the survey config over
defaults. The API key comes from ``NETSURVEY_ATLAS_KEY`` (or the config), never the repo."""
from __future__ import annotations

import ipaddress
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from netsurvey.errors import UsageError

from .api import ApiOptions

CONFIG_KEYS = {"api_host", "api_key", "ca_bundle", "zone", "server_v4", "server_v6",
               "poll_interval_s", "timeout_s", "asn_db", "max_retries"}
SELECTOR_TYPES = {"country", "asn", "area", "prefix", "probes"}
AREAS = {"WW", "West", "North-Central", "South-Central", "North-East", "South-East"}


@dataclass(frozen=True)
class CampaignOptions:
    """One campaign.

    :ivar selectors: probe sources, e.g. ``country:DE``, ``asn:3320``, ``area:WW``,
        ``prefix:193.0.0.0/16``, ``probes:1001,1002``.
    :ivar count: probes requested per selector (explicit ids: all of them).
    :ivar af: address family of every measurement (4 or 6).
    :ivar zone: the instrumented zone; each probe queries ``<prb_id>.<timestamp>.<zone>``
        (RIPE's ``prepend_probe_id``), so every query name is unique.
    :ivar server: the test server's address (RTT_direct target; RTT_Server pings leave from
        the host running the campaign, which should be that server).
    :ivar packets: pings per measurement (5, as the thesis; RTT = their average).
    :ivar dns_timeout_ms: per-resolver DNS timeout on the probe (ms).
    :ivar poll_interval_s: seconds between status polls. :ivar timeout_s: give up after.
    :ivar asn_db: pyasn IP-to-ASN file (None: no AS mapping in this run).
    :ivar server_ping: ping the resolvers from this host (RTT_Server).
    """

    selectors: tuple[str, ...]
    count: int
    server: str
    zone: str
    af: int = 4
    packets: int = 5
    dns_timeout_ms: int = 5000
    poll_interval_s: float = 10.0
    timeout_s: float = 1800.0
    asn_db: Optional[Path] = None
    server_ping: bool = True

    def sources(self) -> list[dict]:
        return [parse_selector(s, self.count) for s in self.selectors]


def parse_selector(text: str, count: int) -> dict:
    """``type:value`` -> a RIPE Atlas probe source ``{type, value, requested}``."""
    kind, sep, value = text.partition(":")
    kind, value = kind.strip().lower(), value.strip()
    if not sep or kind not in SELECTOR_TYPES or not value:
        raise UsageError(f"--probes {text!r}: expected one of {sorted(SELECTOR_TYPES)} as "
                         "TYPE:VALUE, e.g. country:DE, asn:3320, probes:1001,1002")
    if kind == "country":
        if not re.fullmatch(r"[A-Za-z]{2}", value):
            raise UsageError(f"--probes {text!r}: a country is a two-letter ISO code")
        value = value.upper()
    elif kind == "asn":
        if not value.upper().removeprefix("AS").isdigit():
            raise UsageError(f"--probes {text!r}: an ASN is a number")
        value = value.upper().removeprefix("AS")
    elif kind == "area":
        if value not in AREAS:
            raise UsageError(f"--probes {text!r}: area must be one of {sorted(AREAS)}")
    elif kind == "prefix":
        try:
            value = str(ipaddress.ip_network(value, strict=False))
        except ValueError:
            raise UsageError(f"--probes {text!r}: not a prefix") from None
    elif kind == "probes":
        ids = [x.strip() for x in value.split(",") if x.strip()]
        if not ids or not all(x.isdigit() for x in ids):
            raise UsageError(f"--probes {text!r}: a comma-separated list of probe ids")
        return {"type": "probes", "value": ",".join(ids), "requested": len(ids)}
    return {"type": kind, "value": value, "requested": count}


def atlas_config(cfg) -> dict:
    """``[scanners.atlas]`` of the survey config, validated."""
    raw = dict(cfg.scanners.get("atlas", {}))
    extra = set(raw) - CONFIG_KEYS
    if extra:
        raise UsageError(f"[scanners.atlas]: unknown keys {sorted(extra)}; known: {sorted(CONFIG_KEYS)}")
    return raw


def api_options(cfg: dict, host: Optional[str] = None, ca_bundle: Optional[str] = None,
                need_key: bool = True) -> ApiOptions:
    key = os.environ.get("NETSURVEY_ATLAS_KEY") or cfg.get("api_key")
    if need_key and not key:
        raise UsageError("no RIPE Atlas API key: set NETSURVEY_ATLAS_KEY (or [scanners.atlas] api_key)")
    ca = ca_bundle or cfg.get("ca_bundle")
    if ca and not Path(ca).is_file():
        raise UsageError(f"--ca-bundle {ca}: file not found")
    return ApiOptions(host=host or cfg.get("api_host") or "atlas.ripe.net", key=key,
                      verify=ca or True, max_retries=int(cfg.get("max_retries", 5)))
