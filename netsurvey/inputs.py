"""Checks of command-line inputs shared by several commands: each raises UsageError
(one line, exit 2) before anything is written."""
from __future__ import annotations

from pathlib import Path
from typing import Sequence

from .errors import UsageError


def output_dir(path: Path, option: str = "--out") -> Path:
    """``path`` as a directory to write into: it, or the first existing ancestor, must be a
    directory (not a file)."""
    for p in [path, *path.parents]:
        if p.exists():
            if not p.is_dir():
                raise UsageError(f"{option}: {p} exists and is not a directory")
            break
    return path


def known_runs(db, runs: Sequence[int], option: str = "--run") -> tuple[int, ...]:
    """``runs`` if every id names a scan_run in ``db``."""
    runs = tuple(int(r) for r in runs)
    if not runs:
        return runs
    bad = [r for r in runs if not -2**63 <= r < 2**63]
    if not bad:
        with db.connect() as conn:
            found = {r[0] for r in conn.execute("SELECT id FROM scan_run WHERE id = ANY(%s)", (list(runs),))}
        bad = [r for r in runs if r not in found]
    if bad:
        raise UsageError(f"{option}: no scan run with id {', '.join(map(str, bad))} (see 'netsurvey runs')")
    return runs


def input_file(path: Path, option: str = "--input") -> Path:
    """``path`` if it is an existing regular file."""
    if not path.exists():
        raise UsageError(f"{option}: {path}: file not found")
    if not path.is_file():
        raise UsageError(f"{option}: {path}: not a regular file")
    return path
