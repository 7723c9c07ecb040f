#!/bin/bash
# Run once by the postgres image on an empty volume (/docker-entrypoint-initdb.d).
# Creates netsurvey's three roles (README, "Security") and its database:
#   netsurvey_owner   owns the database and schema, runs `netsurvey db migrate`, report
#   netsurvey_writer  reads and writes rows (workers, scheduler)
#   netsurvey_reader  reads only (`netsurvey sql`), statement_timeout 5 min
# None is a superuser; none may read or write server files, run programs or signal
# other sessions. Passwords come from the environment (scram-sha-256), never the repo.
set -euo pipefail
psql -v ON_ERROR_STOP=1 --username "$POSTGRES_USER" --dbname postgres \
     -v owner_pw="$NETSURVEY_OWNER_PASSWORD" -v writer_pw="$NETSURVEY_WRITER_PASSWORD" \
     -v reader_pw="$NETSURVEY_READER_PASSWORD" <<'SQL'
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
SQL
