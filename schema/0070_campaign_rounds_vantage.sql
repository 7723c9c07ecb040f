-- 0070_campaign_rounds_vantage (issue 26, items 4 and 5): a "rounds x interval" campaign
-- of config/schedule.toml is ONE scan_run with rounds (netsurvey/campaign.py), and every
-- run and committed shard records its vantage (name and the source addresses the kernel
-- picked, netsurvey/vantage.py).
--
-- Exactly once per (run, round, shard): a shard of round k commits its rows with its
-- job_shard row in one transaction, and job_shard's key now includes the round. Runs
-- without rounds keep round 0 and behave as before.

ALTER TABLE scan_run ADD COLUMN rounds integer CHECK (rounds IS NULL OR rounds >= 1);
ALTER TABLE scan_run ADD COLUMN round_interval_s double precision
    CHECK (round_interval_s IS NULL OR round_interval_s >= 0);
COMMENT ON COLUMN scan_run.rounds IS 'Rounds planned for a campaign run (schedule start of a rounds x interval entry); NULL = a run without rounds. The run finishes when shards x rounds job_shard rows are in.';
COMMENT ON COLUMN scan_run.round_interval_s IS 'Seconds between the due times of consecutive rounds of a campaign run; NULL = a run without rounds.';
COMMENT ON COLUMN scan_run.vantage IS 'Where it ran: name (config vantage_name / --vantage / NETSURVEY_VANTAGE, default the hostname), sources (source addresses the kernel picked towards the targets, from getsockname: {"ipv4": [...], "ipv6": [...]}), host, platform, network namespace (netns, nstb-vantage = the testbed), argv. For a sharded run: the first shard''s; every shard''s own is in job_shard.vantage.';

ALTER TABLE job_shard ADD COLUMN round integer NOT NULL DEFAULT 0 CHECK (round >= 0);
ALTER TABLE job_shard ADD COLUMN vantage jsonb;
ALTER TABLE job_shard DROP CONSTRAINT job_shard_pkey;
ALTER TABLE job_shard ADD PRIMARY KEY (run_id, round, shard);
COMMENT ON COLUMN job_shard.round IS 'Round of a campaign run (1..scan_run.rounds); 0 for a run without rounds. (run_id, round, shard) is committed exactly once.';
COMMENT ON COLUMN job_shard.vantage IS 'Vantage of the process that committed the shard: {"name": ..., "sources": {"ipv4": [...], "ipv6": [...]}} (see scan_run.vantage); NULL for shards committed without scanning (refused input).';

CREATE TABLE run_round (
    run_id  bigint      NOT NULL REFERENCES scan_run(id) ON DELETE CASCADE,
    round   integer     NOT NULL CHECK (round >= 1),
    due_at  timestamptz NOT NULL,
    PRIMARY KEY (run_id, round)
);
COMMENT ON TABLE run_round IS 'The rounds of a campaign run and when each is due (written with the run when the campaign is queued; a round is done when all its shards are in job_shard).';
COMMENT ON COLUMN run_round.run_id IS 'scan_run.id of the campaign run.';
COMMENT ON COLUMN run_round.round IS 'Round number, 1 .. scan_run.rounds.';
COMMENT ON COLUMN run_round.due_at IS 'When the round''s shards become due (UTC): the campaign''s start + (round - 1) x round_interval_s.';

-- Round progress per campaign run: rounds whose every shard is committed.
CREATE VIEW run_round_progress AS
SELECT rr.run_id, rr.round, rr.due_at,
       count(s.shard)                                   AS shards_committed,
       count(s.shard) FILTER (WHERE s.status = 'failed') AS shards_failed,
       count(s.shard) = max(r.shards)                   AS done,
       max(s.finished_at)                               AS finished_at
FROM run_round rr JOIN scan_run r ON r.id = rr.run_id
LEFT JOIN job_shard s ON s.run_id = rr.run_id AND s.round = rr.round
GROUP BY rr.run_id, rr.round, rr.due_at;
COMMENT ON VIEW run_round_progress IS 'Per campaign run and round: due time, shards committed (and failed), whether the round is done and when its last shard committed.';
COMMENT ON COLUMN run_round_progress.run_id IS 'scan_run.id of the campaign run.';
COMMENT ON COLUMN run_round_progress.round IS 'Round number, 1 .. scan_run.rounds.';
COMMENT ON COLUMN run_round_progress.due_at IS 'When the round became (or becomes) due (UTC).';
COMMENT ON COLUMN run_round_progress.shards_committed IS 'Shards of this round committed (finished or failed).';
COMMENT ON COLUMN run_round_progress.shards_failed IS 'Shards of this round committed as failed.';
COMMENT ON COLUMN run_round_progress.done IS 'True when every shard of the round is committed.';
COMMENT ON COLUMN run_round_progress.finished_at IS 'When the round''s last committed shard committed (UTC); NULL before any.';

-- `netsurvey runs`: shards remaining now count every round; rounds, next due and vantage added.
CREATE OR REPLACE VIEW run_progress AS
SELECT r.id, r.kind, r.status, r.started_at, r.finished_at, r.shards,
       count(s.shard) FILTER (WHERE s.status = 'finished') AS shards_done,
       count(s.shard) FILTER (WHERE s.status = 'failed')   AS shards_failed,
       CASE WHEN r.shards IS NULL THEN NULL ELSE r.shards * coalesce(r.rounds, 1) - count(s.shard) END
                                                           AS shards_remaining,
       r.counts,
       r.rounds,
       (SELECT count(*) FROM run_round_progress p WHERE p.run_id = r.id AND p.done)::integer AS rounds_done,
       (SELECT min(p.due_at) FROM run_round_progress p WHERE p.run_id = r.id AND NOT p.done
          AND r.status IN ('queued', 'running'))           AS next_due_at,
       (SELECT array_agg(DISTINCT n ORDER BY n) FROM (
            SELECT r.vantage->>'name' AS n
            UNION SELECT j.vantage->>'name' FROM job_shard j WHERE j.run_id = r.id) v
        WHERE n IS NOT NULL)                              AS vantages,
       (SELECT array_agg(DISTINCT a ORDER BY a) FROM (
            SELECT jsonb_array_elements_text(coalesce(r.vantage->'sources'->'ipv4', '[]') ||
                                             coalesce(r.vantage->'sources'->'ipv6', '[]')) AS a
            UNION SELECT jsonb_array_elements_text(coalesce(j.vantage->'sources'->'ipv4', '[]') ||
                                                   coalesce(j.vantage->'sources'->'ipv6', '[]'))
            FROM job_shard j WHERE j.run_id = r.id) x)      AS sources
FROM scan_run r LEFT JOIN job_shard s ON s.run_id = r.id
GROUP BY r.id;
COMMENT ON COLUMN run_progress.shards_remaining IS 'Shards not committed yet, over every round of a campaign run (NULL for inline runs).';
COMMENT ON COLUMN run_progress.rounds IS 'Rounds planned (campaign runs); NULL otherwise.';
COMMENT ON COLUMN run_progress.rounds_done IS 'Rounds whose every shard is committed (0 for runs without rounds).';
COMMENT ON COLUMN run_progress.next_due_at IS 'Due time of the first round not done yet, while the run is queued or running (UTC); NULL otherwise.';
COMMENT ON COLUMN run_progress.vantages IS 'Vantage names the run and its shards recorded (scan_run.vantage, job_shard.vantage).';
COMMENT ON COLUMN run_progress.sources IS 'Source addresses (IPv4 and IPv6) the run and its shards used, from getsockname.';
