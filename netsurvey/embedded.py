"""The embedded PostgreSQL 16 (binaries from pgserver), run safely.

Only pgserver's binaries are used; its server manager is not (it widens the permissions
of the working directory and its ancestors, chowns whatever data directory it is given,
puts the socket of long paths into a world-writable directory and uses ``trust``).

What this module guarantees:

* The server never runs as root. Run as root, it runs as the system user
  ``netsurvey-db`` (created once, no login shell, no supplementary groups); run as any
  other user, as that user.
* Its data directory is created here (mode 0700, owned by the server user) and nothing
  that existed before is chowned or chmodded. A ``data_dir`` that exists but is not an
  initialised cluster is an error, as is one the server user cannot reach.
* It listens on no TCP port, only on a Unix socket in the data directory, or, when that
  path is too long for a socket, in a fresh private directory (``mkdtemp``: 0700, owned
  by the server user). Authentication is ``peer``: only the operating-system user that
  runs netsurvey (``pg_ident.conf``) may connect, as one of the roles below.
* Roles (see ``ROLES_SQL``): ``netsurvey_owner`` migrates and writes (CREATEDB, no
  superuser), ``netsurvey_writer`` reads and writes rows, ``netsurvey_reader`` only reads
  (default ``statement_timeout`` 5 min, read-only transactions); the reader is what
  ``netsurvey sql`` uses. No role can read or write server files or run programs; the
  reader cannot signal other sessions or reload the configuration either.
* Start and initdb run under an exclusive ``fcntl`` lock (parallel ``db up`` is safe);
  crash recovery is waited for; failures are one line naming the server log.
"""
from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator, Optional

from .errors import UsageError

SERVICE_USER = "netsurvey-db"
OWNER_ROLE, WRITER_ROLE, READER_ROLE = "netsurvey_owner", "netsurvey_writer", "netsurvey_reader"
DATABASE = "netsurvey"
PORT = 5432
#: How long `pg_ctl -w start` may take (crash recovery of a large cluster included).
START_TIMEOUT_S = 300
_SOCKET_NAME = f".s.PGSQL.{PORT}"
_SOCKET_MAX_BYTES = 107  # sun_path is 108 bytes with the terminating NUL
_TEMP_SOCKET_PREFIX = "netsurvey-pg-"
_BOOTSTRAPPED = "netsurvey.bootstrapped"
_NOT_A_CLUSTER = ("data_dir {data_dir} exists but is not an initialised PostgreSQL cluster; point "
                  "[database].data_dir at a new path (it is created) or at a cluster")
NO_DATABASE = "no database here; run `netsurvey db up` or set NETSURVEY_DSN"


# -- binaries and the server user ----------------------------------------------------
def _pginstall() -> Path:
    import importlib.util

    spec = importlib.util.find_spec("pgserver")  # only its binaries; importing it has side effects
    if spec is None or not spec.submodule_search_locations:
        raise UsageError("the embedded server needs the Python package pgserver (pip install pgserver)")
    return Path(list(spec.submodule_search_locations)[0]) / "pginstall"


@dataclass(frozen=True)
class ServerUser:
    name: str
    uid: int
    gid: int

    @classmethod
    def of_uid(cls, uid: int) -> "ServerUser":
        pw = pwd.getpwuid(uid)
        return cls(pw.pw_name, pw.pw_uid, pw.pw_gid)


def _service_user() -> ServerUser:
    """The user the server runs as: ourselves, or (as root) ``netsurvey-db``."""
    if os.geteuid() != 0:
        return ServerUser.of_uid(os.geteuid())
    try:
        pw = pwd.getpwnam(SERVICE_USER)
    except KeyError:
        r = subprocess.run(["useradd", "--system", "--user-group", "--no-create-home", "--home-dir", "/nonexistent",
                            "--shell", "/usr/sbin/nologin", "--comment", "netsurvey embedded PostgreSQL",
                            SERVICE_USER], capture_output=True, text=True)
        if r.returncode not in (0, 9):  # 9: created meanwhile by another process
            raise UsageError(f"cannot create the system user {SERVICE_USER!r}: {r.stderr.strip()}") from None
        pw = pwd.getpwnam(SERVICE_USER)
    return ServerUser(pw.pw_name, pw.pw_uid, pw.pw_gid)


def _can_search(path: Path, user: ServerUser, want: int = 0o1) -> bool:
    """Whether ``user`` (no supplementary groups) has permission ``want`` (1=x, 4=r) on ``path``."""
    st = path.stat()
    if user.uid == 0:
        return True
    if st.st_uid == user.uid:
        return bool(st.st_mode & (want << 6))
    if st.st_gid == user.gid:
        return bool(st.st_mode & (want << 3))
    return bool(st.st_mode & want)


def _blocking_ancestor(path: Path, user: ServerUser) -> Optional[Path]:
    for p in reversed([path, *path.parents]):
        if p.exists() and not _can_search(p, user):
            return p
    return None


def _binaries_for(user: ServerUser, copy: bool | None = None) -> Path:
    """The pginstall directory ``user`` can execute: pgserver's own, or (when the server
    user cannot reach site-packages, e.g. under a 0700 /root; or with ``copy``) a copy
    made once into /var/lib/netsurvey, a directory created here. The copy keeps the
    layout the binaries' run paths expect (pgserver/pginstall next to pgserver.libs)."""
    src = _pginstall()
    postgres = src / "bin" / "postgres"
    if copy is None:
        copy = _blocking_ancestor(postgres, user) is not None or not _can_search(postgres, user)
    if not copy:
        return src
    st = postgres.stat()
    tag = hashlib.sha256(f"{src}:{st.st_size}:{st.st_mtime_ns}".encode()).hexdigest()[:12]
    base = Path("/var/lib/netsurvey")
    dest = base / f"pg-{tag}"
    if not dest.exists():
        base.mkdir(mode=0o755, parents=True, exist_ok=True)
        with _locked(base / ".pginstall.lock"):
            if not dest.exists():
                tmp = Path(tempfile.mkdtemp(prefix=".pg-", dir=base))
                try:
                    shutil.copytree(src, tmp / "pgserver" / "pginstall", symlinks=True)
                    libs = src.parent.parent / "pgserver.libs"
                    if libs.is_dir():
                        shutil.copytree(libs, tmp / "pgserver.libs", symlinks=True)
                    for d, _dirs, files in os.walk(tmp):
                        os.chmod(d, 0o755)
                        for f in files:
                            fp = Path(d) / f
                            if not fp.is_symlink():
                                fp.chmod(0o755 if fp.stat().st_mode & 0o100 else 0o644)
                    tmp.rename(dest)
                except BaseException:
                    shutil.rmtree(tmp, ignore_errors=True)
                    raise
    return dest / "pgserver" / "pginstall"


# -- locking ---------------------------------------------------------------------------
@contextlib.contextmanager
def _locked(lock_file: Path) -> Iterator[None]:
    fd = os.open(lock_file, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # releases the lock


def _lock_path(data_dir: Path) -> Path:
    return data_dir.parent / f".{data_dir.name}.lock"


# -- the cluster -----------------------------------------------------------------------
def is_cluster(data_dir: Path) -> bool:
    return (data_dir / "PG_VERSION").is_file() and (data_dir / "global" / "pg_control").is_file()


@dataclass(frozen=True)
class Postmaster:
    pid: int
    socket_dir: Path
    status: str

    @classmethod
    def read(cls, data_dir: Path) -> Optional["Postmaster"]:
        """The running postmaster of ``data_dir`` (None when none runs)."""
        try:
            lines = (data_dir / "postmaster.pid").read_text().splitlines()
            pid = int(lines[0])
        except (OSError, ValueError, IndexError):
            return None
        try:
            comm = Path(f"/proc/{pid}/comm").read_text().strip()
        except OSError:
            return None
        if comm not in ("postgres", "postmaster"):
            return None  # a stale file whose pid was reused
        sock = lines[4].strip() if len(lines) > 4 else ""
        status = lines[7].strip() if len(lines) > 7 else ""
        return cls(pid, Path(sock) if sock else data_dir, status)


def _run_as(user: ServerUser, argv: list[str], timeout: float, **kw) -> subprocess.CompletedProcess:
    """Run a server binary as ``user``: its own uid and gid, no supplementary groups, a
    minimal environment (no password ever on a command line: there is none)."""
    env = {"PATH": "/usr/bin:/bin", "LC_ALL": "C.UTF-8", "LANG": "C.UTF-8", "HOME": "/nonexistent"}
    extra: dict[str, Any] = {}
    if os.geteuid() == 0 and user.uid != 0:
        extra = dict(user=user.uid, group=user.gid, extra_groups=[])
    return subprocess.run(argv, env=env, cwd="/", stdin=subprocess.DEVNULL, capture_output=True, text=True,
                          timeout=timeout, **extra, **kw)


def _hba(client: str) -> tuple[str, str]:
    hba = ("# Written by netsurvey on every start; edits are overwritten.\n"
           "# Unix socket only (no TCP listener), peer authentication through the map in\n"
           "# pg_ident.conf: only the operating-system user that runs netsurvey may connect.\n"
           "local all all peer map=netsurvey\n")
    ident = ("# Written by netsurvey on every start: OS user -> database roles it may use.\n"
             + "".join(f"netsurvey {client} {role}\n" for role in ("postgres", OWNER_ROLE, WRITER_ROLE, READER_ROLE)))
    return hba, ident


def _write_owned(path: Path, text: str, user: ServerUser, mode: int = 0o600) -> None:
    tmp = path.with_name(path.name + ".netsurvey-tmp")
    tmp.write_text(text)
    os.chmod(tmp, mode)
    if os.geteuid() == 0:
        os.chown(tmp, user.uid, user.gid)
    tmp.replace(path)


def _initdb(data_dir: Path, user: ServerUser, bindir: Path) -> None:
    """initdb into a fresh sibling directory, then rename it into place (atomic)."""
    parent = data_dir.parent
    work = Path(tempfile.mkdtemp(prefix=f".{data_dir.name}.init-", dir=parent))  # 0700, ours
    try:
        if os.geteuid() == 0:
            os.chown(work, user.uid, user.gid)
        r = _run_as(user, [str(bindir / "initdb"), "-D", str(work), "-U", "postgres", "--encoding=UTF8",
                           "--locale=C.UTF-8", "--auth-local=peer", "--auth-host=reject", "--no-instructions"],
                    timeout=300)
        if r.returncode != 0:
            last = (r.stderr.strip().splitlines() or ["(no output)"])[-1]
            raise UsageError(f"initdb failed for {data_dir}: {last}")
        work.rename(data_dir)
    except BaseException:
        shutil.rmtree(work, ignore_errors=True)
        raise


def _socket_dir(data_dir: Path, user: ServerUser) -> Path:
    """The data directory if a socket path in it fits, else a fresh private directory."""
    if len(os.fsencode(data_dir / _SOCKET_NAME)) <= _SOCKET_MAX_BYTES:
        return data_dir
    for base in (tempfile.gettempdir(), "/tmp"):
        if len(os.fsencode(Path(base) / (_TEMP_SOCKET_PREFIX + "x" * 8) / _SOCKET_NAME)) <= _SOCKET_MAX_BYTES:
            d = Path(tempfile.mkdtemp(prefix=_TEMP_SOCKET_PREFIX, dir=base))  # 0700, created here
            if os.geteuid() == 0:
                os.chown(d, user.uid, user.gid)
            return d
    raise UsageError(f"no directory short enough for the embedded server's socket (data_dir {data_dir})")


def _tail(log: Path, n: int = 1) -> str:
    try:
        lines = [ln for ln in log.read_text(errors="replace").splitlines() if ln.strip()]
    except OSError:
        return "(no server log)"
    return " | ".join(lines[-n:]) or "(empty server log)"


def _start(data_dir: Path, user: ServerUser, bindir: Path) -> Postmaster:
    hba, ident = _hba(pwd.getpwuid(os.geteuid()).pw_name)
    _write_owned(data_dir / "pg_hba.conf", hba, user)
    _write_owned(data_dir / "pg_ident.conf", ident, user)
    sock = _socket_dir(data_dir, user)
    log = data_dir / "log"
    argv = [str(bindir / "pg_ctl"), "-D", str(data_dir), "-w", "-t", str(START_TIMEOUT_S), "-l", str(log),
            "-o", f"-c listen_addresses='' -c unix_socket_directories='{sock}' -c unix_socket_permissions=0700 "
                  f"-p {PORT}", "start"]
    try:
        r = _run_as(user, argv, timeout=START_TIMEOUT_S + 30)
    except subprocess.TimeoutExpired:
        raise UsageError(f"the embedded server did not become ready in {START_TIMEOUT_S} s: "
                         f"{_tail(log)} (log: {log})") from None
    pm = Postmaster.read(data_dir)
    if r.returncode != 0 or pm is None:
        if sock != data_dir:
            shutil.rmtree(sock, ignore_errors=True)
        raise UsageError(f"the embedded server did not start: {_tail(log)} (log: {log})")
    return pm


def owner_of_cluster(data_dir: Path) -> ServerUser:
    return ServerUser.of_uid(data_dir.stat().st_uid)


def ensure_running(data_dir: Path, create: bool = True) -> Postmaster:
    """Start (and, with ``create``, first initialise) the cluster in ``data_dir``; return
    its running postmaster. Every error is one line (:class:`UsageError`)."""
    data_dir = data_dir.absolute()
    pm = _ready(data_dir)
    if pm is not None:
        return pm
    if not create and not is_cluster(data_dir):
        raise UsageError(NO_DATABASE)
    user = _service_user()
    if data_dir.exists() and not data_dir.is_dir():
        raise UsageError(f"data_dir {data_dir} exists and is not a directory")
    if data_dir.exists() and not is_cluster(data_dir):
        raise UsageError(_NOT_A_CLUSTER.format(data_dir=data_dir))
    blocked = _blocking_ancestor(data_dir.parent, user)
    if blocked is not None:
        raise UsageError(f"the embedded server runs as {user.name!r}, which cannot enter {blocked} "
                         f"(mode {blocked.stat().st_mode & 0o777:04o}); set [database].data_dir to a directory "
                         "it can reach (netsurvey changes no permissions) or set NETSURVEY_DSN")
    try:
        data_dir.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"cannot create {data_dir.parent}: {exc.strerror}") from None
    blocked = _blocking_ancestor(data_dir.parent, user)
    if blocked is not None:  # a directory just created under a restrictive umask
        raise UsageError(f"the embedded server runs as {user.name!r}, which cannot enter {blocked}; "
                         "set [database].data_dir to a directory it can reach or set NETSURVEY_DSN")
    with _locked(_lock_path(data_dir)):
        pm = _ready(data_dir)
        if pm is not None:
            return pm
        pm = Postmaster.read(data_dir) if data_dir.is_dir() else None
        fresh = False
        if not data_dir.exists():
            if not create:
                raise UsageError(NO_DATABASE)
            bindir = _binaries_for(user) / "bin"
            _initdb(data_dir, user, bindir)
            fresh = True
        elif not is_cluster(data_dir):
            raise UsageError(_NOT_A_CLUSTER.format(data_dir=data_dir))
        owner = owner_of_cluster(data_dir)
        if owner.uid == 0:
            raise UsageError(f"data_dir {data_dir} is owned by root; the server never runs as root")
        if os.geteuid() != 0 and owner.uid != os.geteuid():
            raise UsageError(f"data_dir {data_dir} belongs to {owner.name!r}; only that user (or root) can start it")
        bindir = _binaries_for(owner) / "bin"
        if pm is not None:  # starting up or in crash recovery: wait for it
            pm = _wait_ready(data_dir, START_TIMEOUT_S)
        else:
            pm = _start(data_dir, owner, bindir)
        _bootstrap(pm, fresh)
        if not (data_dir / _BOOTSTRAPPED).exists():
            _write_owned(data_dir / _BOOTSTRAPPED, "roles and database created by netsurvey\n", owner, 0o600)
        return pm


def _ready(data_dir: Path) -> Optional[Postmaster]:
    """The postmaster, if it runs, is ready and the roles exist (no lock needed)."""
    try:
        if not (data_dir / _BOOTSTRAPPED).exists():
            return None
    except OSError:
        return None
    pm = Postmaster.read(data_dir)
    return pm if pm is not None and pm.status == "ready" else None


def _wait_ready(data_dir: Path, timeout_s: float) -> Postmaster:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        pm = Postmaster.read(data_dir)
        if pm is None:
            raise UsageError(f"the embedded server stopped while starting: {_tail(data_dir / 'log')}")
        if pm.status == "ready":
            return pm
        time.sleep(0.2)
    raise UsageError(f"the embedded server did not become ready in {timeout_s:.0f} s: {_tail(data_dir / 'log')}")


#: Run as the bootstrap superuser in template1 and in the netsurvey database (so every
#: database created later inherits the revocations). Idempotent.
#: Advisory locks (PostgreSQL grants them to PUBLIC): migrations and the writers serialise
#: on them, so the read-only `sql` role could hold one for its whole statement timeout and
#: stall `db migrate` (found by the issue-20 adversary). Only owner and writer keep them.
ADVISORY_LOCK_FUNCTIONS = ", ".join(
    f"pg_{t}advisory{x}_lock{s}({a})" for t in ("", "try_") for x in ("", "_xact") for s in ("", "_shared")
    for a in ("bigint", "integer, integer"))

REVOKE_SQL = f"""
REVOKE EXECUTE ON FUNCTION pg_terminate_backend(integer, bigint), pg_cancel_backend(integer),
  pg_reload_conf(), pg_rotate_logfile() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION pg_terminate_backend(integer, bigint), pg_cancel_backend(integer)
  TO netsurvey_owner, netsurvey_writer;
REVOKE EXECUTE ON FUNCTION {ADVISORY_LOCK_FUNCTIONS} FROM PUBLIC;
GRANT EXECUTE ON FUNCTION {ADVISORY_LOCK_FUNCTIONS} TO netsurvey_owner, netsurvey_writer;
"""

ROLES_SQL = f"""
DO $$ BEGIN
  IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = '{OWNER_ROLE}') THEN
    CREATE ROLE {OWNER_ROLE} LOGIN CREATEDB NOSUPERUSER NOCREATEROLE NOREPLICATION NOBYPASSRLS;
  END IF;
  IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = '{WRITER_ROLE}') THEN
    CREATE ROLE {WRITER_ROLE} LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION NOBYPASSRLS;
  END IF;
  IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = '{READER_ROLE}') THEN
    CREATE ROLE {READER_ROLE} LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION NOBYPASSRLS;
  END IF;
END $$;
ALTER ROLE {READER_ROLE} SET default_transaction_read_only = on;
ALTER ROLE {READER_ROLE} SET statement_timeout = '5min';
"""


def _superuser_conninfo(pm: Postmaster, dbname: str) -> str:
    from psycopg.conninfo import make_conninfo

    return make_conninfo(host=str(pm.socket_dir), port=PORT, user="postgres", dbname=dbname)


def _bootstrap(pm: Postmaster, fresh: bool) -> None:
    """Create the roles and the netsurvey database (idempotent; cheap when done). A
    cluster made by earlier versions (pgserver: everything in database ``postgres``,
    owned by the superuser) is adopted: that database becomes ``netsurvey``, owned, with
    its objects, by netsurvey_owner."""
    import psycopg
    from psycopg import sql

    try:
        with psycopg.connect(_superuser_conninfo(pm, "template1"), autocommit=True) as conn:
            has_db = bool(conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (DATABASE,)).fetchone())
            if not fresh and has_db and conn.execute(
                    "SELECT count(*) FROM pg_roles WHERE rolname IN (%s, %s, %s)",
                    (OWNER_ROLE, WRITER_ROLE, READER_ROLE)).fetchone()[0] == 3:  # type: ignore[index]  # count(*): one row
                return
            conn.execute(ROLES_SQL)
            conn.execute(REVOKE_SQL)  # template1: every database created later inherits it
            if not has_db:
                with psycopg.connect(_superuser_conninfo(pm, "postgres"), autocommit=True) as old:
                    legacy = old.execute("SELECT to_regclass('public.schema_migrations') IS NOT NULL").fetchone()[0]  # type: ignore[index]  # one row
                if legacy:
                    conn.execute(sql.SQL("ALTER DATABASE postgres RENAME TO {}").format(sql.Identifier(DATABASE)))
                    conn.execute(sql.SQL("ALTER DATABASE {} OWNER TO {}").format(sql.Identifier(DATABASE),
                                                                                 sql.Identifier(OWNER_ROLE)))
                    conn.execute("CREATE DATABASE postgres")
                else:
                    conn.execute(sql.SQL("CREATE DATABASE {} OWNER {}").format(sql.Identifier(DATABASE),
                                                                               sql.Identifier(OWNER_ROLE)))
                with psycopg.connect(_superuser_conninfo(pm, DATABASE), autocommit=True) as c3:
                    if legacy:
                        _reassign_public(c3)
                    c3.execute(REVOKE_SQL)
    except psycopg.Error as exc:
        raise UsageError(f"cannot prepare the embedded server's roles: {str(exc).strip().splitlines()[0]}") from None


def _reassign_public(conn) -> None:
    """Give netsurvey_owner every object of schema public (tables with their sequences,
    views, free sequences, functions, types) owned by the bootstrap superuser."""
    from psycopg import sql

    objs = conn.execute("""
        SELECT CASE c.relkind WHEN 'v' THEN 'VIEW' WHEN 'm' THEN 'MATERIALIZED VIEW' WHEN 'S' THEN 'SEQUENCE'
                              ELSE 'TABLE' END, c.oid::regclass::text
        FROM pg_class c
        WHERE c.relnamespace = 'public'::regnamespace AND c.relkind IN ('r', 'p', 'v', 'm', 'S', 'f')
          AND pg_get_userbyid(c.relowner) = 'postgres'
          AND NOT EXISTS (SELECT FROM pg_depend d WHERE d.classid = 'pg_class'::regclass AND d.objid = c.oid
                          AND d.deptype IN ('a', 'i'))
        UNION ALL
        SELECT 'ROUTINE', p.oid::regprocedure::text FROM pg_proc p
        WHERE p.pronamespace = 'public'::regnamespace AND pg_get_userbyid(p.proowner) = 'postgres'
        UNION ALL
        SELECT 'TYPE', t.oid::regtype::text FROM pg_type t
        WHERE t.typnamespace = 'public'::regnamespace AND pg_get_userbyid(t.typowner) = 'postgres'
          AND t.typtype IN ('e', 'd', 'r') """).fetchall()
    kinds = {"VIEW", "MATERIALIZED VIEW", "SEQUENCE", "TABLE", "ROUTINE", "TYPE"}
    for kind, name in objs:  # kind is one of ours; name is the catalog's own quoted rendering (regclass etc.)
        assert kind in kinds
        conn.execute(sql.SQL("ALTER " + kind + " {} OWNER TO {}").format(sql.SQL(name), sql.Identifier(OWNER_ROLE)))


def conninfo(pm: Postmaster, role: str, dbname: str = DATABASE) -> str:
    from psycopg.conninfo import make_conninfo

    return make_conninfo(host=str(pm.socket_dir), port=PORT, user=role, dbname=dbname)


def stop(data_dir: Path) -> bool:
    """Stop the server of ``data_dir`` if it runs. Returns True if one was stopped."""
    data_dir = data_dir.absolute()
    pm = Postmaster.read(data_dir) if data_dir.is_dir() else None
    if pm is None:
        return False
    owner = owner_of_cluster(data_dir)
    bindir = _binaries_for(owner) / "bin"
    r = _run_as(owner, [str(bindir / "pg_ctl"), "-D", str(data_dir), "-w", "-t", "120", "stop", "-m", "fast"],
                timeout=150)
    if r.returncode != 0:
        raise UsageError(f"could not stop the embedded server: {(r.stderr.strip().splitlines() or ['?'])[-1]}")
    if pm.socket_dir != data_dir and pm.socket_dir.name.startswith(_TEMP_SOCKET_PREFIX):
        shutil.rmtree(pm.socket_dir, ignore_errors=True)
    return True


def socket_works(path: Path) -> bool:  # used by tests
    s = socket.socket(socket.AF_UNIX)
    try:
        s.connect(str(path))
        return True
    except OSError:
        return False
    finally:
        s.close()
