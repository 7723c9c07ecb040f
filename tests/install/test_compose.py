"""docker-compose.yml is checked offline with compose-go, the loader Docker Compose v2 uses.

`tools/go/cmd/composecheck` is built once per session by scripts/build_go_tools.sh
(cached: a no-op when the binary is newer than go.mod/go.sum/sources; ~20-60 s cold,
needs Go and the Go module proxy or a warm module cache). Negative cases prove the
checker really rejects broken files, each for the expected reason, and a positive
control proves the same base file is accepted, so the rejections are not accidental.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import textwrap
from pathlib import Path

import pytest

from conftest import REPO as ROOT

COMPOSE_FILE = ROOT / "docker-compose.yml"
BUILD_SCRIPT = ROOT / "scripts" / "build_go_tools.sh"


@pytest.fixture(scope="session")
def composecheck() -> Path:
    if shutil.which(os.environ.get("GO", "go")) is None:
        pytest.fail("Go is required to build tools/go/cmd/composecheck (install Go >= 1.24)")
    proc = subprocess.run(
        ["bash", str(BUILD_SCRIPT), "composecheck"],
        cwd=ROOT, capture_output=True, text=True, timeout=600,
    )
    assert proc.returncode == 0, f"building composecheck failed:\n{proc.stderr}"
    binary = Path(proc.stdout.strip().splitlines()[-1])
    assert binary.is_file() and os.access(binary, os.X_OK), binary
    return binary


def _env() -> dict[str, str]:
    # Deterministic: no COMPOSE_* / NETSURVEY_* settings from the caller's shell.
    return {k: v for k, v in os.environ.items()
            if not k.startswith(("COMPOSE_", "NETSURVEY_", "DOCKER_"))}


def check(binary: Path, *files: Path, profiles: tuple[str, ...] = (),
          env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    args = [str(binary)]
    for f in files:
        args += ["-f", str(f)]
    for p in profiles:
        args += ["--profile", p]
    return subprocess.run(args, cwd=files[0].parent, capture_output=True, text=True,
                          timeout=60, env=env if env is not None else _env())


def services_of(proc: subprocess.CompletedProcess[str]) -> set[str]:
    m = re.search(r"services: (.*)$", proc.stdout.strip())
    assert m, proc.stdout
    return {s.strip() for s in m.group(1).split(",") if s.strip()}


# ---------------------------------------------------------------- the repo's file

def test_repo_compose_valid_default_profile(composecheck):
    proc = check(composecheck, COMPOSE_FILE)
    assert proc.returncode == 0, proc.stderr
    # `report` sits behind a profile, so it must not start by default.
    assert services_of(proc) == {"postgres", "migrate", "worker", "scheduler"}


def test_repo_compose_valid_report_profile(composecheck):
    proc = check(composecheck, COMPOSE_FILE, profiles=("report",))
    assert proc.returncode == 0, proc.stderr
    assert services_of(proc) == {"postgres", "migrate", "worker", "scheduler", "report"}


def test_repo_compose_valid_with_secrets_in_env(composecheck):
    env = _env() | {"NETSURVEY_ATLAS_KEY": "k-123", "NETSURVEY_DB_PASSWORD": "s3cret"}
    proc = check(composecheck, COMPOSE_FILE, profiles=("report",), env=env)
    assert proc.returncode == 0, proc.stderr


def test_repo_compose_has_no_secrets_and_no_version_key():
    text = COMPOSE_FILE.read_text()
    assert not re.search(r"^version\s*:", text, re.M), "obsolete top-level `version:`"
    # Secrets come only through Compose `secrets:` (files), never through the environment.
    assert not re.search(r"NETSURVEY_ATLAS_KEY|PASSWORD|NETSURVEY_DSN", text), "secret in an env var"
    for role in ("admin", "owner", "writer", "reader"):
        assert re.search(rf"^  db_{role}_password:\n    file: ./secrets/db_{role}_password$", text, re.M), role


def test_repo_compose_scanners_on_host_network_with_one_scheduler(composecheck):
    """What Compose v2 will run (compose-go's loaded project): host networking, secrets as
    files, ./config and the data directory mounted, a worker healthcheck, one scheduler."""
    import json

    proc = subprocess.run([str(composecheck), "-f", str(COMPOSE_FILE), "--profile", "browsers", "--profile",
                           "report", "-json"], cwd=ROOT, capture_output=True, text=True, timeout=60, env=_env())
    assert proc.returncode == 0, proc.stderr
    project = json.loads(proc.stdout)
    svcs = project["services"]
    db_secrets = {f"db_{r}_password" for r in ("admin", "owner", "writer", "reader")}
    assert set(project["secrets"]) == db_secrets | {"atlas_key"}
    assert all(sec["file"].startswith(str(ROOT / "secrets")) for sec in project["secrets"].values())
    for name in ("postgres", "migrate", "worker", "scheduler", "browser-worker", "report"):
        assert svcs[name]["network_mode"] == "host", name
        assert not any(k.endswith(("_KEY", "PASSWORD", "_DSN")) for k in svcs[name].get("environment", {})), name
    # each container gets only the secrets of the database roles it uses (README "Security")
    secrets_of = {name: {x["source"] for x in svc.get("secrets", [])} for name, svc in svcs.items()}
    assert secrets_of["postgres"] == db_secrets
    for name in ("migrate", "report"):
        assert secrets_of[name] == {"db_owner_password"}, name
        assert svcs[name]["environment"]["NETSURVEY_DB_USER"] == "netsurvey_owner", name
    for name in ("worker", "scheduler", "browser-worker"):
        assert secrets_of[name] == {"db_writer_password", "db_reader_password", "atlas_key"}, name
        assert svcs[name]["environment"]["NETSURVEY_DB_USER"] == "netsurvey_writer", name
    for name in ("migrate", "worker", "scheduler", "browser-worker", "report"):
        mounts = {(v["source"], v["target"], v.get("read_only", False)) for v in svcs[name]["volumes"]}
        assert {(str(ROOT / "config"), "/app/config", True), (str(ROOT / "data"), "/data", False)} <= mounts, name
    assert svcs["worker"]["healthcheck"]["test"][0] == "CMD"
    assert {svcs[n]["build"]["target"] for n in ("worker", "scheduler", "migrate")} == {"scanner"}
    assert svcs["browser-worker"]["build"]["target"] == "browser" and svcs["postgres"]["build"]["target"] == "db"
    # only the scheduler fires config/schedule.toml; plain workers get an empty schedule
    assert "--schedule" in svcs["scheduler"]["command"]
    for name in ("worker", "browser-worker"):
        assert svcs[name]["environment"]["NETSURVEY_SCHEDULE"] == "/dev/null", name
        assert "--schedule" not in svcs[name]["command"]


# ------------------------------------------------------ synthetic files (tmp_path)

BASE = """\
services:
  db:
    image: postgres:16
    healthcheck:
      test: ["CMD-SHELL", "pg_isready"]
      interval: 5s
    volumes:
      - data:/var/lib/postgresql/data
  app:
    image: busybox:1
    command: ["true"]
    depends_on:
      db:
        condition: service_healthy
    ports:
      - "8080:80"
volumes:
  data:
"""


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "docker-compose.yml"
    path.write_text(textwrap.dedent(text))
    return path


def mutate(old: str, new: str) -> str:
    assert old in BASE, old
    return BASE.replace(old, new, 1)


def test_base_file_is_valid(composecheck, tmp_path):
    # Positive control for the negative cases below.
    proc = check(composecheck, write(tmp_path, BASE))
    assert proc.returncode == 0, proc.stderr


def test_modern_fields_accepted(composecheck, tmp_path):
    text = "name: modern-project\n" + mutate(
        "      interval: 5s\n",
        "      interval: 5s\n      start_period: 30s\n      start_interval: 1s\n",
    )
    proc = check(composecheck, write(tmp_path, text))
    assert proc.returncode == 0, proc.stderr
    assert 'project "modern-project"' in proc.stdout


NEGATIVE = {
    "unknown_service_key": (
        mutate("    command: [\"true\"]\n", "    command: [\"true\"]\n    bogus_key: 1\n"),
        r"bogus_key",
    ),
    "duplicate_yaml_key": (
        mutate("    command: [\"true\"]\n", "    command: [\"true\"]\n    command: [\"false\"]\n"),
        r"(?i)already defined|duplicate|mapping key",
    ),
    "depends_on_missing_service": (
        mutate("      db:\n        condition", "      nosuchdb:\n        condition"),
        r"nosuchdb",
    ),
    "ports_wrong_type": (
        mutate("    ports:\n      - \"8080:80\"\n", "    ports: 5\n"),
        r"ports",
    ),
    "undefined_named_volume": (
        mutate("      - data:/var/lib/postgresql/data\n",
               "      - missingvol:/var/lib/postgresql/data\n"),
        r"missingvol",
    ),
    "healthcheck_wrong_duration": (
        mutate("      interval: 5s\n", "      interval: soon\n"),
        r"(?i)interval|duration",
    ),
}


@pytest.mark.parametrize("case", sorted(NEGATIVE))
def test_invalid_compose_rejected(composecheck, tmp_path, case):
    text, reason = NEGATIVE[case]
    proc = check(composecheck, write(tmp_path, text))
    assert proc.returncode == 1, f"{case}: accepted but must be rejected\n{text}"
    assert re.search(reason, proc.stderr), f"{case}: rejected for another reason: {proc.stderr}"


def test_missing_file_rejected(composecheck, tmp_path):
    (tmp_path / "x").mkdir()
    proc = check(composecheck, tmp_path / "x" / "nope.yml")
    assert proc.returncode != 0


def test_repo_compose_browser_profile(composecheck):
    proc = check(composecheck, COMPOSE_FILE, profiles=("browsers",))
    assert "browser-worker" in services_of(proc)
