# syntax=docker/dockerfile:1
# netsurvey image: Debian 12 (bookworm) + Python 3.11, installed through the project's
# one install path (scripts/install.sh: apt packages + `pip install -e .[test]`).
#
#   docker build -t netsurvey .
#   docker run --rm netsurvey --help
#   docker compose up            (see docker-compose.yml)
#
# The pinned Go tools (zgrab2, zdns; versions in tools/go/go.mod) are built in a
# separate stage with scripts/build_go_tools.sh and copied in; the Go toolchain does
# not end up in the final image.

FROM golang:1.24-bookworm AS gotools
WORKDIR /src
COPY tools/go/ tools/go/
COPY scripts/build_go_tools.sh scripts/
RUN --mount=type=cache,target=/root/.cache/go-build \
    --mount=type=cache,target=/go/pkg/mod \
    bash scripts/build_go_tools.sh zgrab2 zdns

FROM python:3.11-slim-bookworm
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    DEBIAN_FRONTEND=noninteractive
WORKDIR /app
# install.sh needs root (apt) and is idempotent. The whole repo is copied because the
# package is installed in editable mode (see .dockerignore for what stays out).
COPY . .
RUN bash scripts/install.sh \
    && rm -rf /var/lib/apt/lists/*
COPY --from=gotools /src/tools/go/bin/zgrab2 /src/tools/go/bin/zdns /usr/local/bin/

# Runs as root: the worker needs raw sockets (compose grants NET_RAW/NET_ADMIN).
ENTRYPOINT ["netsurvey"]
CMD ["--help"]
