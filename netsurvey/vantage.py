"""Where a run stands (issue 26): its vantage name and the source addresses it used.

- The **name**: ``--vantage NAME`` (global option, or ``NETSURVEY_VANTAGE``), else
  ``vantage_name`` in the survey config, else the hostname. Shards inherit the worker's
  (the option is put into the environment the shard processes get).
- The **sources**: for each address family, the source address the kernel picks towards
  the run's destinations, read with ``getsockname`` from a connected UDP socket (``connect``
  on a datagram socket is a route lookup: no packet leaves). The destinations are the
  run's target addresses (a sample of up to :data:`MAX_DESTINATIONS` distinct ones); when
  the command knows only names before probing, the addresses among its options (a
  ``--resolver``/``--nameserver``), else the resolvers of resolv.conf (where its first
  packets go). Not a config value: what the routing table of the namespace the
  command runs in says.

``open_scan`` calls :func:`record` once per run (and per shard); ``scan_run.vantage``
gets ``name`` and ``sources`` (the first shard's, for a sharded run) and each committed
shard keeps its own in ``job_shard.vantage``.
"""
from __future__ import annotations

import ipaddress
import json
import os
import re
import socket
from pathlib import Path
from typing import Iterable, Optional

from .errors import UsageError

#: Distinct destinations looked up per run (a route lookup each; sources rarely differ
#: beyond the first few, and a million-target run must not do a million lookups).
MAX_DESTINATIONS = 64
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:@-]{0,63}")

_last: Optional[dict] = None


def check_name(name: str, option: str = "--vantage") -> str:
    if not _NAME.fullmatch(name or ""):   # fullmatch: '$' let a trailing newline through
        raise UsageError(f"{option}: {name!r} is not a vantage name (letters, digits, . _ : @ -; at most 64)")
    return name


def vantage_name(config_name: Optional[str] = None) -> str:
    """``--vantage`` / NETSURVEY_VANTAGE, else the config's ``vantage_name`` (``config_name``,
    given by the run path), else the hostname."""
    env = os.environ.get("NETSURVEY_VANTAGE")
    if env:
        return check_name(env, "NETSURVEY_VANTAGE")
    return check_name(config_name, "vantage_name") if config_name else socket.gethostname()


def _addresses(targets) -> list[str]:
    out: dict[str, None] = {}
    if not isinstance(targets, (list, tuple)):   # a generator is the command's: never consume it here
        return []
    for t in targets:
        a = t if isinstance(t, str) else getattr(t, "address", None)
        if not a:
            continue
        try:
            a = str(ipaddress.ip_address(a))
        except ValueError:
            continue
        out.setdefault(a)
        if len(out) >= MAX_DESTINATIONS:
            break
    return list(out)


def _resolvers(path: Path = Path("/etc/resolv.conf")) -> list[str]:
    try:
        lines = path.read_text().splitlines()
    except OSError:
        return []
    out = []
    for ln in lines:
        w = ln.split()
        if len(w) >= 2 and w[0] == "nameserver":
            out.append(w[1].split("%")[0])
    return _addresses(out)   # addresses only: a name would be looked up (a DNS query) by connect()


def source_for(dest: str) -> Optional[str]:
    """The source address the kernel would use towards ``dest`` (None without a route)."""
    try:   # a literal address only: connect() would resolve a name (a DNS query leaves)
        dest = str(ipaddress.ip_address(dest))
    except ValueError:
        return None
    fam = socket.AF_INET6 if ":" in dest else socket.AF_INET
    with socket.socket(fam, socket.SOCK_DGRAM) as s:
        try:
            s.connect((dest, 53))
            return s.getsockname()[0]
        except OSError:
            return None


def source_addresses(destinations: Iterable[str]) -> dict[str, list[str]]:
    """{"ipv4": [...], "ipv6": [...]}: the distinct sources towards ``destinations``."""
    out: dict[str, dict[str, None]] = {"ipv4": {}, "ipv6": {}}
    for d in destinations:
        src = source_for(d)
        if src:
            out["ipv6" if ":" in src else "ipv4"].setdefault(src)
    return {k: sorted(v) for k, v in out.items()}


def _option_addresses(parameters: Optional[dict]) -> list[str]:
    """IP addresses among the command's option values (e.g. --resolver, --nameserver):
    servers the command will send to although its targets are names."""
    vals: list = []
    for v in (parameters or {}).values():
        vals += v if isinstance(v, (list, tuple)) else [v]
    return _addresses([v for v in vals if isinstance(v, str)])


def describe(targets=None, parameters: Optional[dict] = None, allowed=None, config_name: Optional[str] = None) -> dict:
    """{"name": ..., "sources": {...}, "sources_towards": "targets" | "options" | "resolvers"}.
    ``allowed`` (the run's address policy): only destinations it allows are looked up - a
    route lookup sends nothing, but a blocked or reserved address is not even connect()ed."""
    def ok(addrs: list[str]) -> list[str]:
        return [a for a in addrs if allowed is None or allowed(a)]

    dests = ok(_addresses(targets))
    towards = "targets"
    if not dests:
        dests, towards = ok(_option_addresses(parameters)), "options"
    if not dests:
        dests, towards = ok(_resolvers()), "resolvers"
    return {"name": vantage_name(config_name), "sources": source_addresses(dests), "sources_towards": towards}


def record(db, run_id: int, targets=None, parameters: Optional[dict] = None, allowed=None,
           config_name: Optional[str] = None) -> dict:
    """Merge this process's vantage into ``scan_run.vantage`` (unless a shard before us
    recorded one) and keep it for the shard's ``job_shard`` row."""
    global _last
    v = describe(targets, parameters, allowed, config_name)
    _last = v
    with db.connect() as conn:
        conn.execute("UPDATE scan_run SET vantage = vantage || %s::jsonb WHERE id = %s AND NOT vantage ? 'name'",
                     (json.dumps(v), run_id))
    return v


def shard_vantage_json() -> Optional[str]:
    """This process's vantage for its job_shard row (None if no run was opened)."""
    return json.dumps(_last) if _last is not None else None
