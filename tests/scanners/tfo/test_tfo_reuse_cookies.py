"""`scan tfo-reuse --cookies-from RUN` split across shards (scanners/tfo/represent.py
held_cookies): shard k of N presents only the cookies held for its own addresses."""
from __future__ import annotations

import pytest

pytestmark = pytest.mark.timeout(120)

def test_tfo_reuse_cookies_from_is_split_across_shards(db):
    """`scan tfo-reuse --cookies-from RUN` in shard k of N presents only the cookies of the
    addresses of shard k (and says it did: mark_filtered); every shard presented every
    cookie (the SYN+data to each address went out N times)."""
    from netsurvey import shard
    from netsurvey.runctx import RunContext, ShardSpec, activate
    from scanners.tfo.represent import held_cookies

    addrs = [f"198.18.203.{i}" for i in range(1, 9)]
    with db.connect() as conn:
        rid = conn.execute("INSERT INTO scan_run (kind, status) VALUES ('tfo', 'finished') RETURNING id").fetchone()[0]
        for a in addrs:
            conn.execute("INSERT INTO tfo_probe (run_id, hostname, address, port, status, cookie_len, cookie) "
                         "VALUES (%s, %s, %s, 443, 'success', 8, %s)", (rid, f"h{a}.test", a, b"\x01" * 8))
        conn.commit()
    assert sorted(a for _, a, _ in held_cookies(db, rid)) == sorted(addrs)   # not a shard: all of them
    seen = []
    for k in range(2):
        spec = ShardSpec(index=k, count=2, run_id=rid)
        with activate(RunContext("tfo-reuse", shard=spec)):
            shard._filtered = False
            try:
                got = [a for _, a, _ in held_cookies(db, rid)]
                filtered = shard._filtered
            finally:
                shard._filtered = False
            assert filtered, k
        assert all(shard.shard_of(a, 2) == k for a in got), (k, got)
        seen += got
    assert sorted(seen) == sorted(addrs)
