#!/usr/bin/env bash
# Build the testbed's zoo programs (issue 24) into tools/go/bin/: zoo-gotls, a stock
# Go crypto/tls HTTPS server (source testbed/zoo/gotls, standard library only, so no
# module download). Idempotent: rebuilt only when missing or older than its source.
# Prints the binary path. Env: GO (default `go`), FORCE=1.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
src="$root/testbed/zoo/gotls"
bin="$root/tools/go/bin/zoo-gotls"
GO=${GO:-go}
if ! command -v "$GO" >/dev/null 2>&1; then
  echo "build_zoo: '$GO' not found; the Go zoo host will be missing" >&2
  exit 0
fi
if [ -x "$bin" ] && [ "${FORCE:-0}" != 1 ] && [ -z "$(find "$src" "$0" -newer "$bin" -print -quit)" ]; then
  echo "$bin"; exit 0
fi
mkdir -p "$(dirname "$bin")"
tmp=$(mktemp "$(dirname "$bin")/.zoo-gotls.XXXXXX")
if ! (cd "$src" && CGO_ENABLED=0 GOFLAGS=-mod=mod "$GO" build -trimpath -o "$tmp" .); then
  rm -f "$tmp"; echo "build_zoo: building zoo-gotls failed" >&2; exit 1
fi
chmod 755 "$tmp"; mv -f "$tmp" "$bin"
echo "$bin"
