#!/usr/bin/env bash
# Build the pinned Go tools into tools/go/bin/.
#
#   scripts/build_go_tools.sh [composecheck|zgrab2|zdns|all|compose] ...   (default: all)
#
# `compose` (Docker Compose v2, for `make test-compose`; not part of `all`) is its own
# module with replace directives of its own, so it is built with `go install
# MODULE/cmd@COMPOSE_VERSION` outside tools/go: ~5 min of CPU, once.
#
# Versions are pinned in ONE place: tools/go/go.mod + go.sum (tools/go/tools.go holds
# the blank imports that keep zgrab2 and zdns in the module graph). Idempotent: a tool
# is rebuilt only when its binary is missing or older than go.mod, go.sum or the
# module's own Go sources. Works from a clean clone (bin/ is gitignored); needs Go and
# the Go module proxy (or a warm module cache). Prints the binary path(s) on stdout.
#
# Env: GO (go binary, default `go`), FORCE=1 to rebuild regardless, GOFLAGS.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
moddir="$root/tools/go"
bindir="$moddir/bin"
GO=${GO:-go}
# go.mod/go.sum are committed and complete (`go mod tidy` covers all three tools), so
# build read-only: a build never rewrites them. Override with GOFLAGS=-mod=mod.
case " ${GOFLAGS:-} " in
  *" -mod="*) ;;
  *) export GOFLAGS="${GOFLAGS:+$GOFLAGS }-mod=readonly" ;;
esac
export CGO_ENABLED=${CGO_ENABLED:-0}

if ! command -v "$GO" >/dev/null 2>&1; then
  echo "build_go_tools: '$GO' not found; install Go >= 1.24" >&2
  exit 127
fi

pkg_of() {
  case "$1" in
    composecheck) echo "./cmd/composecheck" ;;
    zgrab2)       echo "github.com/zmap/zgrab2/cmd/zgrab2" ;;
    zdns)         echo "github.com/zmap/zdns/v2" ;;
    *) return 1 ;;
  esac
}

# True if $1 is older than go.mod, go.sum or any local Go source of the module.
stale() {
  local bin="$1"
  [ -x "$bin" ] || return 0
  [ "${FORCE:-0}" = 1 ] && return 0
  [ "$moddir/go.mod" -nt "$bin" ] && return 0
  [ "$moddir/go.sum" -nt "$bin" ] && return 0
  [ "$root/scripts/build_go_tools.sh" -nt "$bin" ] && return 0
  local newer
  newer=$(find "$moddir" -path "$bindir" -prune -o -name '*.go' -newer "$bin" -print -quit)
  [ -n "$newer" ]
}

COMPOSE_VERSION=v2.29.7
build_compose() {
  local bin="$bindir/docker-compose" gobin
  if [ -x "$bin" ] && [ "${FORCE:-0}" != 1 ] && "$bin" version 2>/dev/null | grep -q "$COMPOSE_VERSION"; then
    echo "build_go_tools: compose up to date" >&2; echo "$bin"; return 0
  fi
  mkdir -p "$bindir"; gobin=$(mktemp -d "$bindir/.compose.XXXXXX")
  echo "build_go_tools: building docker compose $COMPOSE_VERSION" >&2
  if ! (cd "$gobin" && GOFLAGS=-mod=mod GOBIN="$gobin" "$GO" install -trimpath \
        -ldflags "-X github.com/docker/compose/v2/internal.Version=$COMPOSE_VERSION" \
        "github.com/docker/compose/v2/cmd@$COMPOSE_VERSION"); then
    rm -rf "$gobin"; echo "build_go_tools: building compose failed" >&2; exit 1
  fi
  mv -f "$gobin/cmd" "$bin"; rm -rf "$gobin"
  echo "$bin"
}

build() {
  local tool="$1" pkg bin tmp start
  pkg=$(pkg_of "$tool") || { echo "build_go_tools: unknown tool '$tool' (composecheck|zgrab2|zdns|all)" >&2; exit 2; }
  bin="$bindir/$tool"
  if ! stale "$bin"; then
    echo "build_go_tools: $tool up to date" >&2
    echo "$bin"
    return 0
  fi
  mkdir -p "$bindir"
  start=$(date +%s)
  echo "build_go_tools: building $tool ($pkg)" >&2
  # Build to a temp name and rename, so an interrupted build never leaves a binary
  # that looks fresh, and concurrent callers never see a half-written file.
  tmp=$(mktemp "$bindir/.$tool.XXXXXX")
  if ! (cd "$moddir" && "$GO" build -trimpath -o "$tmp" "$pkg"); then
    rm -f "$tmp"
    echo "build_go_tools: building $tool failed" >&2
    exit 1
  fi
  chmod 755 "$tmp"
  mv -f "$tmp" "$bin"
  echo "build_go_tools: built $tool in $(( $(date +%s) - start )) s" >&2
  echo "$bin"
}

[ $# -eq 0 ] && set -- all
for arg in "$@"; do
  case "$arg" in
    all) for t in composecheck zgrab2 zdns; do build "$t"; done ;;
    compose) build_compose ;;
    -h|--help) sed -n '2,18p' "$0"; exit 0 ;;
    *) build "$arg" ;;
  esac
done
