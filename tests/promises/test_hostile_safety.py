"""Safety of the scanners themselves (issue 12): names that resolve into loopback, private,
link-local (cloud metadata), IPv4-mapped or public non-testbed addresses are never
contacted - checked at the socket level with strace (every connect/sendto/sendmsg/sendmmsg
of the scanner process and its children) - and each such target is recorded as refused.
"""
from __future__ import annotations

import re
import sys
from pathlib import Path

import psycopg
import pytest

from tests.conftest import REPO, needs_root, run_cli

pytestmark = [needs_root()]

#: How strace prints the forbidden destinations in socket calls.
FORBIDDEN = re.compile(r'inet_addr\("(127\.0\.0\.1|10\.0\.0\.1|8\.8\.8\.8|169\.254\.169\.254)"\)'
                       r'|inet_pton\(AF_INET6, "(::1|::ffff:10\.0\.0\.1)"')


@pytest.fixture
def unsafe(testbed):
    return testbed.status()["ground_truth"]["hostile"]["unsafe_names"]


def _traced_scan(db, tmp_path: Path, *args: str) -> str:
    log = tmp_path / "strace.log"
    p = run_cli("testbed", "exec", "--", "strace", "-f", "-qq", "-e", "trace=connect,sendto,sendmsg,sendmmsg",
                "-o", str(log), sys.executable, "-m", "netsurvey.cli", "--dsn", db.dsn, "scan", *args, timeout=120)
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
    text = log.read_text()
    assert "connect(" in text or "sendto(" in text or "sendmmsg(" in text  # the trace saw the resolver
    return text


def _import(db, tmp_path, names) -> None:
    f = tmp_path / "unsafe.csv"
    f.write_text("".join(f"{i},{n}\n" for i, n in enumerate(names, 1)))
    p = run_cli("targets", "import", str(f), "--list", "unsafe", dsn=db.dsn)
    assert p.returncode == 0, p.stderr


def _rows(db, sql):
    with psycopg.connect(db.dsn) as c:
        return c.execute(sql).fetchall()


def test_tls_never_contacts_unsafe_names(db, tmp_path, unsafe):
    args = ["tls", "--timeout", "1"]
    for n in unsafe:
        args += ["--target", n]
    trace = _traced_scan(db, tmp_path, *args)
    assert not FORBIDDEN.findall(trace), FORBIDDEN.findall(trace)
    rows = _rows(db, "SELECT hostname, status FROM tls_handshake")
    assert {h for h, _ in rows} <= set(unsafe)
    assert all(s != "success" for _, s in rows), rows


def test_tfo_never_contacts_unsafe_names(db, tmp_path, unsafe):
    _import(db, tmp_path, list(unsafe))
    trace = _traced_scan(db, tmp_path, "tfo", "--list", "unsafe", "--all-addresses", "--cooldown", "0.5")
    assert not FORBIDDEN.findall(trace), FORBIDDEN.findall(trace)
    rows = _rows(db, "SELECT hostname, status, reply FROM tfo_probe")
    assert {h for h, _, _ in rows} == set(unsafe), rows
    assert all(r is None for _, _, r in rows), rows   # no reply: nothing was sent


def test_quic_never_contacts_unsafe_names(db, tmp_path, unsafe):
    args = ["quic", "--timeout", "1s", "--no-resume"]
    for n in unsafe:
        args += ["--target", n]
    trace = _traced_scan(db, tmp_path, *args)
    assert not FORBIDDEN.findall(trace), FORBIDDEN.findall(trace)


def test_dns_walk_never_queries_a_nameserver_in_loopback(db, tmp_path):
    """evilns.hostile.test is delegated to ns-lo.hostile.test = 127.0.0.1."""
    trace = _traced_scan(db, tmp_path, "dns-ttl", "--types", "A", "--timeout", "0.5", "--retries", "1",
                         "--name", "www.evilns.hostile.test")
    assert not FORBIDDEN.findall(trace), FORBIDDEN.findall(trace)
    rows = _rows(db, "SELECT outcome FROM dns_ttl_probe")
    assert len(rows) == 1 and rows[0][0] != "answer", rows


def test_trace_detects_a_forbidden_contact(testbed, tmp_path):
    """Control: the same strace check does see a process connecting to 127.0.0.1 and ::1
    (so the checks above can fail)."""
    log = tmp_path / "ctl.log"
    code = ("import socket\nfor fam, a in ((socket.AF_INET, '127.0.0.1'), (socket.AF_INET6, '::1')):\n"
            "    s = socket.socket(fam, socket.SOCK_DGRAM); s.sendto(b'x', (a, 9))\n")
    run_cli("testbed", "exec", "--", "strace", "-f", "-qq", "-e", "trace=connect,sendto,sendmsg,sendmmsg",
            "-o", str(log), sys.executable, "-c", code)
    assert sorted(x for m in FORBIDDEN.findall(log.read_text()) for x in m if x) == ["127.0.0.1", "::1"]


#: Modules whose SQL may contain non-parameter text (identifiers from code, never user data).
def test_sql_is_built_only_with_parameters():
    """Audit: no execute()/copy() call in the repository formats values into SQL text
    (f-strings, %-formatting or .format with user data). Table/column names coming from
    code constants use psycopg.sql.Identifier; the allow-list below names the reviewed
    exceptions (identifiers from code constants only)."""
    repo = REPO
    offenders = []
    for p in repo.rglob("*.py"):
        rel = p.relative_to(repo).as_posix()
        if rel.startswith(("tests/", "fuzz/", "bench/", ".")) or "/." in rel:
            continue
        offenders += [f"{rel}:{o}" for o in _audit(p.read_text(errors="replace").splitlines())]
    assert offenders == [], "SQL built by string formatting of non-identifiers:\n" + "\n".join(offenders)


_CALL = re.compile(r"\.(execute|executemany|copy)\(\s*(f\"|f'|\"[^\"]*\"\s*%|'[^']*'\s*%|\"[^\"]*\"\.format|'[^']*'\.format)")


def _audit(lines: list[str]) -> list[str]:
    out = []
    for i, line in enumerate(lines):
        m = _CALL.search(line)
        if m:
            holes = re.findall(r"\{([^}{]*)\}", _call_text(lines, i, m.start()))
            if not holes or not all(_code_side(h) for h in holes):
                out.append(f"{i + 1}: {line.strip()[:120]} holes={holes}")
    return out


def test_sql_audit_flags_user_data():
    """Control: the audit catches values formatted into SQL."""
    assert _audit(["conn.execute(f\"SELECT * FROM target WHERE hostname = '{host}'\")"])
    assert _audit(["cur.execute(\"DELETE FROM t WHERE id = %d\" % rid)"])
    assert not _audit(["conn.execute(\"SELECT * FROM target WHERE hostname = %s\", (host,))"])


#: Placeholders reviewed to hold only code-side text: table/view names chosen by the code,
#: SQL of registered figures (analysis/figures.py sources), WHERE fragments whose values
#: are themselves %s parameters, temp-table names made from constants.
CODE_SIDE = {"table", "view", "source_sql", "source", "cond", "gaps", "cols", "columns", "name", "where",
             "placeholders", "ident"}


def _call_text(lines: list[str], i: int, col: int) -> str:
    """Text of the call starting at lines[i][col] up to its balancing ')' (naive about
    parentheses inside strings; good enough for an audit)."""
    depth, out = 0, []
    for ln in lines[i:i + 15]:
        seg = ln[col:] if not out else ln
        for j, ch in enumerate(seg):
            depth += ch == "("
            depth -= ch == ")"
            if depth == 0 and ch == ")":
                out.append(seg[:j + 1])
                return "\n".join(out)
        out.append(seg)
    return "\n".join(out)


def _code_side(hole: str) -> bool:
    h = hole.strip()
    return h.split(".")[0].split("[")[0].split("!")[0] in CODE_SIDE or h.startswith(("', HEADER", '", HEADER'))
