"""The data dictionary: every netsurvey table, view and column carries a comment in the
database (COMMENT ON), and `netsurvey db docs` renders every table the measurements declare.
docs/schema.md is generated on demand (`netsurvey db docs` writes it; it is not committed), so
a new migration needs no hand-regenerated file."""
from __future__ import annotations

from conftest import run_cli
from netsurvey.measure import load_registry
from netsurvey.schemadoc import DEFAULT_OUT, missing_comments, render


def test_every_table_view_and_column_has_a_comment(db):
    with db.connect() as conn:
        missing = missing_comments(conn)
    assert missing == [], f"{len(missing)} without COMMENT ON (add them in a new schema/NNNN_*.sql): {missing[:40]}"


def test_missing_comment_is_caught(db):
    with db.connect() as conn:
        conn.execute("CREATE TABLE zz_undocumented (run_id bigint, value_ms float8)")
        conn.execute("COMMENT ON TABLE zz_undocumented IS 'x'")
        conn.execute("COMMENT ON COLUMN zz_undocumented.run_id IS 'y'")
        assert missing_comments(conn) == ["zz_undocumented.value_ms"]


def test_db_docs_renders_every_declared_table(db, tmp_path):
    out = tmp_path / "schema.md"
    r = run_cli("db", "docs", "--out", str(out), dsn=db.dsn)
    assert r.returncode == 0, r.stderr
    text = out.read_text()
    assert "## tfo_probe" in text and "| `cookie` | bytea |" in text and "## tfo_support_by_cut" in text
    assert "(no comment)" not in text and "## procrastinate" not in text
    with db.connect() as conn:
        assert render(conn) == text
    declared = {t: name for name, m in load_registry().items() for t in m.tables}
    assert len(declared) >= 20, sorted(declared)
    missing = sorted(f"{t} ({name})" for t, name in declared.items() if f"\n## {t}\n" not in text)
    assert not missing, f"tables declared by measurements but not in `netsurvey db docs` (no migration?): {missing}"


def test_data_dictionary_is_generated_not_committed():
    """docs/schema.md is written by `netsurvey db docs` (its default output), git-ignored."""
    assert DEFAULT_OUT.name == "schema.md" and DEFAULT_OUT.parent.name == "docs"
    ignored = (DEFAULT_OUT.parent.parent / ".gitignore").read_text().split()
    assert "/docs/schema.md" in ignored
