#!/usr/bin/env bash
# Create the secret files docker-compose.yml reads (never committed: secrets/ is ignored).
#   secrets/db_admin_password    the superuser `postgres`: only the database image's init
#   secrets/db_owner_password    netsurvey_owner  (migrate, report)
#   secrets/db_writer_password   netsurvey_writer (workers, scheduler)
#   secrets/db_reader_password   netsurvey_reader (`netsurvey sql`)
#   secrets/atlas_key            empty unless NETSURVEY_ATLAS_KEY is set when this runs
# Passwords are random and made once (the database is initialised with them).
set -euo pipefail
cd "$(dirname "$0")/.."
umask 077
mkdir -p secrets data
for role in admin owner writer reader; do
  [ -s "secrets/db_${role}_password" ] || openssl rand -hex 24 > "secrets/db_${role}_password"
done
if [ ! -e secrets/atlas_key ] || [ -n "${NETSURVEY_ATLAS_KEY:-}" ]; then
  printf '%s' "${NETSURVEY_ATLAS_KEY:-}" > secrets/atlas_key
fi
# The files are bind-mounted into the containers; the services run as root except the
# database (user postgres reads the passwords only at initialisation, as root copies them).
chmod 600 secrets/db_*_password secrets/atlas_key
echo "secrets: $(ls secrets | tr '\n' ' ')"
