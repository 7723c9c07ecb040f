-- 0009_jobs: sharded scans run as procrastinate tasks (netsurvey/jobs.py).
-- A run started with `netsurvey scan ... --shards N` is 'queued' until its first shard
-- starts; each shard commits its results and its job_shard row in ONE transaction, so a
-- shard retried after a crash adds nothing twice (exactly once per run and shard).

ALTER TABLE scan_run DROP CONSTRAINT IF EXISTS scan_run_status_check;
ALTER TABLE scan_run ADD CONSTRAINT scan_run_status_check
    CHECK (status IN ('queued', 'running', 'finished', 'failed', 'cancelled'));
ALTER TABLE scan_run ADD COLUMN shards integer;          -- NULL = ran inline
ALTER TABLE scan_run ADD COLUMN command jsonb;           -- argv of the sharded command

CREATE TABLE job_shard (
    run_id      bigint      NOT NULL REFERENCES scan_run(id) ON DELETE CASCADE,
    shard       integer     NOT NULL CHECK (shard >= 0),   -- 0 .. shards-1
    status      text        NOT NULL CHECK (status IN ('finished', 'failed')),
    counts      jsonb       NOT NULL DEFAULT '{}',        -- outcomes per status in this shard
    worker      text,                                     -- host:pid that committed it
    attempt     integer     NOT NULL DEFAULT 1,           -- procrastinate attempt number
    finished_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (run_id, shard)
);
COMMENT ON TABLE job_shard IS 'Committed shards of sharded runs; written atomically with the shard''s results.';

-- Progress per run: shards done and remaining (for `netsurvey runs`).
CREATE VIEW run_progress AS
SELECT r.id, r.kind, r.status, r.started_at, r.finished_at, r.shards,
       count(s.shard) FILTER (WHERE s.status = 'finished') AS shards_done,
       count(s.shard) FILTER (WHERE s.status = 'failed')   AS shards_failed,
       CASE WHEN r.shards IS NULL THEN NULL ELSE r.shards - count(s.shard) END AS shards_remaining,
       r.counts
FROM scan_run r LEFT JOIN job_shard s ON s.run_id = r.id
GROUP BY r.id;
COMMENT ON VIEW run_progress IS 'scan_run with shard progress; shards NULL = inline run.';
