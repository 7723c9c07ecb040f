#!/bin/sh
# Entry point of the netsurvey images. Secrets arrive as files (Compose `secrets:`,
# /run/secrets/NAME) and go only into this process's environment: never into the
# compose file, the image, or `docker inspect`.
#   db_password -> NETSURVEY_DSN (user/host/port/db from NETSURVEY_DB_*; a host starting
#                  with / is the server's unix-socket directory), unless set
#   atlas_key   -> NETSURVEY_ATLAS_KEY
set -e
if [ -z "${NETSURVEY_DSN:-}" ] && [ -r /run/secrets/db_password ]; then
  NETSURVEY_DSN=$(python3 - <<'PY'
import os, urllib.parse as u
pw = open("/run/secrets/db_password").read().strip()
e = os.environ.get
print(f"postgresql://{u.quote(e('NETSURVEY_DB_USER', 'netsurvey'), safe='')}:{u.quote(pw, safe='')}"
      f"@{u.quote(e('NETSURVEY_DB_HOST', '127.0.0.1'), safe='')}:{e('NETSURVEY_DB_PORT', '55432')}"
      f"/{e('NETSURVEY_DB_NAME', 'netsurvey')}")
PY
)
  export NETSURVEY_DSN
fi
if [ -z "${NETSURVEY_ATLAS_KEY:-}" ] && [ -s /run/secrets/atlas_key ]; then
  NETSURVEY_ATLAS_KEY=$(cat /run/secrets/atlas_key)
  export NETSURVEY_ATLAS_KEY
fi
exec netsurvey "$@"
