"""Analysis reads only the database: no module of analysis/ imports the testbed's code, and
`plot zoo-table` takes the zoos' documented defaults from zoo_documented_default, which
`netsurvey testbed zoo-record` writes (schema/0180)."""
from __future__ import annotations

import ast
import json
import sys
from pathlib import Path

from conftest import run_cli
from support.figures import _csv, _run

ANALYSIS = Path(__file__).resolve().parents[2] / "analysis"


def test_analysis_imports_no_testbed_code():
    found = []
    for path in sorted(ANALYSIS.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            found += [f"{path.relative_to(ANALYSIS.parent)}:{node.lineno} {n}" for n in names
                      if n == "testbed" or n.startswith("testbed.")]
    assert found == []


def test_zoo_record_writes_the_documented_defaults_and_zoo_table_reads_them(db, tmp_path, monkeypatch):
    r = run_cli("testbed", "zoo-record", "--json", dsn=db.dsn)
    assert r.returncode == 0, r.stderr
    rows = json.loads(r.stdout)["rows"]
    assert set(rows) == {"tls", "tls2", "dns", "quic"} and all(n > 0 for n in rows.values()), rows
    with db.connect() as conn:
        got = {(z, label, fact): (value, unit, source, detail) for z, label, fact, value, unit, source, detail in
               conn.execute("SELECT zoo, label, fact, value, unit, source, detail FROM zoo_documented_default")}
        n = conn.execute("SELECT count(*) FROM zoo_documented_default").fetchone()[0]
    assert n == sum(rows.values())
    value, unit, source, _ = got[("tls", "gotls", "tls13_ticket_lifetime_s")]
    assert (value, unit) == (604800, "s") and "maxSessionTicketLifetime" in source
    assert got[("tls", "gotls", "tls13_max_early_data")][0] is None          # documented as absent
    assert got[("dns", "gdnsd", "ttl_min_s")][:2] == (5, "s")
    vn = got[("quic", "quicgo", "vn_versions")]
    assert vn[0] == [1, 0x6B3343CF] and vn[3] == {"greased_extra": 1}
    # recording again replaces, never duplicates
    assert run_cli("testbed", "zoo-record", "--zoo", "dns", dsn=db.dsn).returncode == 0
    with db.connect() as conn:
        assert conn.execute("SELECT count(*) FROM zoo_documented_default").fetchone()[0] == n
    assert run_cli("testbed", "zoo-record", "--zoo", "nope", dsn=db.dsn).returncode == 2

    # zoo-table with the testbed's code out of reach: the documented values come from the database
    with db.connect() as conn:
        tls = _run(conn, "tls")
        conn.execute("INSERT INTO tls_handshake (run_id, hostname, port, version, status, ticket_count,"
                     " ticket_lifetime, ticket_resumed, max_early_data) VALUES (%s, 'gotls.zoo.test', 443, '1.3',"
                     " 'success', 1, 604800, true, NULL)", (tls,))
    for mod in [m for m in sys.modules if m == "testbed" or m.startswith("testbed.")]:
        monkeypatch.delitem(sys.modules, mod)
    monkeypatch.setitem(sys.modules, "testbed", None)       # any `import testbed...` raises ImportError
    from analysis.figures import render

    render(db, "zoo-table", tmp_path, runs=[tls])
    table = {r["fact"]: r for r in _csv(tmp_path / "zoo-table.csv")}
    life = table["tls13_ticket_lifetime_s"]
    assert (life["documented"], life["netsurvey"], life["netsurvey_matches_documented"]) == ("604800", "604800", "yes")
    assert "maxSessionTicketLifetime" in life["documented_source"]
    assert table["tls13_early_data"]["documented"] == "false"


def test_zoo_table_without_recorded_defaults_leaves_documented_empty(db, tmp_path):
    with db.connect() as conn:
        tls = _run(conn, "tls")
        conn.execute("INSERT INTO tls_handshake (run_id, hostname, port, version, status, ticket_count,"
                     " ticket_lifetime) VALUES (%s, 'gotls.zoo.test', 443, '1.3', 'success', 1, 604800)", (tls,))
    from analysis.figures import render

    render(db, "zoo-table", tmp_path, runs=[tls])
    table = {r["fact"]: r for r in _csv(tmp_path / "zoo-table.csv")}
    assert table["tls13_ticket_lifetime_s"]["documented"] == "" and table["tls13_ticket_lifetime_s"]["netsurvey"] == \
        "604800"
