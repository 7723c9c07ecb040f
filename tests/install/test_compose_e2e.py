"""docker-compose.yml for real (issue 23): build the images, `compose up`, migrate, import a
list, let the scheduler fire a campaign against the testbed, scale to 3 workers, kill one
worker mid-run, restart the database, and check the run finished with every target
exactly once; then `compose run report` writes the report.

Runs only when asked (`make test-compose`, NETSURVEY_COMPOSE_E2E=1): it needs a running
Docker engine, the testbed (root), the base images (scripts/docker_base.sh, made here when
missing) and Docker Compose v2 (scripts/build_go_tools.sh compose, or NETSURVEY_COMPOSE_BIN). ~10-20 min
cold.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import REPO as ROOT

PROJECT = "netsurvey-e2e"
pytestmark = [
    pytest.mark.slow,
    pytest.mark.timeout(5400),
    pytest.mark.skipif(os.environ.get("NETSURVEY_COMPOSE_E2E") != "1",
                       reason="set NETSURVEY_COMPOSE_E2E=1 (make test-compose)"),
]


def sh(*args: str, timeout: float = 600, check: bool = True, env: dict | None = None, **kw):
    p = subprocess.run(list(args), cwd=ROOT, capture_output=True, text=True, timeout=timeout,
                       env=env or os.environ.copy(), **kw)
    if check and p.returncode != 0:
        raise AssertionError(f"{' '.join(args)} -> {p.returncode}\n{p.stdout[-3000:]}\n{p.stderr[-3000:]}")
    return p


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    docker = shutil.which("docker")
    if docker is None or subprocess.run([docker, "info"], capture_output=True).returncode != 0:
        pytest.fail("no Docker engine reachable (start dockerd; docs/campaign.md section 6)")
    compose_bin = Path(os.environ.get("NETSURVEY_COMPOSE_BIN") or
                       sh("bash", "scripts/build_go_tools.sh", "compose", timeout=3600).stdout.split()[-1])
    data = tmp_path_factory.mktemp("compose-data")
    env = {**os.environ, "NETSURVEY_DATA_DIR": str(data), "COMPOSE_PROJECT_NAME": PROJECT,
           "NETSURVEY_BASE_IMAGE": os.environ.get("NETSURVEY_BASE_IMAGE", "netsurvey/bookworm"),
           "NETSURVEY_GO_IMAGE": os.environ.get("NETSURVEY_GO_IMAGE", "netsurvey/golang")}
    if env["NETSURVEY_BASE_IMAGE"].startswith("netsurvey/"):
        sh("bash", "scripts/docker_base.sh", timeout=1800)
    sh("bash", "scripts/compose_secrets.sh")
    sh(sys.executable, "-m", "netsurvey.cli", "testbed", "up", timeout=300)   # idempotent

    def compose(*args: str, timeout: float = 900, check: bool = True):
        return sh(str(compose_bin), "-f", "docker-compose.yml", "-f", "docker-compose.testbed.yml", *args,
                  timeout=timeout, check=check, env=env)

    t0 = time.monotonic()
    compose("build", timeout=3600)
    build_s = time.monotonic() - t0
    compose("down", "--volumes", "--remove-orphans", check=False)
    yield compose, data, build_s
    compose("logs", "--no-color", check=False)
    compose("down", "--volumes", "--remove-orphans", check=False)


def sql(compose, query: str):
    # jsonl: one object a line (`--format json` streams its array over several lines)
    p = compose("run", "--rm", "--no-deps", "migrate", "sql", query, "--format", "jsonl", timeout=300)
    return [json.loads(line) for line in p.stdout.splitlines() if line.startswith("{")]


def test_stack_runs_a_scheduled_campaign_through_failures(stack):
    compose, data, build_s = stack
    names = [f"www{i}.example.test" for i in range(1, 4)] + ["www.example.test", "nx.example.test"]
    names += [f"n{i}.example.test" for i in range(600)]
    (data / "list.csv").write_text("".join(f"{i},{n}\n" for i, n in enumerate(names, 1)))
    compose("up", "-d", "--scale", "worker=3", "postgres", "migrate", "worker", timeout=900)
    compose("run", "--rm", "--no-deps", "migrate", "targets", "import", "/data/list.csv", "--list", "e2e")
    # the scheduler fires a cron entry every minute (second 0); workers run the shards
    (data / "schedule.toml").write_text(
        '[[schedule]]\nname = "e2e"\ncron = "* * * * *"\n'
        # rate-limited so that the failures below hit it mid-run
        'command = ["scan", "dns-ttl", "--list", "e2e", "--family", "4", "--rate", "100"]\nshards = 12\n')
    compose("up", "-d", "scheduler")
    run_id = None
    deadline = time.monotonic() + 240
    while run_id is None and time.monotonic() < deadline:
        rows = sql(compose, "select id from scan_run order by id limit 1")
        run_id = rows[0]["id"] if rows else None
        time.sleep(3)
    assert run_id is not None, "the scheduler fired nothing within 4 min"
    compose("stop", "scheduler")   # the cron entry fires every minute: one run is enough
    # one worker dies mid-run, the database restarts
    assert sql(compose, f"select status from scan_run where id = {run_id}")[0]["status"] in ("queued", "running")
    workers = compose("ps", "-q", "worker").stdout.split()
    assert len(workers) == 3, workers
    sh("docker", "kill", workers[0])
    compose("restart", "postgres", timeout=300)
    # `restart` does not wait for the server: until its healthcheck passes, connections get
    # "the database system is starting up" (the workers retry; so does this poll)
    pg = compose("ps", "-q", "postgres").stdout.split()[0]
    deadline = time.monotonic() + 120
    while sh("docker", "inspect", "-f", "{{.State.Health.Status}}", pg).stdout.strip() != "healthy":
        assert time.monotonic() < deadline, "postgres not healthy 2 min after its restart"
        time.sleep(1)
    deadline = time.monotonic() + 900
    status = None
    while time.monotonic() < deadline:
        try:
            rows = sql(compose, f"select status from scan_run where id = {run_id}")
        except AssertionError as exc:
            assert "cannot connect to database" in str(exc), exc
            time.sleep(2)
            continue
        status = rows[0]["status"] if rows else None
        if status not in (None, "queued", "running"):
            break
        time.sleep(5)
    assert status == "finished", status
    counts = sql(compose, f"select hostname, qtype, count(*) as n from dns_ttl_probe where run_id = {run_id} "
                          "group by hostname, qtype")
    # exactly once: one row per target and record type, for every target of the list
    assert {r["hostname"].rstrip(".") for r in counts} == set(names)
    assert all(r["n"] == 1 for r in counts), [r for r in counts if r["n"] != 1]
    retried = sql(compose, "select count(*) as n from procrastinate_jobs "
                           "where task_name = 'netsurvey.scan_shard' and attempts > 1")[0]["n"]
    print(f"compose e2e: {retried} shard job(s) retried after the kill / restart")
    out = compose("--profile", "report", "run", "--rm", "report", timeout=900)
    assert any((data / "reports").iterdir()), out.stdout
    print(f"compose e2e: images built in {build_s:.0f} s, run {run_id} finished")
    check_roles_and_secrets(compose, run_id)


WRITER_DDL = r"""
import os, sys, psycopg
from urllib.parse import quote
pw = open("/run/secrets/db_writer_password").read().strip()
dsn = f"postgresql://netsurvey_writer:{quote(pw, safe='')}@{quote(os.environ['NETSURVEY_DB_HOST'], safe='')}:" \
      f"{os.environ['NETSURVEY_DB_PORT']}/netsurvey"
for stmt in sys.argv[1:]:
    with psycopg.connect(dsn, autocommit=True) as conn:
        try:
            conn.execute(stmt)
            print("ALLOWED", stmt)
        except psycopg.errors.InsufficientPrivilege as exc:
            print("REFUSED", stmt, "|", str(exc).splitlines()[0])
"""


def check_roles_and_secrets(compose, run_id: int) -> None:
    """The roles hold inside the stack, seen from outside: `sql` (netsurvey_reader) cannot
    write, the workers' role (netsurvey_writer) cannot change the schema, and no secret is
    in `docker inspect`, a process's argv (`docker top`) or the run's scan_run row."""
    # `sql` in a worker container reads as netsurvey_reader; writes are refused
    who = compose("run", "--rm", "--no-deps", "worker", "sql", "select current_user as u", "--format", "jsonl")
    assert '"netsurvey_reader"' in who.stdout, who.stdout
    for stmt in ("insert into target_list (name) values ('x')", "create table e2e_x (i int)",
                 "delete from scan_run"):
        p = compose("run", "--rm", "--no-deps", "worker", "sql", stmt, check=False)
        assert p.returncode != 0 and ("read-only" in p.stderr or "permission denied" in p.stderr), (stmt, p.stderr)
    # the writer role: rows yes, schema no
    running = [c for c in compose("ps", "-q", "worker").stdout.split()
               if sh("docker", "inspect", "-f", "{{.State.Running}}", c).stdout.strip() == "true"]
    assert running
    p = sh("docker", "exec", running[0], "python3", "-c", WRITER_DDL, "drop table dns_ttl_probe",
           "alter table scan_run add column e2e int", "create table e2e_x (i int)", "truncate scan_run")
    print("compose e2e: writer role:\n" + p.stdout)
    assert p.stdout.count("REFUSED") == 4, p.stdout
    # no secret in docker inspect (env, args, labels), any process's argv, or scan_run
    secrets = [f.read_text().strip() for f in (ROOT / "secrets").glob("db_*_password")]
    assert len(secrets) == 4 and all(len(x) >= 16 for x in secrets)
    containers = compose("ps", "-q", "--all").stdout.split()
    inspect = sh("docker", "inspect", *containers).stdout
    argv = "".join(sh("docker", "top", c, "-eo", "pid,args", check=False).stdout for c in containers)
    assert "netsurvey" in argv and "postgres" in argv, argv
    row = json.dumps(sql(compose, f"select * from scan_run where id = {run_id}"))
    for x in secrets:
        assert x not in inspect and x not in argv and x not in row
    print(f"compose e2e: {len(containers)} containers, {len(argv.splitlines())} processes: no secret in "
          "docker inspect, argv or scan_run")
