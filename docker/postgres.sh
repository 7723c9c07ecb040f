#!/bin/sh
# The database image's entry point: PostgreSQL 16.2, the same build the tests use (the
# pgserver wheel's binaries, copied to /opt/pg), run as user postgres. First start: initdb
# with the superuser `postgres` (password: secret db_admin_password), then
# docker/postgres-init.sh creates the roles netsurvey_owner / _writer / _reader (secrets
# db_owner_password, db_writer_password, db_reader_password) and database netsurvey.
# Listens on 127.0.0.1:$NETSURVEY_DB_PORT only (host networking; nothing is published
# beyond the machine) and on a unix socket in /run/postgresql (a volume that containers
# in other network namespaces can share); both need a password (scram-sha-256).
# Data: /var/lib/postgresql/data (a volume).
set -eu
PG=/opt/pg/pgserver/pginstall/bin
PGDATA=/var/lib/postgresql/data
PORT=${NETSURVEY_DB_PORT:-55432}
LISTEN=${NETSURVEY_DB_LISTEN:-127.0.0.1}
S=/run/secrets
mkdir -p "$PGDATA" /run/postgresql
chown -R postgres:postgres "$PGDATA" /run/postgresql
chmod 700 "$PGDATA"
as_pg() { runuser -u postgres -- "$@"; }
if [ ! -s "$PGDATA/PG_VERSION" ]; then
  for f in db_admin_password db_owner_password db_writer_password db_reader_password; do
    [ -s "$S/$f" ] || { echo "postgres: secret $f missing or empty" >&2; exit 2; }
  done
  # the secrets are root's; postgres reads copies only while initialising
  tmp=$(mktemp -d) && chmod 700 "$tmp"
  for f in db_admin_password db_owner_password db_writer_password db_reader_password; do
    cp "$S/$f" "$tmp/$f"
  done
  chown -R postgres "$tmp"
  as_pg "$PG/initdb" -D "$PGDATA" -U postgres --pwfile="$tmp/db_admin_password" \
    --auth-local=scram-sha-256 --auth-host=scram-sha-256 -E UTF8 --locale=C.UTF-8 >/dev/null
  as_pg "$PG/pg_ctl" -D "$PGDATA" -o "-c listen_addresses='' -k /run/postgresql" -w start >/dev/null
  runuser -u postgres -- env PSQL="$PG/psql" PGHOST=/run/postgresql PGUSER=postgres \
    PGPASSWORD="$(cat "$tmp/db_admin_password")" \
    NETSURVEY_OWNER_PASSWORD_FILE="$tmp/db_owner_password" \
    NETSURVEY_WRITER_PASSWORD_FILE="$tmp/db_writer_password" \
    NETSURVEY_READER_PASSWORD_FILE="$tmp/db_reader_password" \
    bash /usr/local/lib/netsurvey/postgres-init.sh
  rm -rf "$tmp"
  as_pg "$PG/pg_ctl" -D "$PGDATA" -m fast -w stop >/dev/null
  echo "postgres: initialised $PGDATA (roles netsurvey_owner, netsurvey_writer, netsurvey_reader)"
fi
exec runuser -u postgres -- "$PG/postgres" -D "$PGDATA" -c "listen_addresses=$LISTEN" -c "port=$PORT" \
  -c unix_socket_directories=/run/postgresql
