"""The three TFO measurements as functions the CLI calls: support scan (Table 3.1),
load-balancing survey (Fig 3.2/3.3, resumable rounds) and cross-address cookie reuse."""
from __future__ import annotations

import asyncio
import ipaddress
import json
import secrets
import time
from dataclasses import dataclass
from typing import Callable, Iterable, Optional, Sequence

from netsurvey import scanning
from netsurvey.scanning import ScanContext, ScanOutcome, ScanStatus, ScanTarget, run_scan
from netsurvey.selection import resolve_names
from netsurvey.targets import Target
from netsurvey.writer import ResultWriter

from . import kernel_check
from .engine import EngineOptions, RawEngine, RawTarget
from .packets import parse_options
from .scanner import TfoOptions, TfoScanner
from .store import KERNEL_COLUMNS, REUSE_COLUMNS, ProbeStore

#: Payload of the cookie-reuse SYNs (bytes).
REUSE_DATA = b"HEAD / HTTP/1.0\r\n\r\n"


def new_seed() -> int:
    return secrets.randbits(64)


def resolve_targets(targets: Sequence[Target], port: int, all_addresses: bool,
                    nameservers: Optional[list[str]] = None) -> tuple[list[ScanTarget], list[ScanOutcome]]:
    """Hostnames -> ScanTargets (first A address, or every A and AAAA address) and
    RESOLUTION_FAILED outcomes for names without one: TFO's choice of addresses, as its
    support scan's stream resolves its batches (:func:`netsurvey.selection.resolve_names`)."""
    names = [ScanTarget(t.hostname, None, port, t.rank) for t in targets]
    return asyncio.run(resolve_names(names, ipv6=all_addresses, first=not all_addresses, nameservers=nameservers))


def probe_round(ctx: ScanContext, opts: TfoOptions, targets: Iterable[ScanTarget], failed: Sequence[ScanOutcome],
                round_no: int, *, show_progress: bool = True,
                on_outcome: Optional[Callable[[ScanOutcome], None]] = None) -> dict[str, int]:
    """Probe ``targets`` once (policy checked by run_scan) and store every outcome (a
    :class:`~netsurvey.scanning.ResolvingStream`'s failed names too, as it finds them)."""
    store = ProbeStore(ctx.db, ctx.run.id, round_no)
    counts: dict[str, int] = {}

    def keep(o: ScanOutcome) -> None:
        store(o)
        if on_outcome:
            on_outcome(o)

    def keep_failed(o: ScanOutcome) -> None:
        counts[o.status.value] = counts.get(o.status.value, 0) + 1
        keep(o)

    if isinstance(targets, scanning.ResolvingStream):
        targets.on_failed = keep_failed
    try:
        for o in failed:
            keep_failed(o)
        scanner = TfoScanner()
        scanner.init(opts, ctx)
        c = asyncio.run(run_scan(scanner, targets, keep, description=f"tfo round {round_no}",
                                 show_progress=show_progress))
        for k, v in c.items():
            counts[k] = counts.get(k, 0) + v
        counts["sent"] = counts.get("sent", 0) + getattr(getattr(scanner, "engine", None), "sent", 0)
    finally:
        store.close()
    return counts


def support_scan(ctx: ScanContext, opts: TfoOptions, targets: Iterable[ScanTarget], failed: Sequence[ScanOutcome],
                 *, kernel_sample: int = 0, show_progress: bool = True) -> dict[str, int]:
    """Round 0 of ``tfo_probe``; optionally the kernel-path cross-check on a sample."""
    sample: list[ScanOutcome] = []

    def pick(o: ScanOutcome) -> None:
        if len(sample) < kernel_sample and o.result is not None and o.result.supports_tfo:
            sample.append(o)

    from netsurvey.runctx import current_round

    # round 0, or round k of a campaign run (schedule start): then the run's rounds are the
    # connections of a load-balancing survey (views of Figs 3.2/3.3)
    rnd = current_round()
    counts = probe_round(ctx, opts, targets, failed, rnd, show_progress=show_progress, on_outcome=pick)
    counts["tfo"] = 0
    if sample:
        with ResultWriter(ctx.db, "tfo_kernel_check", KERNEL_COLUMNS, types="catalog") as w:
            for o in sample:
                k = kernel_check.check(o.target.address, o.target.port)  # type: ignore[arg-type]  # a probed target: an address
                w.write((ctx.run.id, o.target.hostname, ipaddress.ip_address(o.target.address), o.target.port,  # type: ignore[arg-type]  # (as above)
                         o.result.cookie, k.kernel_cookie, k.syn_data_acked, k.error))
        counts["kernel_checked"] = len(sample)
    with ctx.db.connect() as conn:
        counts["tfo"] = conn.execute("SELECT count(*) FROM tfo_probe WHERE run_id=%s AND round=%s AND cookie_len > 0",  # type: ignore[index]  # one row
                                     (ctx.run.id, rnd)).fetchone()[0]
    return counts


# -- load-balancing survey --------------------------------------------------------------
@dataclass(frozen=True)
class LbPlan:
    """A load-balancing survey: ``rounds`` connections per hostname, ``interval`` seconds
    apart (start to start), resolving through ``nameservers`` (None = system resolver)."""

    hostnames: tuple[Target, ...]
    port: int
    rounds: int
    interval: float
    nameservers: Optional[tuple[str, ...]] = None


def lb_targets(plan: LbPlan) -> scanning.ResolvedOnce:
    """The survey's hostnames, resolved for the dry-run plan as each round resolves them
    (:func:`resolve_targets`: the first A address, through the plan's nameservers)."""
    names = [ScanTarget(t.hostname, None, plan.port, t.rank) for t in plan.hostnames]
    ns = list(plan.nameservers) if plan.nameservers else None
    return scanning.ResolvedOnce(names, lambda: resolve_targets(plan.hostnames, plan.port, False, ns),
                                 plan_note=f"counted for one round: each of the {plan.rounds} rounds resolves "
                                           "the names again" if plan.rounds > 1 else None)


def rounds_done(ctx: ScanContext) -> int:
    with ctx.db.connect() as conn:
        row = conn.execute("SELECT (counts->>'rounds_done')::int FROM scan_run WHERE id=%s", (ctx.run.id,)).fetchone()
    return row[0] or 0  # type: ignore[index]  # the run's row


def lb_survey(ctx: ScanContext, opts: TfoOptions, plan: LbPlan, *, show_progress: bool = True,
              log: Callable[[str], None] = lambda m: None, stop_after: Optional[int] = None) -> dict[str, int]:
    """Run the remaining rounds of the survey (``rounds_done`` + 1 .. ``rounds``). Each
    finished round is recorded in scan_run.counts, so a restarted command continues after
    the last complete round (rows of an unfinished round are deleted first)."""
    from netsurvey import shard

    # A shard's rows are committed with its job_shard row or not at all: an attempt starts
    # from round 1, and the run's rows and rounds_done are the other shards' (reading them
    # made every shard after the first skip all its rounds; deleting them lost a committed
    # shard's rows). Only an unsharded run resumes from scan_run.counts.
    sharded = shard.current() is not None
    done = 0 if sharded else rounds_done(ctx)
    last = None
    if not sharded:
        with ctx.db.connect() as conn:
            conn.execute("DELETE FROM tfo_probe WHERE run_id=%s AND round > %s", (ctx.run.id, done))
            last = conn.execute("SELECT extract(epoch FROM max(probed_at)) FROM tfo_probe WHERE run_id=%s",  # type: ignore[index]  # one row
                                (ctx.run.id,)).fetchone()[0]
    counts: dict[str, int] = {}
    next_start = (float(last) + plan.interval) if last is not None else time.time()
    for rnd in range(done + 1, plan.rounds + 1):
        if stop_after is not None and rnd > stop_after:
            break
        wait = next_start - time.time()
        if wait > 0:
            log(f"round {rnd}: waiting {wait:.0f} s")
            time.sleep(wait)
        next_start = time.time() + plan.interval
        targets, failed = resolve_targets(plan.hostnames, plan.port, False,
                                          list(plan.nameservers) if plan.nameservers else None)
        c = probe_round(ctx, TfoOptions(opts.rate, opts.cooldown, opts.seed + rnd, opts.experimental),
                        targets, failed, rnd, show_progress=show_progress)
        for k, v in c.items():
            counts[k] = counts.get(k, 0) + v
        done = rnd
        if not sharded:
            with ctx.db.connect() as conn:
                conn.execute("UPDATE scan_run SET counts = counts || %s::jsonb WHERE id=%s",
                             (json.dumps({"rounds_done": rnd}), ctx.run.id))
        log(f"round {rnd}/{plan.rounds}: {c}")
    counts["rounds_done"] = done if sharded else rounds_done(ctx)
    return counts


# -- cross-address cookie reuse ------------------------------------------------------------
def reuse_targets(addresses: dict[str, list[str]], port: int) -> list[ScanTarget]:
    """Each hostname's distinct addresses (an address two hostnames share is two targets):
    what :func:`reuse_scan` judges by the policy, for the dry-run plan and the run's vantage."""
    return [ScanTarget(h, a, port) for h, addrs in addresses.items() for a in dict.fromkeys(addrs)]


def reuse_scan(ctx: ScanContext, opts: TfoOptions, addresses: dict[str, list[str]], port: int,
               max_addresses: int = 8) -> dict[str, int]:
    """For each hostname with >= 2 allowed addresses: get a cookie from each address, then
    send SYN+data with the cookie of A to every other address B (cross) and to A (control)."""
    hosts = {}
    blocked = 0  # addresses never contacted, counted with the run
    for h, addrs in addresses.items():
        uniq = list(dict.fromkeys(addrs))
        ok = [a for a in uniq if ctx.policy.allowed(a)][:max_addresses]
        blocked += sum(1 for a in uniq if not ctx.policy.allowed(a))
        if len(ok) >= 2:
            hosts[h] = ok
    eng_opts = EngineOptions(rate=opts.rate, cooldown=opts.cooldown, seed=opts.seed, experimental=opts.experimental,
                             data=REUSE_DATA)
    pairs = [(h, a) for h, addrs in hosts.items() for a in addrs]
    cookies: dict[tuple[str, str], bytes] = {}
    for i, reply, _err in RawEngine(eng_opts).probe([RawTarget(a, port) for _, a in pairs]):
        if reply is not None and reply.is_synack:
            c = parse_options(reply.options).cookie
            if c:
                cookies[pairs[i]] = c
    probes = []   # (hostname, cookie_from, address, control, cookie)
    for h, addrs in hosts.items():
        for a in addrs:
            c = cookies.get((h, a))
            if c is None:
                continue
            probes.append((h, a, a, True, c))
            probes += [(h, a, b, False, c) for b in addrs if b != a]
    counts = {"hostnames": len(hosts), "cookies": len(cookies), "probes": len(probes), "accepted": 0,
              "blocked": blocked}
    _present(ctx, opts, probes, port, counts, None)
    return counts


def represent_scan(ctx: ScanContext, opts: TfoOptions, held: Sequence[tuple[Optional[str], str, bytes]], port: int,
                   cookie_run_id: int) -> dict[str, int]:
    """Present cookies an earlier run received (``held``: hostname, address, cookie) to the
    address that issued them, with data in the SYN: is the cookie still accepted (e.g. after
    the server rotated its TFO key)? Rows go to tfo_reuse with control = true and
    cookie_run_id set. A SYN-ACK that acknowledges the data AND carries a new cookie means
    the cookie matched a key other than the primary (Linux: the backup key,
    tcp_try_fastopen() ret == 2): accepted, and the client told to replace it."""
    probes = []
    blocked = 0
    for h, a, c in held:
        if ctx.policy.allowed(a):
            probes.append((h, a, a, True, c))
        else:
            blocked += 1
    counts = {"cookies": len(held), "probes": len(probes), "accepted": 0, "blocked": blocked}
    _present(ctx, opts, probes, port, counts, cookie_run_id)
    return counts


def _present(ctx: ScanContext, opts: TfoOptions, probes: list, port: int, counts: dict,
             cookie_run_id: Optional[int]) -> None:
    """Send SYN+data with each probe's cookie; one tfo_reuse row per probe. ``counts`` gains
    'accepted' (data acknowledged) and 'accepted-new-cookie' (acknowledged, and a fresh
    cookie came back: a non-primary key matched)."""
    counts.setdefault("accepted-new-cookie", 0)
    eng2 = RawEngine(EngineOptions(rate=opts.rate, cooldown=opts.cooldown, seed=opts.seed ^ 0x5A5A5A5A5A5A5A5A,
                                   experimental=opts.experimental, data=REUSE_DATA))
    with ResultWriter(ctx.db, "tfo_reuse", REUSE_COLUMNS, types="catalog") as w:
        for i, reply, err in eng2.probe([RawTarget(p[2], port, p[4]) for p in probes]):
            h, frm, to, control, cookie = probes[i]
            if reply is None:
                reply_s, acked, new, status = "timeout", None, None, (ScanStatus.UNKNOWN_ERROR if err else ScanStatus.CONNECTION_TIMEOUT)
            elif reply.is_rst:
                reply_s, acked, new, status = "rst", None, None, ScanStatus.CONNECTION_REFUSED
            else:
                new = parse_options(reply.options).cookie or None
                reply_s, acked, status = "syn-ack", reply.acked_data == len(REUSE_DATA), ScanStatus.SUCCESS
            counts["accepted"] += bool(acked)
            counts["accepted-new-cookie"] += bool(acked and new)
            w.write((ctx.run.id, h, ipaddress.ip_address(frm), ipaddress.ip_address(to), control, cookie,
                     len(REUSE_DATA), reply_s, acked, new, status.value, cookie_run_id))
