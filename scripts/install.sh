#!/usr/bin/env bash
# The install path for a development / test machine (used by every `make` target and so by
# CI). Debian 12, run as root. Idempotent: installs only what is missing; ~0.1 s when
# everything is in place.
#
#   1. apt packages (testbed daemons, browsers, and python3-venv/python3-dev/gcc so that
#      Debian's own python3 can make the virtual environment and build pyasn);
#   2. a virtual environment $VENV (default .venv) made with $PYTHON (default python3,
#      CPython 3.11 or 3.12; Debian's /usr/bin/python3 is EXTERNALLY-MANAGED (PEP 668), so
#      nothing is ever installed into the interpreter itself), holding the pinned
#      dependencies of $LOCK (default requirements-test.lock) and netsurvey itself
#      (editable, --no-deps: the lock alone decides every version);
#   3. the pinned Go tools (zgrab2, zdns, composecheck; tools/go) when Go >= 1.24 is found;
#   4. geckodriver (cargo) once;
#   5. sslyze in a venv of its own (tools/sslyze/.venv, hash-pinned tools/sslyze/requirements.lock).
#
# Env: PYTHON, VENV, LOCK as above; NETSURVEY_SKIP_APT=1 skips step 1.
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON=${PYTHON:-python3}
VENV=${VENV:-.venv}
LOCK=${LOCK:-requirements-test.lock}

APT_PACKAGES=(
  python3-venv python3-dev gcc libc6-dev
  iproute2 nftables procps psmisc curl openssl ca-certificates
  nginx-light knot knot-module-geoip knot-dnsutils unbound
  faketime zmap
  chromium chromium-driver firefox-esr
  gnutls-bin lighttpd lighttpd-mod-openssl haproxy openjdk-17-jdk-headless  # issue 24: the testbed zoo's TLS hosts (+ gnutls-cli)
  webkit2gtk-driver xvfb  # issue 27: WebKit (WebKitWebDriver + MiniBrowser) as a third engine, on its own Xvfb
  testssl.sh  # issue 24: a further second opinion on TLS resumption (scan tls-second-opinion --client testssl)
  bind9 gdnsd nsd pdns-server pdns-backend-bind  # issue 24: the DNS zoo's authoritative servers (testbed zoo-dns; kdig from knot-dnsutils is the second opinion)
  ngtcp2-server ngtcp2-client  # issue 24: the QUIC zoo's ngtcp2 server (gtlsserver) and its client as a second opinion
  h2o android-boringssl  # issue 24: TLS zoo 2 (testbed zoo2: H2O, BoringSSL's bssl-tool server)
)

if [ "${NETSURVEY_SKIP_APT:-0}" != 1 ]; then
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
    for svc in nginx knot unbound lighttpd haproxy h2o named bind9 gdnsd nsd pdns; do
      systemctl disable --now "$svc" >/dev/null 2>&1 || true
      pkill -x "$svc" >/dev/null 2>&1 || true
    done
    pkill -x pdns_server >/dev/null 2>&1 || true   # the pdns service's process name
    pkill -f 'nginx: master' >/dev/null 2>&1 || true
  fi
fi

# --- Python: a virtual environment, never the interpreter's own site-packages ---------
if ! command -v "$PYTHON" >/dev/null 2>&1; then
  echo "install: PYTHON=$PYTHON not found" >&2
  exit 2
fi
# Identify the interpreter by its real executable and version (pyenv shims resolve here).
py_id=$("$PYTHON" -c 'import sys; print(sys.executable, "%d.%d.%d" % sys.version_info[:3])')
if ! "$PYTHON" -c 'import sys; sys.exit(not (3, 11) <= sys.version_info[:2] <= (3, 12))'; then
  # 3.13: pgserver 0.1.4 (the embedded PostgreSQL, a core dependency) ships wheels for
  # CPython <= 3.12 only and no sdist.
  echo "install: netsurvey needs Python 3.11 or 3.12 (pgserver has no wheel for newer); $PYTHON is ${py_id#* }" >&2
  exit 2
fi
if [ ! -f "$LOCK" ]; then
  echo "install: lock file $LOCK not found" >&2
  exit 2
fi
# The venv is made anew when it is missing, broken, or was made by another interpreter.
if [ ! -x "$VENV/bin/python" ] || [ "$(cat "$VENV/.netsurvey-python" 2>/dev/null)" != "$py_id" ] \
   || ! "$VENV/bin/python" -c '' 2>/dev/null; then
  echo "install: virtual environment $VENV ($py_id)"
  rm -rf "$VENV"
  "$PYTHON" -m venv "$VENV"
  echo "$py_id" > "$VENV/.netsurvey-python"
fi
# One stamp per lock file, holding the hash of what it was installed from.
stamp="$VENV/.netsurvey-$(basename "$LOCK").stamp"
want=$(cat "$LOCK" pyproject.toml | sha256sum | cut -d' ' -f1)
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ] || [ ! -x "$VENV/bin/netsurvey" ]; then
  echo "install: python dependencies from $LOCK into $VENV"
  pip=("$VENV/bin/python" -m pip -q --disable-pip-version-check)
  "${pip[@]}" install -r "$LOCK"
  "${pip[@]}" install --no-deps -e .
  echo "$want" > "$stamp"
fi

# --- sslyze (issue 24: `scan tls-second-opinion --client sslyze`) in a venv of its own -----
# sslyze 6.3.1 needs cryptography<47, the project's lock pins a newer one: so sslyze is an
# external tool like testssl.sh, with its own hash-pinned lock (tools/sslyze/requirements.lock,
# made by `uv pip compile tools/sslyze/requirements.in --python-version 3.11 --generate-hashes`),
# run as a subprocess (scanners/tls_second_opinion/sslyze.py). Wheels only for the compiled
# parts (nassl bundles its own OpenSSL builds); ~6 s once.
SSLYZE_VENV=tools/sslyze/.venv
SSLYZE_LOCK=tools/sslyze/requirements.lock
# rebuilt only when the lock changes or the venv is broken (not per $PYTHON: any 3.11/3.12 serves)
sslyze_want=$(sha256sum < "$SSLYZE_LOCK" | cut -d' ' -f1)
if [ "$(cat "$SSLYZE_VENV/.netsurvey-stamp" 2>/dev/null)" != "$sslyze_want" ] \
   || ! "$SSLYZE_VENV/bin/python" -c 'import sslyze' 2>/dev/null; then
  echo "install: sslyze into $SSLYZE_VENV ($SSLYZE_LOCK)"
  rm -rf "$SSLYZE_VENV"
  if "$PYTHON" -m venv "$SSLYZE_VENV" \
     && "$SSLYZE_VENV/bin/python" -m pip -q --disable-pip-version-check install --require-hashes \
          --only-binary=nassl,cryptography,cffi,pydantic-core -r "$SSLYZE_LOCK"; then
    echo "$sslyze_want" > "$SSLYZE_VENV/.netsurvey-stamp"
  else
    echo "install: sslyze venv failed (scan tls-second-opinion --client sslyze and its tests will say so)" >&2
  fi
fi

# --- Go tools (versions pinned in tools/go/go.mod) ---------------------------------------
# Found on PATH first, then in tools/go/bin (netsurvey/gotools.py). Building is a no-op
# when the binaries are up to date; without Go the tests that need them say so.
GO=${GO:-$(command -v go || echo /usr/local/go/bin/go)}
if [ -x "$GO" ]; then
  if ! log=$(GO="$GO" bash scripts/build_go_tools.sh composecheck zgrab2 zdns 2>&1 >/dev/null); then
    echo "$log" | tail -5 >&2
    echo "install: building the Go tools failed (the tests that need them will say so)" >&2
  fi
  echo "$log" | grep -v "up to date" || true
else
  echo "install: Go >= 1.24 not found (PATH, /usr/local/go): zgrab2, zdns and composecheck not built" >&2
fi

# geckodriver (Firefox WebDriver) is not in Debian: build it from crates.io once (~3.5 min).
CARGO_BIN=$(command -v cargo || echo "$HOME/.cargo/bin/cargo")
if [ ! -x "$HOME/.cargo/bin/geckodriver" ] && [ -x "$CARGO_BIN" ]; then
  echo "install: geckodriver (cargo install)"
  "$CARGO_BIN" install -q --locked geckodriver >/dev/null 2>&1 || echo "install: geckodriver build failed (Firefox probes unavailable)"
fi

# issue 24: the testbed zoo's Go crypto/tls host (standard library only, ~2 s) and TLS zoo 2's
# rustls server (crates.io, Cargo.lock pinned, ~70 s once on 2 cores).
scripts/build_zoo.sh >/dev/null || echo "install: zoo-gotls build failed (the Go zoo host will be missing)"
# issue 24: the QUIC zoo's quic-go example server (Go module proxy, ~40 s once) and quinn
# server (crates.io, Cargo.lock pinned, ~60 s once on 2 cores).
scripts/build_zoo_quic.sh >/dev/null || echo "install: zoo-quicgo build failed (the quic-go zoo host will be missing)"
