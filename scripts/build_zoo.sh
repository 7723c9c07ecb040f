#!/usr/bin/env bash
# Build the testbed's zoo programs (issue 24) into tools/go/bin/: zoo-gotls, a stock
# Go crypto/tls HTTPS server (source testbed/zoo/gotls, standard library only, so no
# module download). Idempotent: rebuilt only when missing or older than its source.
# Prints the binary path. Env: GO (default `go`), FORCE=1.
# Also (issue 24, TLS zoo 2) zoo-rustls into tools/rust/bin/: a stock rustls server
# (testbed/zoo/rustls, rustls 0.23 with the ring provider, Cargo.lock pinned) built with
# cargo from crates.io (~70 s on 2 cores); skipped with a note when cargo is missing.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
src="$root/testbed/zoo/gotls"
bin="$root/tools/go/bin/zoo-gotls"
GO=${GO:-go}
build_rustls() {
  local rsrc="$root/testbed/zoo/rustls" rbin="$root/tools/rust/bin/zoo-rustls" CARGO=${CARGO:-cargo}
  if ! command -v "$CARGO" >/dev/null 2>&1; then
    echo "build_zoo: '$CARGO' not found; the rustls zoo2 host will be missing" >&2; return 0
  fi
  if [ -x "$rbin" ] && [ "${FORCE:-0}" != 1 ] && [ -z "$(find "$rsrc" "$0" -newer "$rbin" -not -path "*/target/*" -print -quit)" ]; then
    echo "$rbin"; return 0
  fi
  mkdir -p "$(dirname "$rbin")"
  if ! (cd "$rsrc" && "$CARGO" build --release --locked -j2 --target-dir "$root/tools/rust/target" >&2); then
    echo "build_zoo: building zoo-rustls failed" >&2; return 1
  fi
  install -m 755 "$root/tools/rust/target/release/zoo-rustls" "$rbin"
  echo "$rbin"
}
build_rustls || true
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
