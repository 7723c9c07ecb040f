-- 0152_partitionwise_aggregate (issue 26, item 6): aggregate run partitions one by one.
--
-- The views group by run_id first (tfo_lb_host: GROUP BY run_id, hostname), which is the
-- partition key since 0150: with enable_partitionwise_aggregate each run's partition is
-- aggregated on its own (a run's hash table instead of the month's, less spilled to temp
-- files). Off by default in PostgreSQL because planning costs more with many partitions; a
-- month is ~30. Measured on bench/month.py's 10M-row month (30 runs), Fig 3.2's query:
-- 32.3 s off, 15.4 s on (EXPLAIN ANALYZE, same load). Set for this database (every new
-- session: netsurvey, psql, pandas); a role that does not own the database cannot, and is
-- told so (the views are right either way, only slower).
DO $$
BEGIN
    EXECUTE format('ALTER DATABASE %I SET enable_partitionwise_aggregate = on', current_database());
EXCEPTION WHEN insufficient_privilege THEN
    RAISE NOTICE 'not the owner of database %: enable_partitionwise_aggregate stays off (slower figures over many runs)',
                 current_database();
END $$;
