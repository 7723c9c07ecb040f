"""Migrations against a real PostgreSQL: fresh, re-run, failing."""
import shutil

import pytest

from netsurvey.db import migration_files
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
        n = conn.execute("SELECT count(*) FROM schema_migrations WHERE version NOT LIKE 'procrastinate/%'"
                         ).fetchone()[0]
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
        assert conn.execute("SELECT count(*) FROM schema_migrations WHERE checksum IS NULL"
                            " AND version NOT LIKE 'procrastinate/%'").fetchone()[0] == 0


def test_queue_schema_comes_from_procrastinates_own_files(db):
    from netsurvey.db import procrastinate_migration_files

    queue = procrastinate_migration_files()
    assert queue, "procrastinate's migration files not found"
    with db.connect() as conn:
        assert conn.execute("SELECT to_regclass('procrastinate_jobs') IS NOT NULL").fetchone()[0]
        versions = {r[0] for r in conn.execute("SELECT version FROM schema_migrations")}
        assert {f"procrastinate/{q.name}" for q in queue} <= versions
        # as if the newest procrastinate migration (re-runnable: DROP ... IF EXISTS, CREATE)
        # had not been applied yet: migrate applies it from procrastinate's file
        conn.execute("DELETE FROM schema_migrations WHERE version = %s", (f"procrastinate/{queue[-1].name}",))
        conn.execute("DROP TRIGGER procrastinate_trigger_status_events_update_v1 ON procrastinate_jobs")
        conn.commit()
    assert db.migrate() == []  # netsurvey's own: none pending
    with db.connect() as conn:
        assert conn.execute("SELECT 1 FROM schema_migrations WHERE version = %s",
                            (f"procrastinate/{queue[-1].name}",)).fetchone()
        assert conn.execute("SELECT 1 FROM pg_trigger WHERE tgname = 'procrastinate_trigger_status_events_update_v1'"
                            ).fetchone()
