"""The embedded server as an attacker on the same machine would try it (issue 21).

Run as root: the server then runs as the system user netsurvey-db and `nobody` is a
second, unprivileged local user. Every test starts its own embedded server in a fresh
working directory (the conftest server is not used)."""
from __future__ import annotations

import os
import pwd
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import REPO, run_cli

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root (a second local user, the server user)")

ROLES = ["postgres", "netsurvey_owner", "netsurvey_writer", "netsurvey_reader", "nobody", "root"]


def _modes(path: Path) -> dict:
    """mode, owner and group of ``path`` and every ancestor."""
    return {str(p): (p.stat().st_mode, p.stat().st_uid, p.stat().st_gid) for p in [path, *path.parents]}


def _as_nobody_connect(socket_dir: Path) -> list[str]:
    """In a forked child that has become `nobody` (no groups): try the raw socket and every
    role. Returns what worked (should be nothing)."""
    nobody = pwd.getpwnam("nobody")
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # child
        os.close(r)
        worked = []
        try:
            os.setgroups([])
            os.setgid(nobody.pw_gid)
            os.setuid(nobody.pw_uid)
            import psycopg

            s = socket.socket(socket.AF_UNIX)
            try:
                s.connect(str(socket_dir / ".s.PGSQL.5432"))
                worked.append("raw socket")
            except OSError:
                pass
            finally:
                s.close()
            for role in ROLES:
                try:
                    psycopg.connect(host=str(socket_dir), port=5432, user=role, dbname="netsurvey",
                                    connect_timeout=5).close()
                    worked.append(role)
                except Exception:
                    pass
        finally:
            os.write(w, ",".join(worked).encode())
            os._exit(0)
    os.close(w)
    data = b""
    while chunk := os.read(r, 4096):
        data += chunk
    os.close(r)
    os.waitpid(pid, 0)
    return [x for x in data.decode().split(",") if x]


def _postmaster(cwd: Path):
    from netsurvey.embedded import Postmaster

    return Postmaster.read(cwd / ".netsurvey" / "pgdata")


@pytest.mark.parametrize("length", ["short", "long"])
def test_other_local_user_cannot_connect_and_nothing_is_chmodded(server_reachable_dir, length):
    cwd = server_reachable_dir
    if length == "long":
        for part in ("a" * 50, "b" * 50):
            cwd = cwd / part
            cwd.mkdir(mode=0o755)
        assert len(str(cwd)) > 90
    before = _modes(cwd)
    r = run_cli("db", "up", cwd=cwd)
    assert r.returncode == 0, r.stderr
    assert _modes(cwd) == before, "db up changed the permissions of a pre-existing directory"
    pm = _postmaster(cwd)
    server_uid = pwd.getpwnam("netsurvey-db").pw_uid
    st = pm.socket_dir.stat()
    assert (st.st_mode & 0o777, st.st_uid) == (0o700, server_uid)
    if length == "long":
        assert pm.socket_dir != cwd / ".netsurvey" / "pgdata"  # too long for a socket path
    assert Path(f"/proc/{pm.pid}").stat().st_uid == server_uid
    groups = [ln for ln in Path(f"/proc/{pm.pid}/status").read_text().splitlines() if ln.startswith(("Gid:", "Groups:"))]
    assert "0" not in " ".join(groups).replace("Gid:", "").replace("Groups:", "").split(), groups
    hba = [ln.split() for ln in (cwd / ".netsurvey/pgdata/pg_hba.conf").read_text().splitlines()
           if ln.strip() and not ln.startswith("#")]
    assert hba == [["local", "all", "all", "peer", "map=netsurvey"]]
    assert _as_nobody_connect(pm.socket_dir) == []
    # ... while the user who runs netsurvey can
    r = run_cli("sql", "select current_user", "--format", "csv", cwd=cwd)
    assert r.returncode == 0 and "netsurvey_reader" in r.stdout, r.stderr
    assert run_cli("db", "down", cwd=cwd).returncode == 0
    if length == "long":
        assert not pm.socket_dir.exists()  # its private socket directory is removed
    assert _modes(cwd) == before


@pytest.mark.parametrize("what", ["file", "empty dir", "dir with a file"])
def test_data_dir_that_is_not_a_cluster_is_one_line_and_untouched(server_reachable_dir, what):
    cwd = server_reachable_dir
    (cwd / "config").mkdir()
    (cwd / "config" / "survey.toml").write_text('[database]\ndata_dir = "existing"\n')
    target = cwd / "existing"
    if what == "file":
        target.write_text("precious\n")
    else:
        target.mkdir(mode=0o750)
        if what == "dir with a file":
            (target / "notes.txt").write_text("precious\n")
    before = _modes(target)
    listing = sorted(p.name for p in cwd.iterdir())
    r = run_cli("db", "up", cwd=cwd)
    assert r.returncode == 2
    assert len(r.stderr.strip().splitlines()) == 1 and "existing" in r.stderr, r.stderr
    assert _modes(target) == before
    assert sorted(p.name for p in cwd.iterdir()) == listing


def test_parallel_db_up_in_a_fresh_directory(server_reachable_dir):
    env = dict(os.environ, PYTHONPATH=str(REPO))
    env.pop("NETSURVEY_DSN", None)
    procs = [subprocess.Popen([sys.executable, "-m", "netsurvey.cli", "db", "up"], cwd=server_reachable_dir, env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(3)]
    results = [(p.wait(180), p.stderr.read()) for p in procs]
    assert [rc for rc, _ in results] == [0, 0, 0], results
    assert not any("Traceback" in e for _, e in results)
    r = run_cli("db", "status", "--json", cwd=server_reachable_dir)
    assert r.returncode == 0 and '"pending": []' in r.stdout, r.stderr


@pytest.mark.parametrize("args", [["targets", "list"], ["sql", "select 1"], ["runs"], ["db", "status"],
                                  ["plot", "tfo-support", "--out", "figs"], ["report", "--out", "rep"]])
def test_read_commands_without_a_database_create_none(server_reachable_dir, args):
    r = run_cli(*args, cwd=server_reachable_dir)
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert r.stderr.strip() == ("netsurvey: error: no database here; run `netsurvey db up` or set NETSURVEY_DSN"), \
        r.stderr
    assert list(server_reachable_dir.iterdir()) == []


@pytest.fixture(scope="module")
def embedded_cwd():
    import shutil
    import tempfile

    cwd = Path(tempfile.mkdtemp(prefix="netsurvey-test-sql-"))
    cwd.chmod(0o711)
    assert run_cli("db", "up", cwd=cwd).returncode == 0
    yield cwd
    run_cli("db", "down", cwd=cwd)
    shutil.rmtree(cwd, ignore_errors=True)


@pytest.mark.parametrize("query,said", [
    ("copy (select 1) to program 'id > /tmp/netsurvey-pwned'", "external program"),
    ("copy (select 1) to '/tmp/netsurvey-pwned'", "COPY to a file"),
    ("copy target from '/etc/passwd'", "COPY from a file"),
    ("copy target from program 'id'", "external program"),
    ("select pg_read_file('/etc/passwd')", "permission denied for function pg_read_file"),
    ("select pg_read_binary_file('/etc/passwd')", "permission denied for function pg_read_binary_file"),
    ("select pg_ls_dir('/')", "permission denied for function pg_ls_dir"),
    ("select pg_stat_file('/etc/passwd')", "permission denied for function pg_stat_file"),
    ("select pg_terminate_backend(pid) from pg_stat_activity", "permission denied for function pg_terminate_backend"),
    ("select pg_cancel_backend(pg_backend_pid())", "permission denied for function pg_cancel_backend"),
    ("select pg_reload_conf()", "permission denied for function pg_reload_conf"),
    # an advisory lock held by a reader would stall `db migrate` (issue 20 adversary)
    ("select pg_advisory_lock(727274), pg_sleep(1)", "permission denied for function pg_advisory_lock"),
    ("select pg_try_advisory_xact_lock(1, 2)", "permission denied for function pg_try_advisory_xact_lock"),
    ("select lo_import('/etc/passwd')", "permission denied for function lo_import"),
    ("delete from target", "read-only transaction"),
    ("create table evil (x int)", "read-only transaction"),
    ("alter system set log_min_messages = debug5", "ALTER SYSTEM"),
    ("select set_config('log_statement', 'all', false)", "permission denied to set parameter"),
])
def test_sql_refuses_file_program_and_admin_access(embedded_cwd, query, said):
    r = run_cli("sql", query, cwd=embedded_cwd)
    assert r.returncode == 2, r.stdout
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("netsurvey: error: query failed: ") and said in lines[0], lines
    assert not Path("/tmp/netsurvey-pwned").exists()


def test_sql_times_out_and_defaults_to_five_minutes(embedded_cwd):
    t0 = time.monotonic()
    r = run_cli("sql", "select pg_sleep(20)", "--timeout-s", "0.5", cwd=embedded_cwd)
    assert r.returncode == 2 and "statement timeout" in r.stderr, r.stderr
    assert time.monotonic() - t0 < 15
    r = run_cli("sql", "select current_setting('statement_timeout') as t, current_user as u", "--format", "csv",
                cwd=embedded_cwd)
    assert r.stdout.split() == ["t,u", "5min,netsurvey_reader"], r.stderr


def test_sql_reads_the_schema(embedded_cwd):
    r = run_cli("sql", "select count(*) as n from target", "--format", "csv", cwd=embedded_cwd)
    assert r.returncode == 0 and r.stdout.split() == ["n", "0"], r.stderr


def test_crash_recovery_is_waited_for(embedded_cwd):
    pm = _postmaster(embedded_cwd)
    os.kill(pm.pid, signal.SIGKILL)
    deadline = time.monotonic() + 30
    while Path(f"/proc/{pm.pid}").exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    r = run_cli("sql", "select 1 as one", "--format", "csv", cwd=embedded_cwd, timeout=400)
    assert r.returncode == 0 and r.stdout.split() == ["one", "1"], r.stderr
    assert "Traceback" not in r.stderr


def test_dsns_are_printed_with_the_password_masked(db):
    from psycopg.conninfo import make_conninfo

    from netsurvey.db import mask_dsn

    assert mask_dsn("postgresql://u:s3cret@h/db?sslmode=disable") == "postgresql://u:****@h/db?sslmode=disable"
    assert "s3cret" not in mask_dsn("host=h user=u password=s3cret")
    assert "s3cret" not in mask_dsn("postgresql://u@h/db?password=s3cret")
    # a password the server ignores (peer authentication) still must not be printed
    dsn = make_conninfo(db.dsn, password="s3cret")
    for args in (["db", "status"], ["db", "status", "--json"], ["db", "up"]):
        r = run_cli(*args, dsn=dsn)
        assert r.returncode == 0 and "s3cret" not in r.stdout + r.stderr and "****" in r.stdout, r.stderr


def test_a_dsn_libpq_cannot_parse_is_refused_without_its_password(tmp_path):
    """libpq quotes the URI it could not parse, password and all; the one-line error printed
    it (review attack, issue 20)."""
    for dsn in ("postgresql://u:s3cret@[::1/db", "host=h passwords3cret", "postgresql://u:s3cret@h/db?s3cret=1"):
        for env in ({"NETSURVEY_DSN": dsn}, None):
            r = run_cli(*(["--dsn", dsn] if env is None else []), "targets", "list", env=env, cwd=tmp_path)
            assert r.returncode == 2 and "not a libpq connection string" in r.stderr, r.stderr
            assert "s3cret" not in r.stdout + r.stderr, r.stderr


def test_binaries_copied_for_a_server_user_that_cannot_reach_site_packages():
    """As root with /root at 0700 the server user cannot run pgserver's binaries in
    place; netsurvey copies them once into /var/lib/netsurvey (never chmods /root)."""
    from netsurvey import embedded

    user = embedded._service_user()
    bindir = embedded._binaries_for(user, copy=True) / "bin"
    assert str(bindir).startswith("/var/lib/netsurvey/")
    for tool in ("initdb", "pg_ctl", "postgres"):
        r = embedded._run_as(user, [str(bindir / tool), "--version"], timeout=30)
        assert r.returncode == 0 and "16." in r.stdout, (tool, r.stderr)


def test_cluster_of_an_earlier_version_is_adopted(server_reachable_dir):
    """Earlier versions kept everything in database `postgres`, owned by the superuser:
    it becomes `netsurvey`, owned with its objects by netsurvey_owner."""
    import psycopg

    from netsurvey import embedded
    from netsurvey.db import Database, stop_embedded

    data = server_reachable_dir / "pg"
    user = embedded._service_user()
    bindir = embedded._binaries_for(user) / "bin"
    embedded._initdb(data, user, bindir)
    pm = embedded._start(data, user, bindir)
    try:
        with psycopg.connect(embedded._superuser_conninfo(pm, "postgres"), autocommit=True) as c:
            c.execute("CREATE TABLE schema_migrations (version text PRIMARY KEY)")
            c.execute("INSERT INTO schema_migrations VALUES ('0001_core.sql')")
            c.execute("CREATE TYPE mood AS ENUM ('a', 'b'); CREATE TABLE t (id bigserial PRIMARY KEY, m mood)")
            c.execute("INSERT INTO t (m) VALUES ('a'); CREATE VIEW v AS SELECT * FROM t")
        db = Database.resolve(None, data)
        with psycopg.connect(db.dsn) as c:
            assert c.execute("SELECT current_user, current_database(), (SELECT count(*) FROM t)").fetchone() == \
                ("netsurvey_owner", "netsurvey", 1)
            c.execute("INSERT INTO t (m) VALUES ('b')")  # owns the table, its sequence and type
            c.execute("DROP VIEW v")
    finally:
        stop_embedded(data)


def test_command_lines_are_recorded_without_passwords():
    """scan_run.vantage.argv and queued runs record the command line through mask_argv."""
    from netsurvey.secrets import mask_argv

    argv = ["--dsn", "postgresql://u:s3cret@h/db", "--dsn=host=h password=s3cret", "scan", "tls",
            "postgresql://u@h/db?password=s3cret", "host=h password=s3cret", "https://u:s3cret@a.test/",
            "--list", "top"]
    masked = mask_argv(argv)
    assert not any("s3cret" in a for a in masked), masked
    assert masked[3:5] == ["scan", "tls"] and masked[-2:] == ["--list", "top"]
