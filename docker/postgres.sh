#!/bin/sh
# The database image's entry point: PostgreSQL 16.2, the same build the tests use (the
# pgserver wheel's binaries, copied to /opt/pg), run as user postgres. First start: initdb
# with the superuser netsurvey and the password of the db_password secret, then database
# netsurvey. Listens on 127.0.0.1:$NETSURVEY_DB_PORT only (host networking; nothing is
# published beyond the machine) and on a unix socket in /run/postgresql (a volume that
# containers in other network namespaces can share); both need the password.
# Data: /var/lib/postgresql/data (a volume).
set -eu
PG=/opt/pg/pgserver/pginstall/bin
PGDATA=/var/lib/postgresql/data
PORT=${NETSURVEY_DB_PORT:-55432}
LISTEN=${NETSURVEY_DB_LISTEN:-127.0.0.1}
mkdir -p "$PGDATA" /run/postgresql
chown -R postgres:postgres "$PGDATA" /run/postgresql
chmod 700 "$PGDATA"
as_pg() { runuser -u postgres -- "$@"; }
if [ ! -s "$PGDATA/PG_VERSION" ]; then
  [ -s /run/secrets/db_password ] || { echo "postgres: secret db_password missing or empty" >&2; exit 2; }
  cp /run/secrets/db_password /tmp/pw && chown postgres /tmp/pw
  as_pg "$PG/initdb" -D "$PGDATA" -U netsurvey --pwfile=/tmp/pw --auth-local=scram-sha-256 --auth-host=scram-sha-256 \
    -E UTF8 --locale=C.UTF-8 >/dev/null
  rm -f /tmp/pw
  as_pg "$PG/pg_ctl" -D "$PGDATA" -o "-c listen_addresses='' -k /run/postgresql" -w start >/dev/null
  runuser -u postgres -- env PGPASSWORD="$(cat /run/secrets/db_password)" \
    "$PG/psql" -h /run/postgresql -U netsurvey -d postgres -q -c 'CREATE DATABASE netsurvey'
  as_pg "$PG/pg_ctl" -D "$PGDATA" -m fast -w stop >/dev/null
  echo "postgres: initialised $PGDATA"
fi
exec runuser -u postgres -- "$PG/postgres" -D "$PGDATA" -c "listen_addresses=$LISTEN" -c "port=$PORT" \
  -c unix_socket_directories=/run/postgresql
