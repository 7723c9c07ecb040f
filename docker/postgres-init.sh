#!/bin/bash
# Creates netsurvey's three roles (README, "Security") and its database; run once on an
# empty data directory by the database image (docker/postgres.sh), connected as the
# superuser through the server's unix socket:
#   netsurvey_owner   owns the database and schema, runs `netsurvey db migrate`, report
#   netsurvey_writer  reads and writes rows (workers, scheduler)
#   netsurvey_reader  reads only (`netsurvey sql`), statement_timeout 5 min
# None is a superuser; none may read or write server files, run programs or signal
# other sessions. Passwords are read from the files named by NETSURVEY_OWNER_PASSWORD_FILE,
# NETSURVEY_WRITER_PASSWORD_FILE, NETSURVEY_READER_PASSWORD_FILE (Compose secrets), never
# from the repo or the environment; they reach psql as variables on its stdin, not argv.
# Env: PSQL (psql binary), PGHOST/PGUSER/PGPASSWORD of the superuser connection.
set -euo pipefail
PSQL=${PSQL:-psql}
pw() { tr -d '\n' < "$1" | sed -e 's/\\/\\\\/g' -e "s/'/\\\\'/g"; }  # psql quoting
for f in "$NETSURVEY_OWNER_PASSWORD_FILE" "$NETSURVEY_WRITER_PASSWORD_FILE" "$NETSURVEY_READER_PASSWORD_FILE"; do
  [ -s "$f" ] || { echo "postgres-init: secret $f missing or empty" >&2; exit 2; }
done
{
  printf '\\set owner_pw %s\n' "'$(pw "$NETSURVEY_OWNER_PASSWORD_FILE")'"
  printf '\\set writer_pw %s\n' "'$(pw "$NETSURVEY_WRITER_PASSWORD_FILE")'"
  printf '\\set reader_pw %s\n' "'$(pw "$NETSURVEY_READER_PASSWORD_FILE")'"
  cat <<'SQL'
SET password_encryption = 'scram-sha-256';
CREATE ROLE netsurvey_owner LOGIN NOSUPERUSER NOCREATEROLE NOCREATEDB PASSWORD :'owner_pw';
CREATE ROLE netsurvey_writer LOGIN NOSUPERUSER NOCREATEROLE NOCREATEDB PASSWORD :'writer_pw';
CREATE ROLE netsurvey_reader LOGIN NOSUPERUSER NOCREATEROLE NOCREATEDB PASSWORD :'reader_pw';
ALTER ROLE netsurvey_reader SET default_transaction_read_only = on;
ALTER ROLE netsurvey_reader SET statement_timeout = '5min';
CREATE DATABASE netsurvey OWNER netsurvey_owner;
REVOKE CONNECT, TEMPORARY ON DATABASE netsurvey FROM PUBLIC;
GRANT CONNECT, TEMPORARY ON DATABASE netsurvey TO netsurvey_owner, netsurvey_writer;
GRANT CONNECT ON DATABASE netsurvey TO netsurvey_reader;
\connect netsurvey
REVOKE EXECUTE ON FUNCTION pg_terminate_backend(integer, bigint), pg_cancel_backend(integer),
  pg_reload_conf(), pg_rotate_logfile() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION pg_terminate_backend(integer, bigint), pg_cancel_backend(integer)
  TO netsurvey_owner, netsurvey_writer;
-- advisory locks: owner and writer only (the read-only role could hold one and stall migrations)
DO $$
DECLARE f text;
BEGIN
  FOR f IN SELECT p.oid::regprocedure::text FROM pg_proc p
           WHERE p.proname ~ '^pg_(try_)?advisory(_xact)?_lock(_shared)?$' LOOP
    EXECUTE format('REVOKE EXECUTE ON FUNCTION %s FROM PUBLIC', f);
    EXECUTE format('GRANT EXECUTE ON FUNCTION %s TO netsurvey_owner, netsurvey_writer', f);
  END LOOP;
END $$;
SQL
} | "$PSQL" -v ON_ERROR_STOP=1 -q -d postgres
