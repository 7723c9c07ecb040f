-- 0170_run_partition_grants (session-31 adversary): two gaps of 0150's run partitions.
--
-- ensure_run_partitions() runs with its owner's rights (SECURITY DEFINER) and, like every
-- function, was executable by PUBLIC: the read-only role netsurvey_reader could call it and
-- create and attach tables in run_partitions (a write, as the owner). Only the roles that
-- insert scan_run rows (the owner, the writer: the trigger calls it as them) may run it.
REVOKE EXECUTE ON FUNCTION ensure_run_partitions(bigint) FROM PUBLIC;
DO $$
BEGIN
  IF EXISTS (SELECT FROM pg_roles WHERE rolname = 'netsurvey_writer') THEN
    GRANT EXECUTE ON FUNCTION ensure_run_partitions(bigint) TO netsurvey_writer;
  END IF;
END $$;

-- `netsurvey db archive-run --drop` deletes the run's scan_run row and relies on every
-- result table's foreign key cascading (each table with a run_id is in the export);
-- handshake_timing_sample's (0030) did not cascade, so archiving a handshake-timing run
-- failed with an internal error. Every foreign key to scan_run now cascades.
DO $$
DECLARE
    k record;
BEGIN
    FOR k IN SELECT conrelid::regclass AS tbl, conname, pg_get_constraintdef(oid) AS def FROM pg_constraint
             WHERE contype = 'f' AND confrelid = 'scan_run'::regclass AND confdeltype <> 'c'
               AND conparentid = 0 LOOP
        EXECUTE format('ALTER TABLE %s DROP CONSTRAINT %I, ADD CONSTRAINT %I %s ON DELETE CASCADE',
                       k.tbl, k.conname, k.conname, regexp_replace(k.def, ' ON DELETE [A-Z]+( [A-Z]+)?', ''));
    END LOOP;
END $$;

-- Its search_path (0150: FROM CURRENT) did not name pg_temp, so a session's temporary
-- tables came first: a writer's TEMP TABLE run_partitioned chose, with the owner's rights,
-- the tables it partitioned. pg_temp is searched last now (PostgreSQL's advice for
-- SECURITY DEFINER functions).
DO $$
BEGIN
  EXECUTE format('ALTER FUNCTION ensure_run_partitions(bigint) SET search_path = %I, pg_temp', current_schema());
END $$;
