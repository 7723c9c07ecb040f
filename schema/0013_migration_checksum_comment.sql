-- schema_migrations.checksum is added by netsurvey/db.py (issue 21); its comment lives here.
COMMENT ON COLUMN schema_migrations.checksum IS
    'sha256 (hex) of the migration file as applied; an applied file whose content changed is refused';
