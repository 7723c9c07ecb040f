"""``scan tfo-reuse --cookies-from RUN``: present the cookies an earlier ``scan tfo`` run
received, each to the address that issued it (issue 24: the kernel's TFO key pair - after a
key rotation, a cookie made under the old key is still accepted while that key is the
backup, and the SYN-ACK then carries a new cookie)."""
from __future__ import annotations

from typing import Optional

from netsurvey.clictx import open_scan
from netsurvey.errors import UsageError


def held_cookies(db, run_id: int) -> list[tuple[Optional[str], str, bytes]]:
    """(hostname, address, cookie) of every address that gave run ``run_id`` a cookie (the
    latest round's where a tfo-lb run has several)."""
    with db.connect() as conn:
        kind = conn.execute("SELECT kind FROM scan_run WHERE id = %s", (run_id,)).fetchone()
        if kind is None:
            raise UsageError(f"--cookies-from: no run {run_id}")
        if kind[0] not in ("tfo", "tfo-lb"):
            raise UsageError(f"--cookies-from: run {run_id} is a {kind[0]} run, not tfo or tfo-lb")
        rows = conn.execute(
            "SELECT DISTINCT ON (address) hostname, host(address), cookie FROM tfo_probe "
            "WHERE run_id = %s AND cookie_len > 0 AND address IS NOT NULL ORDER BY address, round DESC",
            (run_id,)).fetchall()
    if not rows:
        raise UsageError(f"--cookies-from: run {run_id} received no cookies")
    from netsurvey import shard

    spec = shard.current()
    if spec is not None:   # a shard presents the cookies of its own addresses only
        shard.mark_filtered()
        rows = [r for r in rows if shard.shard_of(r[1], spec.count) == spec.index]
    return [(h, a, bytes(c)) for h, a, c in rows]


def represent_cli(db, run_id: int, port: int, rate: float, cooldown: float, seed: Optional[int]) -> dict:
    """Run ``--cookies-from RUN``; returns the summary (the run path prints it)."""
    from .scanner import TfoOptions
    from .survey import new_seed, represent_scan

    held = held_cookies(db, run_id)
    seed = new_seed() if seed is None else seed & (2**64 - 1)
    ctx = open_scan(dict(cookies_from=run_id, port=port, rate=rate, cooldown=cooldown, seed=seed),
                    targets=sorted({a for _, a, _ in held}), rate_pps=rate or None)
    counts = represent_scan(ctx, TfoOptions(ctx.limiter.rate, cooldown, seed), held, port, run_id)
    ctx.counts.update(counts)
    return {"run_id": ctx.run.id, "counts": counts}
