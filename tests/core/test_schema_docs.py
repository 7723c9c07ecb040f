"""The data dictionary: every netsurvey table, view and column carries a comment in the
database (COMMENT ON), and docs/schema.md is the one `netsurvey db docs` generates."""
from __future__ import annotations

from conftest import REPO, run_cli
from netsurvey.schemadoc import missing_comments, render


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


def test_docs_schema_md_is_generated_and_current(db, tmp_path):
    out = tmp_path / "schema.md"
    r = run_cli("db", "docs", "--out", str(out), dsn=db.dsn)
    assert r.returncode == 0, r.stderr
    text = out.read_text()
    assert "## tfo_probe" in text and "| `cookie` | bytea |" in text and "## tfo_support_by_cut" in text
    assert "(no comment)" not in text and "## procrastinate" not in text
    with db.connect() as conn:
        assert render(conn) == text
    committed = (REPO / "docs" / "schema.md").read_text()
    assert committed == text, "docs/schema.md is stale: run `netsurvey db docs`"
