#!/usr/bin/env bash
# Build the QUIC zoo's quic-go example server (issue 24) into tools/go/bin/zoo-quicgo:
# `go install github.com/quic-go/quic-go/example@VERSION` from the Go module proxy (the
# module's own go.mod/go.sum pin its dependencies; ~40 s of CPU once). Idempotent: rebuilt
# only when missing, when this script is newer, or with FORCE=1. Prints the binary path.
# Env: GO (default `go`), CARGO (default `cargo`), FORCE=1.
# Also zoo-quinn into tools/rust/bin/: a stock quinn server (testbed/zoo/quinn, quinn 0.11.12
# with the ring provider, Cargo.lock pinned) built with cargo from crates.io (~60 s on 2
# cores); skipped with a note when cargo is missing.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build_quinn() {
  local rsrc="$root/testbed/zoo/quinn" rbin="$root/tools/rust/bin/zoo-quinn" CARGO=${CARGO:-cargo}
  if ! command -v "$CARGO" >/dev/null 2>&1; then
    echo "build_zoo_quic: '$CARGO' not found; the quinn zoo host will be missing" >&2; return 0
  fi
  if [ -x "$rbin" ] && [ "${FORCE:-0}" != 1 ] && [ -z "$(find "$rsrc" "$0" -newer "$rbin" -not -path "*/target/*" -print -quit)" ]; then
    echo "$rbin"; return 0
  fi
  mkdir -p "$(dirname "$rbin")"
  if ! (cd "$rsrc" && "$CARGO" build --release --locked -j2 --target-dir "$root/tools/rust/target" >&2); then
    echo "build_zoo_quic: building zoo-quinn failed" >&2; return 1
  fi
  install -m 755 "$root/tools/rust/target/release/zoo-quinn" "$rbin"
  echo "$rbin"
}
build_quinn || true
VERSION=v0.65.0   # keep in step with testbed/zoo_quic.py QUICGO_VERSION
bin="$root/tools/go/bin/zoo-quicgo"
GO=${GO:-go}
if ! command -v "$GO" >/dev/null 2>&1; then
  echo "build_zoo_quic: '$GO' not found; the quic-go zoo host will be missing" >&2
  exit 0
fi
if [ -x "$bin" ] && [ "${FORCE:-0}" != 1 ] && [ ! "$0" -nt "$bin" ]; then
  echo "$bin"; exit 0
fi
mkdir -p "$(dirname "$bin")"
tmpdir=$(mktemp -d "$(dirname "$bin")/.zoo-quicgo.XXXXXX")
trap 'rm -rf "$tmpdir"' EXIT
if ! GOBIN="$tmpdir" CGO_ENABLED=0 GOFLAGS=-mod=mod "$GO" install -trimpath "github.com/quic-go/quic-go/example@$VERSION"; then
  echo "build_zoo_quic: building quic-go example $VERSION failed" >&2; exit 1
fi
mv -f "$tmpdir/example" "$bin"
echo "$bin"
