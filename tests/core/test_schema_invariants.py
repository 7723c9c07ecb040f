"""Invariants of the schema, read from the migrated database's catalog (not from the SQL
text): every table keyed to scan_run deletes with its run (ON DELETE CASCADE: archiving and
dropping a run must not leave orphans or fail), and every result table carries shard_id
(which shard, round and vantage wrote the row)."""
from __future__ import annotations

#: tables keyed to scan_run that are not result rows (no shard writes them)
NOT_RESULTS = {"run_round", "job_shard"}


def _keyed(conn):
    return conn.execute("""
        SELECT c.conrelid::regclass::text, c.confdeltype
          FROM pg_constraint c
         WHERE c.contype = 'f' AND c.confrelid = 'scan_run'::regclass
           AND NOT EXISTS (SELECT 1 FROM pg_inherits i WHERE i.inhrelid = c.conrelid)""").fetchall()


def test_every_key_to_scan_run_cascades(db):
    with db.connect() as conn:
        keyed = _keyed(conn)
    assert len(keyed) >= 15
    assert [t for t, deltype in keyed if deltype != "c"] == []


def test_every_result_table_carries_shard_id(db):
    with db.connect() as conn:
        tables = {t for t, _ in _keyed(conn)} - NOT_RESULTS
        missing = [t for t in sorted(tables) if not conn.execute(
            "SELECT 1 FROM information_schema.columns WHERE table_name = %s AND column_name = 'shard_id'",
            (t.split(".")[-1],)).fetchone()]
    assert missing == []
