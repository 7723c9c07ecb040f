#!/usr/bin/env bash
# Regenerate the lock files (`make lock`), after changing dependencies in pyproject.toml.
#
#   requirements.lock        runtime (container images)
#   requirements-test.lock   runtime + [test]          (make install / make test, CI)
#   requirements-fuzz.lock   runtime + [test] + [fuzz] (make fuzz)
#
# One universal resolution (uv, markers for every Python the project allows) is made for the
# largest set; the two smaller files are constrained to it, so all three pin the same
# versions. Existing pins are kept where still allowed (uv prefers the output file's
# pins): upgrading is an explicit `UPGRADE=1 make lock`. uv itself is pinned below and
# installed into .venv-tools/ (not into the project's .venv).
set -euo pipefail
cd "$(dirname "$0")/.."
UV_VERSION=0.13.8
PYTHON=${PYTHON:-python3}
if [ ! -x .venv-tools/bin/uv ] || ! .venv-tools/bin/uv --version | grep -q " $UV_VERSION"; then
  "$PYTHON" -m venv .venv-tools
  .venv-tools/bin/python -m pip install -q --disable-pip-version-check "uv==$UV_VERSION"
fi
uv=.venv-tools/bin/uv
common=(--universal --python-version 3.11 --no-emit-package netsurvey -q)
[ "${UPGRADE:-0}" = 1 ] && common+=(--upgrade)
"$uv" pip compile pyproject.toml --extra test --extra fuzz "${common[@]}" -o requirements-fuzz.lock
"$uv" pip compile pyproject.toml --extra test -c requirements-fuzz.lock "${common[@]}" -o requirements-test.lock
"$uv" pip compile pyproject.toml -c requirements-fuzz.lock "${common[@]}" -o requirements.lock
grep -c '==' requirements.lock requirements-test.lock requirements-fuzz.lock
