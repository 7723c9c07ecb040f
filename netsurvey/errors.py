"""Errors that the CLI turns into one line on stderr and exit code 2."""


class UsageError(Exception):
    """Bad input from the user (file, option, config value). Exit code 2, nothing written."""


class MigrationError(Exception):
    """A schema migration failed; the database was left as it was."""

    def __init__(self, filename: str, message: str):
        super().__init__(f"migration {filename} failed: {message}")
        self.filename = filename
