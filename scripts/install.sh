#!/usr/bin/env bash
# The one install path for netsurvey (used by `make demo`, `make test`, the Dockerfile
# and CI). Idempotent: installs only what is missing. Debian 12, run as root.
set -euo pipefail
cd "$(dirname "$0")/.."

APT_PACKAGES=(
  iproute2 nftables procps psmisc curl openssl ca-certificates
  nginx-light knot knot-module-geoip knot-dnsutils unbound
  faketime zmap
  chromium chromium-driver firefox-esr
  webkit2gtk-driver xvfb  # issue 27: WebKit (WebKitWebDriver + MiniBrowser) as a third engine, on its own Xvfb
)

missing=()
for p in "${APT_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "install: apt packages: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get -o DPkg::Lock::Timeout=600 update -qq
  apt-get -o DPkg::Lock::Timeout=600 install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  # Debian starts these daemons on install; the testbed runs its own instances.
  for svc in nginx knot unbound; do
    systemctl disable --now "$svc" >/dev/null 2>&1 || true
    pkill -x "$svc" >/dev/null 2>&1 || true
  done
  pkill -f 'nginx: master' >/dev/null 2>&1 || true
fi

PY=${PYTHON:-python3}
stamp=.netsurvey/install.stamp
mkdir -p .netsurvey
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ] || ! command -v netsurvey >/dev/null 2>&1; then
  echo "install: python package (editable) and dependencies"
  "$PY" -m pip install -q --disable-pip-version-check -e '.[test]'
  command -v pyenv >/dev/null 2>&1 && pyenv rehash || true
  touch "$stamp"
fi

# geckodriver (Firefox WebDriver) is not in Debian: build it from crates.io once (~3.5 min).
CARGO_BIN=$(command -v cargo || echo "$HOME/.cargo/bin/cargo")
if [ ! -x "$HOME/.cargo/bin/geckodriver" ] && [ -x "$CARGO_BIN" ]; then
  echo "install: geckodriver (cargo install)"
  "$CARGO_BIN" install -q --locked geckodriver >/dev/null 2>&1 || echo "install: geckodriver build failed (Firefox probes unavailable)"
fi
