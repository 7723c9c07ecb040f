-- 0171_quic_second_opinion_shard: quic_second_opinion (0161) carries shard_id like every
-- result table (schema/0115_row_vantage.sql; tests/test_three_vantages.py
-- test_every_result_table_has_shard_id): ResultWriter stamps it in a shard.
ALTER TABLE quic_second_opinion ADD COLUMN IF NOT EXISTS shard_id bigint;
COMMENT ON COLUMN quic_second_opinion.shard_id IS 'job_shard.id of the shard that wrote the row (sharded runs; see schema/0115_row_vantage.sql); NULL otherwise.';
