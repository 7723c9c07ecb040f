#!/bin/sh
# Entry point of the netsurvey images. Secrets arrive as files (Compose `secrets:`,
# /run/secrets/NAME) and go only into this process's environment: never into the
# compose file, the image, or `docker inspect`.
#   NETSURVEY_DB_USER (default netsurvey_writer) + the secret db_<role>_password
#       (netsurvey_owner -> db_owner_password, netsurvey_writer -> db_writer_password;
#       NETSURVEY_DB_PASSWORD_FILE overrides the file) -> NETSURVEY_DSN, unless set;
#       host/port/db from NETSURVEY_DB_*; a host starting with / is the server's
#       unix-socket directory
#   db_reader_password -> NETSURVEY_READER_DSN (`netsurvey sql` reads as netsurvey_reader)
#   atlas_key -> NETSURVEY_ATLAS_KEY
set -e
dsn() {  # dsn USER PASSWORD_FILE
  python3 - "$1" "$2" <<'PY'
import os, sys, urllib.parse as u
user, pwfile = sys.argv[1], sys.argv[2]
pw = open(pwfile).read().strip()
e = os.environ.get
print(f"postgresql://{u.quote(user, safe='')}:{u.quote(pw, safe='')}"
      f"@{u.quote(e('NETSURVEY_DB_HOST', '127.0.0.1'), safe='')}:{e('NETSURVEY_DB_PORT', '55432')}"
      f"/{e('NETSURVEY_DB_NAME', 'netsurvey')}")
PY
}
DB_USER=${NETSURVEY_DB_USER:-netsurvey_writer}
PW_FILE=${NETSURVEY_DB_PASSWORD_FILE:-/run/secrets/db_${DB_USER#netsurvey_}_password}
if [ -z "${NETSURVEY_DSN:-}" ] && [ -r "$PW_FILE" ]; then
  NETSURVEY_DSN=$(dsn "$DB_USER" "$PW_FILE")
  export NETSURVEY_DSN
fi
if [ -z "${NETSURVEY_READER_DSN:-}" ] && [ -r /run/secrets/db_reader_password ]; then
  NETSURVEY_READER_DSN=$(dsn netsurvey_reader /run/secrets/db_reader_password)
  export NETSURVEY_READER_DSN
fi
if [ -z "${NETSURVEY_ATLAS_KEY:-}" ] && [ -s /run/secrets/atlas_key ]; then
  NETSURVEY_ATLAS_KEY=$(cat /run/secrets/atlas_key)
  export NETSURVEY_ATLAS_KEY
fi
exec netsurvey "$@"
