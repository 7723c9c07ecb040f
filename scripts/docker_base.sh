#!/usr/bin/env bash
# Base images for the Dockerfile on a machine without an image registry (docs/campaign.md
# section 6). Idempotent: an image that exists is kept (FORCE=1 rebuilds).
#
#   netsurvey/bookworm   debootstrap --variant=minbase bookworm, then `docker import`
#                        (BASE_IMAGE; the mirror is the one apt already uses; the local
#                        CAs of /usr/local/share/ca-certificates are copied in)
#   netsurvey/golang     netsurvey/bookworm + this machine's Go toolchain (GO_IMAGE;
#                        $(go env GOROOT), Go >= 1.24) + ca-certificates
#
# Then: docker build --network host --build-arg BASE_IMAGE=netsurvey/bookworm \
#         --build-arg GO_IMAGE=netsurvey/golang --target scanner -t netsurvey-scanner .
# (scripts/compose_images.sh builds all targets that way.)
set -euo pipefail
DOCKER=${DOCKER:-docker}
have() { [ "${FORCE:-0}" != 1 ] && "$DOCKER" image inspect "$1" >/dev/null 2>&1; }

if ! have netsurvey/bookworm; then
  command -v debootstrap >/dev/null || apt-get install -y -qq --no-install-recommends debootstrap >/dev/null
  mirror=$(grep -rhoE '^(URIs:|deb) +https?://[^ ]+/debian/?' /etc/apt/sources.list /etc/apt/sources.list.d/ 2>/dev/null \
           | awk '{print $2}' | grep -v security | head -1 || true)
  mirror=${mirror:-http://deb.debian.org/debian}
  root=$(mktemp -d /tmp/netsurvey-rootfs.XXXXXX)
  trap 'rm -rf "$root"' EXIT
  echo "docker_base: debootstrap bookworm from $mirror" >&2
  debootstrap --variant=minbase bookworm "$root" "$mirror" >/dev/null
  # apt inside the image: the same mirror, plus security updates; no caches.
  printf 'deb %s bookworm main\ndeb %s bookworm-updates main\ndeb %s-security bookworm-security main\n' \
    "$mirror" "$mirror" "${mirror%/debian*}/debian" > "$root/etc/apt/sources.list"
  rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/*
  # Trust what this machine trusts: its local CAs (e.g. an egress proxy's) are picked up
  # by update-ca-certificates when an image installs ca-certificates.
  if compgen -G "/usr/local/share/ca-certificates/*.crt" >/dev/null; then
    mkdir -p "$root/usr/local/share/ca-certificates"
    cp /usr/local/share/ca-certificates/*.crt "$root/usr/local/share/ca-certificates/"
  fi
  tar -C "$root" -c . | "$DOCKER" import -c 'CMD ["/bin/bash"]' - netsurvey/bookworm >/dev/null
  rm -rf "$root"; trap - EXIT
fi

if ! have netsurvey/golang; then
  goroot=$(${GO:-go} env GOROOT)
  ctx=$(mktemp -d /tmp/netsurvey-goctx.XXXXXX)
  trap 'rm -rf "$ctx"' EXIT
  cp -a "$goroot" "$ctx/go"
  cat > "$ctx/Dockerfile" <<'DOCKERFILE'
FROM netsurvey/bookworm
RUN apt-get update -qq && apt-get install -y -qq --no-install-recommends ca-certificates git \
    && rm -rf /var/lib/apt/lists/*
COPY go /usr/local/go
ENV PATH=/usr/local/go/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin GOTOOLCHAIN=local
DOCKERFILE
  "$DOCKER" build -q --network host -t netsurvey/golang "$ctx" >/dev/null
fi
"$DOCKER" image ls --format '{{.Repository}}:{{.Tag}} {{.Size}}' | grep '^netsurvey/'
