"""The connection `netsurvey sql` runs its one statement on.

It uses the read-only role (``Database.reader_dsn``: the embedded server's
``netsurvey_reader``, or NETSURVEY_READER_DSN / ``[database].reader_dsn``), in a read-only
transaction with a statement timeout, and refuses a role that could read or write
server files, run programs or signal other sessions (a superuser, or a member of
pg_read_server_files, pg_write_server_files, pg_execute_server_program,
pg_signal_backend): a read-only transaction does not stop those.
"""
from __future__ import annotations

import psycopg

from .db import Database
from .errors import UsageError

_DANGEROUS_ROLES = ("pg_read_server_files", "pg_write_server_files", "pg_execute_server_program",
                    "pg_signal_backend")


def postgres_message(exc: psycopg.Error) -> str:
    """What the server said, on one line (message, and the detail if any)."""
    diag = exc.diag
    msg = (diag.message_primary or str(exc)).strip().splitlines()[0] if (diag.message_primary or str(exc)).strip() \
        else type(exc).__name__
    if diag.message_detail:
        msg += f" ({diag.message_detail.strip().splitlines()[0]})"
    return msg


def connect_reader(db: Database, statement_timeout_s: float) -> psycopg.Connection:
    """A connection as the read-only role, checked (see module doc)."""
    from .config import finite

    finite(statement_timeout_s, "--timeout-s", positive=True)
    if statement_timeout_s * 1000 > 2**31 - 1:   # PostgreSQL's statement_timeout is an int of ms
        raise UsageError(f"--timeout-s: at most {(2**31 - 1) // 1000} s (got {statement_timeout_s!r})")
    ms = max(1, int(statement_timeout_s * 1000))
    options = f"-c default_transaction_read_only=on -c statement_timeout={ms}"
    try:
        conn = psycopg.connect(db.reader_dsn, options=options)
    except psycopg.Error as exc:
        raise UsageError(f"cannot connect to database: {str(exc).strip().splitlines()[0]}") from None
    conn.read_only = True
    row = conn.execute(
        "SELECT current_user, r.rolsuper, "
        + ", ".join(f"pg_has_role(current_user, '{r}', 'USAGE')" for r in _DANGEROUS_ROLES)
        + " FROM pg_roles r WHERE r.rolname = current_user").fetchone()
    conn.rollback()
    user, superuser, *members = row  # type: ignore[misc]  # the current role's row: always there
    risky = (["superuser"] if superuser else []) + [r for r, m in zip(_DANGEROUS_ROLES, members) if m]
    if risky:
        conn.close()
        raise UsageError(f"sql: role {user!r} is {' and '.join(risky)}, which a read-only transaction does not "
                         "confine; set NETSURVEY_READER_DSN (or [database].reader_dsn) to a read-only role")
    return conn
