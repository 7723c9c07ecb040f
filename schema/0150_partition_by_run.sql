-- 0150_partition_by_run (issue 26, item 6): the tables that grow with every campaign are
-- partitioned by run, with BRIN indexes on their time columns.
--
-- Why by run (LIST on run_id) and not by time: every view and figure selects runs
-- (`WHERE run_id = ANY(...)`, `GROUP BY run_id, ...`), so run partitions prune exactly what
-- they read; a campaign of rounds is one run (0070), so a month of 30 daily campaigns is 30
-- partitions per table; retention and export are per run (`netsurvey export --run`,
-- `netsurvey db archive-run`, docs/retention.md) and dropping a partition frees its space at
-- once, where deleting a run's rows left dead tuples for VACUUM. Time stays indexed inside
-- each partition by BRIN: the writer appends in time order (COPY per batch), so a BRIN
-- index on the time column is a few pages per million rows and answers "rows of these
-- hours" across runs without a B-tree the size of the data.
--
-- How partitions appear: one per (partitioned table, run), created by the trigger on
-- scan_run (AFTER INSERT) through ensure_run_partitions(), in the schema run_partitions, so
-- the writer (netsurvey/writer.py, binary COPY into the parent) needs nothing new and the
-- catalog of the current schema (export, docs/schema.md, `netsurvey sql`) lists only the
-- parents. Each partition is created standalone and then ATTACHed (SHARE UPDATE EXCLUSIVE
-- on the parent): starting a run does not wait for writers or readers of other runs.
--
-- The conversion keeps everything seen from outside: columns, defaults, checks, comments,
-- primary keys (they all contain run_id), the foreign key to scan_run (ON DELETE CASCADE),
-- indexes, grants; the views that read these tables are dropped and re-created from their
-- own definitions (pg_get_viewdef) with their comments, options and grants.

CREATE SCHEMA IF NOT EXISTS run_partitions;
COMMENT ON SCHEMA run_partitions IS 'One partition per (partitioned result table, run): <table>_r<run_id>. Created by ensure_run_partitions() when a scan_run row is inserted; query the parents in the main schema.';

CREATE TABLE run_partitioned (
    table_name  text PRIMARY KEY,
    time_column text NOT NULL
);
COMMENT ON TABLE run_partitioned IS 'Result tables partitioned by run (LIST on run_id, schema/0150_partition_by_run.sql): each scan_run row gets one partition of each, run_partitions.<table_name>_r<run_id>; time_column carries a BRIN index.';
COMMENT ON COLUMN run_partitioned.table_name IS 'Partitioned parent table (in the main schema).';
COMMENT ON COLUMN run_partitioned.time_column IS 'Its timestamptz column indexed with BRIN (rows arrive in time order).';

INSERT INTO run_partitioned VALUES
    ('tfo_probe', 'probed_at'),
    ('tls_handshake', 'observed_at'),
    ('tls_resumption', 'attempted_at'),
    ('tls_lifetime_event', 'at'),
    ('quic_connection', 'started_at'),
    ('dns_ttl_probe', 'observed_at'),
    ('dns_ecs_probe', 'observed_at');

-- The partitions of one run, created if missing (standalone table with the run's check,
-- then ATTACH: the parent's indexes, foreign key and shard_id come along). Returns how
-- many were created. SECURITY DEFINER: the writer role inserts scan_run rows but does not
-- own the parents.
CREATE FUNCTION ensure_run_partitions(p_run_id bigint) RETURNS integer
LANGUAGE plpgsql SECURITY DEFINER SET search_path FROM CURRENT AS $$
DECLARE
    t record;
    part text;
    made integer := 0;
BEGIN
    FOR t IN SELECT table_name FROM run_partitioned ORDER BY table_name LOOP
        part := format('%s_r%s', t.table_name, p_run_id);
        CONTINUE WHEN to_regclass(format('run_partitions.%I', part)) IS NOT NULL;
        EXECUTE format('CREATE TABLE run_partitions.%I (LIKE %I INCLUDING DEFAULTS INCLUDING CONSTRAINTS '
                       'INCLUDING GENERATED INCLUDING STORAGE)', part, t.table_name);
        EXECUTE format('ALTER TABLE run_partitions.%I ADD CONSTRAINT %I CHECK (run_id IS NOT NULL AND run_id = %s)',
                       part, part || '_run', p_run_id);
        EXECUTE format('ALTER TABLE %I ATTACH PARTITION run_partitions.%I FOR VALUES IN (%s)',
                       t.table_name, part, p_run_id);
        EXECUTE format('ALTER TABLE run_partitions.%I DROP CONSTRAINT %I', part, part || '_run');
        made := made + 1;
    END LOOP;
    RETURN made;
END $$;
COMMENT ON FUNCTION ensure_run_partitions(bigint) IS 'Creates the missing partitions of a run (one per table of run_partitioned) in schema run_partitions; called by the trigger on scan_run; returns how many it created.';

CREATE FUNCTION scan_run_partitions() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM ensure_run_partitions(NEW.id);
    RETURN NULL;
END $$;
COMMENT ON FUNCTION scan_run_partitions() IS 'Trigger of scan_run: every new run gets its partitions (ensure_run_partitions).';

-- Conversion in place.
CREATE TEMP TABLE _dep_view ON COMMIT DROP AS
WITH RECURSIVE dep(oid, depth) AS (
    SELECT DISTINCT r.ev_class, 1
    FROM pg_depend d JOIN pg_rewrite r ON r.oid = d.objid
    WHERE d.classid = 'pg_rewrite'::regclass
      AND d.refobjid IN (SELECT to_regclass(table_name) FROM run_partitioned)
      AND r.ev_class NOT IN (SELECT to_regclass(table_name) FROM run_partitioned)
    UNION
    SELECT DISTINCT r.ev_class, dep.depth + 1
    FROM dep JOIN pg_depend d ON d.refobjid = dep.oid AND d.classid = 'pg_rewrite'::regclass
    JOIN pg_rewrite r ON r.oid = d.objid
    WHERE r.ev_class <> dep.oid
)
SELECT c.oid, c.relname, c.relkind, max(dep.depth) AS depth, pg_get_viewdef(c.oid) AS def,
       obj_description(c.oid, 'pg_class') AS comment, c.reloptions, c.relacl,
       (SELECT array_agg(ARRAY[a.attname::text, col_description(c.oid, a.attnum)])
        FROM pg_attribute a WHERE a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
          AND col_description(c.oid, a.attnum) IS NOT NULL) AS col_comments
FROM dep JOIN pg_class c ON c.oid = dep.oid
GROUP BY c.oid;

DO $$
DECLARE
    v record;
    t record;
    i record;
    k record;
    g record;
    cc text[];
    n text;
BEGIN
    IF EXISTS (SELECT 1 FROM _dep_view WHERE relkind <> 'v') THEN
        RAISE EXCEPTION 'a materialized view reads a table to partition; extend 0150';
    END IF;
    FOR v IN SELECT * FROM _dep_view ORDER BY depth DESC LOOP
        EXECUTE format('DROP VIEW %I', v.relname);
    END LOOP;

    FOR t IN SELECT table_name, time_column, to_regclass(table_name) AS old FROM run_partitioned LOOP
        EXECUTE format('ALTER TABLE %I RENAME TO %I', t.table_name, t.table_name || '__unpartitioned');
        -- (names collected first: renaming while scanning the catalog would meet them again)
        FOREACH n IN ARRAY ARRAY(SELECT x.indexrelid::regclass::text FROM pg_index x WHERE x.indrelid = t.old) LOOP
            EXECUTE format('ALTER INDEX %s RENAME TO %I', n, n || '__old');
        END LOOP;
        EXECUTE format('CREATE TABLE %I (LIKE %I INCLUDING DEFAULTS INCLUDING CONSTRAINTS INCLUDING GENERATED '
                       'INCLUDING STORAGE INCLUDING COMMENTS INCLUDING STATISTICS) PARTITION BY LIST (run_id)',
                       t.table_name, t.table_name || '__unpartitioned');
        EXECUTE format('COMMENT ON TABLE %I IS %L', t.table_name,
                       obj_description(t.old, 'pg_class') || ' Partitioned by run (run_partitions.' || t.table_name
                       || '_r<run_id>, schema/0150_partition_by_run.sql).');
        -- primary key and foreign keys, under their old names
        FOR k IN SELECT conname, pg_get_constraintdef(oid) AS def FROM pg_constraint
                 WHERE conrelid = t.old AND contype IN ('p', 'u', 'f') ORDER BY contype DESC LOOP
            EXECUTE format('ALTER TABLE %I ADD CONSTRAINT %I %s', t.table_name, regexp_replace(k.conname, '__old$', ''),
                           k.def);
        END LOOP;
        -- other indexes, under their old names
        FOR i IN SELECT ic.relname, x.indisunique, pg_get_indexdef(x.indexrelid) AS def
                 FROM pg_index x JOIN pg_class ic ON ic.oid = x.indexrelid
                 WHERE x.indrelid = t.old
                   AND NOT EXISTS (SELECT 1 FROM pg_constraint c WHERE c.conindid = x.indexrelid) LOOP
            EXECUTE format('CREATE %s INDEX %I ON %I %s', CASE WHEN i.indisunique THEN 'UNIQUE' ELSE '' END,
                           left(i.relname, length(i.relname) - 5), t.table_name,
                           substring(i.def FROM ' USING .*$'));
        END LOOP;
        EXECUTE format('CREATE INDEX %I ON %I USING brin (%I)', t.table_name || '_time_brin', t.table_name,
                       t.time_column);
        FOR g IN SELECT a.grantee, a.privilege_type FROM pg_class c, aclexplode(c.relacl) a
                 WHERE c.oid = t.old AND a.grantee <> c.relowner LOOP
            EXECUTE format('GRANT %s ON %I TO %s', g.privilege_type, t.table_name,
                           CASE WHEN g.grantee = 0 THEN 'PUBLIC' ELSE quote_ident(g.grantee::regrole::text) END);
        END LOOP;
    END LOOP;

    PERFORM ensure_run_partitions(id) FROM scan_run;
    FOR t IN SELECT table_name FROM run_partitioned LOOP
        EXECUTE format('INSERT INTO %I SELECT * FROM %I', t.table_name, t.table_name || '__unpartitioned');
        EXECUTE format('DROP TABLE %I', t.table_name || '__unpartitioned');
    END LOOP;

    FOR v IN SELECT * FROM _dep_view ORDER BY depth LOOP
        EXECUTE format('CREATE VIEW %I %s AS %s', v.relname,
                       CASE WHEN v.reloptions IS NULL THEN ''
                            ELSE 'WITH (' || array_to_string(v.reloptions, ', ') || ')' END, v.def);
        IF v.comment IS NOT NULL THEN
            EXECUTE format('COMMENT ON VIEW %I IS %L', v.relname, v.comment);
        END IF;
        IF v.col_comments IS NOT NULL THEN
            FOREACH cc SLICE 1 IN ARRAY v.col_comments LOOP
                EXECUTE format('COMMENT ON COLUMN %I.%I IS %L', v.relname, cc[1], cc[2]);
            END LOOP;
        END IF;
        FOR g IN SELECT a.grantee, a.privilege_type FROM aclexplode(v.relacl) a
                 WHERE a.grantee <> (SELECT relowner FROM pg_class WHERE oid = to_regclass(v.relname)) LOOP
            EXECUTE format('GRANT %s ON %I TO %s', g.privilege_type, v.relname,
                           CASE WHEN g.grantee = 0 THEN 'PUBLIC' ELSE quote_ident(g.grantee::regrole::text) END);
        END LOOP;
    END LOOP;
END $$;

CREATE TRIGGER scan_run_partitions AFTER INSERT ON scan_run
    FOR EACH ROW EXECUTE FUNCTION scan_run_partitions();
