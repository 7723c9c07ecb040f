-- 0011_roles: privileges of netsurvey's roles on this database's objects (README,
-- "Security"). The roles themselves are cluster-wide: the embedded server creates them
-- (netsurvey/embedded.py), docker-compose's postgres init creates them
-- (docker/postgres-init.sh); on another server create them first or this does nothing.
--   netsurvey_owner   owns the schema, runs the migrations (this file runs as it)
--   netsurvey_writer  reads and writes rows (scanners, workers)
--   netsurvey_reader  reads rows only (`netsurvey sql`)
-- Default privileges make the same grants on every table, view, sequence and function
-- the running role creates later (later migrations, procrastinate's schema).
DO $$
BEGIN
  IF EXISTS (SELECT FROM pg_roles WHERE rolname = 'netsurvey_reader') THEN
    GRANT USAGE ON SCHEMA public TO netsurvey_reader;
    GRANT SELECT ON ALL TABLES IN SCHEMA public TO netsurvey_reader;
    ALTER DEFAULT PRIVILEGES IN SCHEMA public GRANT SELECT ON TABLES TO netsurvey_reader;
  END IF;
  IF EXISTS (SELECT FROM pg_roles WHERE rolname = 'netsurvey_writer') THEN
    GRANT USAGE ON SCHEMA public TO netsurvey_writer;
    GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA public TO netsurvey_writer;
    GRANT USAGE, SELECT, UPDATE ON ALL SEQUENCES IN SCHEMA public TO netsurvey_writer;
    ALTER DEFAULT PRIVILEGES IN SCHEMA public GRANT SELECT, INSERT, UPDATE, DELETE ON TABLES TO netsurvey_writer;
    ALTER DEFAULT PRIVILEGES IN SCHEMA public GRANT USAGE, SELECT, UPDATE ON SEQUENCES TO netsurvey_writer;
  END IF;
END $$;
