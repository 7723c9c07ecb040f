#!/usr/bin/env bash
# Create the secret files docker-compose.yml reads (never committed: secrets/ is ignored).
#   secrets/db_password   random, made once (the database is initialised with it)
#   secrets/atlas_key     empty unless NETSURVEY_ATLAS_KEY is set when this runs
set -euo pipefail
cd "$(dirname "$0")/.."
umask 077
mkdir -p secrets data
[ -s secrets/db_password ] || openssl rand -hex 24 > secrets/db_password
if [ ! -e secrets/atlas_key ] || [ -n "${NETSURVEY_ATLAS_KEY:-}" ]; then
  printf '%s' "${NETSURVEY_ATLAS_KEY:-}" > secrets/atlas_key
fi
# The files are bind-mounted into the containers; the services run as root except the
# database (user postgres reads db_password only at initialisation, as root copies it).
chmod 600 secrets/db_password secrets/atlas_key
echo "secrets: $(ls secrets | tr '\n' ' ')"
