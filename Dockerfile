# netsurvey images: one Dockerfile, one target per image (docker-compose.yml uses them).
#
#   scanner   scanner/worker runtime: Python venv, zgrab2, zdns, zmap, iproute2 (workers,
#             scheduler, migrate, report)
#   browser   scanner + Chromium/chromedriver, Firefox ESR, faketime (browser experiments)
#   testbed   scanner + the testbed's daemons (nginx, knot, unbound, nftables) and the
#             test extra: runs `netsurvey testbed up` and the test suite in a container
#   db        PostgreSQL 16.2 (the pgserver wheel's build, as in the tests), no Python
#
#   docker build --target scanner -t netsurvey-scanner .
#
# Build stages keep compilers out of the runtime images: `pybuild` compiles pyasn (a C
# extension with no wheel) into /opt/venv from requirements.lock, `gotools` builds the
# pinned zgrab2/zdns (tools/go/go.mod). No image registry is needed: the base images are
# build arguments, so a machine without one builds from a local debootstrap import
# (scripts/docker_base.sh makes BASE_IMAGE and GO_IMAGE; docs/campaign.md section 6).
# No `# syntax=` line on purpose: it would pull a frontend image from a registry.

ARG BASE_IMAGE=debian:bookworm-slim
ARG GO_IMAGE=golang:1.24-bookworm

FROM ${GO_IMAGE} AS gotools
WORKDIR /src
COPY tools/go/ tools/go/
COPY scripts/build_go_tools.sh scripts/
RUN GOFLAGS=-mod=readonly bash scripts/build_go_tools.sh zgrab2 zdns

FROM ${BASE_IMAGE} AS pybuild
ENV DEBIAN_FRONTEND=noninteractive PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_CERT=/etc/ssl/certs/ca-certificates.crt
RUN apt-get update -qq \
    && apt-get install -y -qq --no-install-recommends python3 python3-venv python3-dev gcc libc6-dev ca-certificates \
    && rm -rf /var/lib/apt/lists/*
RUN python3 -m venv /opt/venv
COPY requirements.lock requirements-test.lock /app/
ARG LOCK=requirements.lock
RUN /opt/venv/bin/python -m pip install -q -r /app/${LOCK}
# The code reads schema/, config/ and tests/data/ next to the package: editable install
# of /app, and every runtime image carries /app at the same path.
COPY . /app
RUN /opt/venv/bin/python -m pip install -q --no-deps -e /app

FROM pybuild AS pybuild-test
RUN /opt/venv/bin/python -m pip install -q -r /app/requirements-test.lock

FROM ${BASE_IMAGE} AS runtime
ENV DEBIAN_FRONTEND=noninteractive PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 \
    PATH=/opt/venv/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
RUN apt-get update -qq \
    && apt-get install -y -qq --no-install-recommends python3 ca-certificates iproute2 zmap \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /app

FROM runtime AS scanner
COPY --from=pybuild /opt/venv /opt/venv
COPY --from=pybuild /app /app
# On PATH, where netsurvey/gotools.py looks first.
COPY --from=gotools /src/tools/go/bin/zgrab2 /src/tools/go/bin/zdns /usr/local/bin/
# Runs as root: scanners need raw sockets (compose grants NET_RAW/NET_ADMIN). The entry
# point turns Compose secrets (/run/secrets) into NETSURVEY_DSN / NETSURVEY_ATLAS_KEY.
ENTRYPOINT ["/app/docker/entrypoint.sh"]
CMD ["--help"]

FROM scanner AS browser
RUN apt-get update -qq \
    && apt-get install -y -qq --no-install-recommends chromium chromium-driver firefox-esr faketime \
    && rm -rf /var/lib/apt/lists/*

FROM runtime AS testbed
RUN apt-get update -qq \
    && apt-get install -y -qq --no-install-recommends nginx-light knot knot-module-geoip knot-dnsutils \
       unbound nftables procps psmisc curl openssl faketime \
    && rm -rf /var/lib/apt/lists/*
COPY --from=pybuild-test /opt/venv /opt/venv
COPY --from=pybuild-test /app /app
COPY --from=gotools /src/tools/go/bin/zgrab2 /src/tools/go/bin/zdns /usr/local/bin/
ENTRYPOINT ["/app/docker/entrypoint.sh"]
CMD ["testbed", "up"]

FROM ${BASE_IMAGE} AS db
RUN useradd --system --home-dir /var/lib/postgresql --create-home postgres
# The wheel's layout is kept: its binaries find their libpq through RPATH
# $ORIGIN/../../../pgserver.libs.
COPY --from=pybuild /opt/venv/lib/python3.11/site-packages/pgserver/pginstall /opt/pg/pgserver/pginstall
COPY --from=pybuild /opt/venv/lib/python3.11/site-packages/pgserver.libs /opt/pg/pgserver.libs
COPY docker/postgres.sh /usr/local/bin/netsurvey-postgres
COPY docker/postgres-init.sh /usr/local/lib/netsurvey/postgres-init.sh
RUN ln -s /opt/pg/pgserver/pginstall/bin/pg_isready /opt/pg/pgserver/pginstall/bin/psql /usr/local/bin/ \
    && /opt/pg/pgserver/pginstall/bin/postgres --version
VOLUME /var/lib/postgresql/data
ENTRYPOINT ["/usr/local/bin/netsurvey-postgres"]
