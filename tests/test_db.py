"""Migrations against a real PostgreSQL: fresh, re-run, failing."""
import shutil

import psycopg
import pytest

from netsurvey.db import SCHEMA_DIR, migration_files
from netsurvey.errors import MigrationError


def tables(db):
    with db.connect() as conn:
        return {r[0] for r in conn.execute("SELECT tablename FROM pg_tables WHERE schemaname='public'")}


def test_fresh_migrate_creates_core_tables(empty_db):
    applied = empty_db.migrate()
    assert applied == [p.name for p in migration_files()]
    assert {"target_list", "target", "scan_run", "schema_migrations"} <= tables(empty_db)


def test_rerun_is_noop(db):
    assert db.migrate() == []
    with db.connect() as conn:
        n = conn.execute("SELECT count(*) FROM schema_migrations").fetchone()[0]
    assert n == len(migration_files())


def test_failing_migration_leaves_database_unchanged(empty_db, tmp_path):
    for p in migration_files():
        shutil.copy(p, tmp_path / p.name)
    (tmp_path / "9998_good.sql").write_text("CREATE TABLE good_one (x int);")
    (tmp_path / "9999_bad.sql").write_text("CREATE TABLE half_done (x int);\nSELECT * FROM no_such_table;")
    with pytest.raises(MigrationError) as ei:
        empty_db.migrate(tmp_path)
    assert "9999_bad.sql" in str(ei.value) and "no_such_table" in str(ei.value)
    t = tables(empty_db)
    assert "good_one" in t            # earlier migration committed on its own
    assert "half_done" not in t       # failing one rolled back entirely
    with empty_db.connect() as conn:
        versions = {r[0] for r in conn.execute("SELECT version FROM schema_migrations")}
    assert "9999_bad.sql" not in versions and "9998_good.sql" in versions


def test_bad_migration_name_rejected(tmp_path):
    (tmp_path / "1_x.sql").write_text("select 1")
    with pytest.raises(MigrationError):
        migration_files(tmp_path)


def test_status_reports_counts(db):
    st = db.status()
    assert st["pending"] == [] and st["rows"]["target"] == 0
    assert st["server_version"].startswith(("15", "16", "17"))


def test_edited_applied_migration_is_refused_naming_the_file(db, tmp_path):
    for p in migration_files():
        shutil.copy(p, tmp_path / p.name)
    assert db.migrate(tmp_path) == []          # same files, same checksums
    edited = tmp_path / "0002_tfo.sql"
    edited.write_text(edited.read_text() + "\n-- edited after it was applied\n")
    (tmp_path / "9999_new.sql").write_text("CREATE TABLE must_not_appear (x int);")
    with pytest.raises(MigrationError) as ei:
        db.migrate(tmp_path)
    assert "0002_tfo.sql" in str(ei.value) and "edited" in str(ei.value)
    assert "must_not_appear" not in tables(db)   # nothing applied after the refusal
    with db.connect() as conn:
        assert conn.execute("SELECT count(*) FROM schema_migrations WHERE checksum IS NULL").fetchone()[0] == 0


def test_checksums_are_recorded_for_migrations_applied_before_them(db):
    with db.connect() as conn:
        conn.execute("UPDATE schema_migrations SET checksum = NULL")
        conn.commit()
    assert db.migrate() == []
    with db.connect() as conn:
        assert conn.execute("SELECT count(*) FROM schema_migrations WHERE checksum IS NULL").fetchone()[0] == 0
