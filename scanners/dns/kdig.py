"""`netsurvey scan dns-second-opinion` (issue 24): an independent client, Knot's ``kdig``
(Debian knot-dnsutils), asks an authoritative server the same questions ``scan dns-ttl``
and ``scan dns-ecs`` ask, with its own wire code and its own parser: ``kdig @SERVER NAME A
+norec [+subnet=PREFIX]``. Its text output is read (status, flags and section counts,
``;; CLIENT-SUBNET: address/source/scope``, answer TTLs), never the raw option bytes, so the
ECS echo and scope are kdig's reading, not ours. Rows: ``dns_second_opinion`` (0111)."""
from __future__ import annotations

import ipaddress
import re
import shutil
import subprocess
import time
from dataclasses import dataclass
from typing import Optional

KDIG_TIMEOUT_S = 2
#: UDP tries per question. kdig itself never retries (+retry=0) nor falls back to TCP
#: (+ignore): each try, and the TCP question after a truncated reply, is a packet of its
#: own that takes its token from the run's limiter (:func:`ask_paced`).
KDIG_ATTEMPTS = 2

_STATUS = re.compile(r";; ->>HEADER<<- opcode: \w+; status: (\w+);")
_FLAGS = re.compile(r";; Flags: ([a-z ]*); QUERY: \d+; ANSWER: (\d+); AUTHORITY: (\d+); ADDITIONAL: (\d+)")
_ECS = re.compile(r";; CLIENT-SUBNET: ([0-9a-fA-F.:]+)/(\d+)/(\d+)")


@dataclass(frozen=True)
class KdigVerdict:
    """kdig's reading of one reply (None = not in the reply / no reply)."""

    status: str                      # 'success' or why not ('timeout', 'error')
    rcode: Optional[str] = None
    authoritative: Optional[bool] = None
    ttl: Optional[int] = None        # smallest TTL of the A/AAAA answer RRset of the name
    answers: tuple[str, ...] = ()
    authority_count: Optional[int] = None
    ecs_address: Optional[str] = None
    source_prefix: Optional[int] = None
    scope_prefix: Optional[int] = None
    error: Optional[str] = None
    truncated: bool = False          # TC set (kdig asked with +ignore: no TCP of its own)


def kdig_binary() -> str:
    from netsurvey.errors import UsageError

    exe = shutil.which("kdig")
    if not exe:
        raise UsageError("kdig not found: install knot-dnsutils (scripts/install.sh)")
    return exe


def kdig_version() -> str:
    r = subprocess.run([kdig_binary(), "--version"], capture_output=True, text=True)
    m = re.search(r"version (\S+)", r.stdout)
    return f"kdig {m.group(1)}" if m else "kdig"


def parse(text: str, name: str, qtype: str) -> KdigVerdict:
    """kdig's text output -> a verdict."""
    st = _STATUS.search(text)
    if not st:
        err = next((ln.strip("; ").strip() for ln in text.splitlines() if "WARNING" in ln or "ERROR" in ln),
                   "no reply")
        # kdig 3.x says "response timeout for SERVER" (then "failed to query server", also
        # when the query could not be sent at all): a silent server is a timeout
        timeout = "response timeout" in text or "timed out" in text
        return KdigVerdict("timeout" if timeout else "error", error=err[:300])
    fl = _FLAGS.search(text)
    ecs = _ECS.search(text)
    owner = name.rstrip(".").lower() + "."
    rrs = []
    for ln in text.splitlines():
        f = ln.split()
        if len(f) == 5 and f[0].lower() == owner and f[2] == "IN" and f[3] == qtype and not ln.startswith(";"):
            rrs.append((int(f[1]), f[4]))
    return KdigVerdict("success", rcode=st.group(1), authoritative=("aa" in fl.group(1).split()) if fl else None,
                       truncated=fl is not None and "tc" in fl.group(1).split(),
                       ttl=min(t for t, _ in rrs) if rrs else None, answers=tuple(sorted(v for _, v in rrs)),
                       authority_count=int(fl.group(3)) if fl else None,
                       ecs_address=ecs.group(1) if ecs else None, source_prefix=int(ecs.group(2)) if ecs else None,
                       scope_prefix=int(ecs.group(3)) if ecs else None)


def ask(server: tuple[str, int], name: str, qtype: str, subnet=None, tcp: bool = False) -> KdigVerdict:
    """One kdig question: one UDP query (no retry, no TCP fallback), or one over TCP."""
    argv = [kdig_binary(), f"@{server[0]}", "-p", str(server[1]), name, qtype, "+norec",
            f"+time={KDIG_TIMEOUT_S}", "+retry=0", "+tcp" if tcp else "+ignore"]
    if subnet is not None:
        argv.append(f"+subnet={subnet}")
    try:
        r = subprocess.run(argv, capture_output=True, text=True, timeout=2 * KDIG_TIMEOUT_S + 2)
    except subprocess.TimeoutExpired:
        return KdigVerdict("timeout", error="kdig did not finish")
    return parse(r.stdout + r.stderr, name, qtype)


def ask_paced(limiter, server: tuple[str, int], name: str, qtype: str, subnet=None) -> KdigVerdict:
    """Up to KDIG_ATTEMPTS UDP tries, then TCP after a truncated reply; every packet kdig
    sends waits for its token (global rate and per-destination limit)."""
    def pace():
        wait = limiter.take_sync(server[0])
        if wait > 0:
            time.sleep(wait)

    for _ in range(KDIG_ATTEMPTS):
        pace()
        v = ask(server, name, qtype, subnet)
        if v.status != "timeout":
            break
    if v.status == "success" and v.truncated:
        pace()
        v = ask(server, name, qtype, subnet, tcp=True)
    return v


COLUMNS = ["run_id", "hostname", "qtype", "nameserver", "subnet", "client", "status", "error", "rcode",
           "authoritative", "ttl", "answers", "authority_count", "ecs_address", "source_prefix", "scope_prefix"]


def run(ctx, server: tuple[str, int], names: list[str], subnets: list, qtype: str, client: str) -> dict:
    """Ask every name without ECS and with each subnet; one row per question, committed as
    it is answered (a run ended by a signal keeps what it asked). In a shard the rows go
    through the shard's transaction (ResultWriter): committed with its job_shard row, once,
    stamped with its shard_id."""
    from netsurvey.writer import ResultWriter

    counts: dict = {}
    with ResultWriter(ctx.db, "dns_second_opinion", COLUMNS, batch_rows=1) as w:
        for name in names:
            for s in [None, *subnets]:
                v = ask_paced(ctx.limiter, server, name, qtype, s)
                counts[v.status] = counts.get(v.status, 0) + 1
                w.write((ctx.run.id, name, qtype, ipaddress.ip_address(server[0]), s, client, v.status,
                         v.error, v.rcode, v.authoritative, v.ttl, list(v.answers), v.authority_count,
                         ipaddress.ip_address(v.ecs_address) if v.ecs_address else None,
                         v.source_prefix, v.scope_prefix))
    return counts


def register(scan_app) -> None:
    import typer

    from netsurvey.errors import UsageError
    from netsurvey.measure import measurement
    from netsurvey.options import list_option, rate_option, top_option

    from . import promises

    @measurement(scan_app, "dns-second-opinion", tables=("dns_second_opinion",), promise=promises.DNS_SECOND_OPINION)
    def dns_second_opinion(
        list_name: Optional[str] = list_option(help="Target list whose hostnames are asked."),
        top: Optional[int] = top_option(help="Only the first N targets."),
        names: list[str] = typer.Option([], "--name", help="Extra hostname asked (repeatable)."),
        nameserver: str = typer.Option(..., "--nameserver", help="Authoritative server asked (ADDR[:PORT])."),
        subnets: list[str] = typer.Option([], "--subnet", help="Client subnet sent with +subnet (repeatable); "
                                          "every name is also asked without ECS."),
        qtype: str = typer.Option("A", "--type", help="Record type asked (A or AAAA)."),
        rate: Optional[float] = rate_option(),
    ) -> dict:
        """kdig (Knot) as an independent second opinion on TTLs, ECS echo/scope and minimal responses."""
        from netsurvey.clictx import open_scan
        from netsurvey.config import finite
        from netsurvey.selection import TargetSelection

        from .options import NAMES, check_allowed as _check_allowed, parse_server, parse_subnets

        qt = qtype.upper()
        if qt not in ("A", "AAAA"):
            raise UsageError("--type must be A or AAAA")
        selected = TargetSelection(list_name, top, tuple(names), 53).items(NAMES)
        hosts: list[str] = [t.hostname for t in selected]  # type: ignore[misc]  # NAMES: every one a name
        nets = parse_subnets(subnets)
        finite(rate, "--rate", positive=True)
        ns = parse_server(nameserver)
        _check_allowed("--nameserver", ns[0])
        client = kdig_version()
        params = {"list": list_name, "top": top, "names": names, "nameserver": list(ns),
                  "subnets": [str(n) for n in nets], "type": qt, "rate": rate, "client": client}
        ctx = open_scan(params, rate_pps=rate, targets=[ns[0]])
        counts = run(ctx, ns, hosts, nets, qt, client)
        counts["targets"] = len(hosts)
        ctx.counts.update(counts)
        return {"run_id": ctx.run.id, "counts": counts}
