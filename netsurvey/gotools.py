"""Where the pinned Go tools (zgrab2, zdns; versions in tools/go/go.mod) are found.

A tool on PATH wins (the container images copy the pinned builds to /usr/local/bin, and a
non-editable install has no tools/go/); otherwise the repo's own build in tools/go/bin
(``scripts/build_go_tools.sh TOOL``; ``make install`` builds them when Go is present)."""
from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import Optional

from netsurvey.errors import UsageError

REPO_BIN = Path(__file__).resolve().parents[1] / "tools" / "go" / "bin"
GO_MOD = REPO_BIN.parent / "go.mod"
#: go.mod module path of each tool (for the pinned version).
MODULES = {"zgrab2": "github.com/zmap/zgrab2", "zdns": "github.com/zmap/zdns"}


def find_tool(name: str) -> Optional[Path]:
    """PATH first, then tools/go/bin; None if neither has an executable ``name``."""
    on_path = shutil.which(name)
    if on_path:
        return Path(on_path)
    local = REPO_BIN / name
    return local if local.is_file() and os.access(local, os.X_OK) else None


def require_tool(name: str) -> Path:
    path = find_tool(name)
    if path is None:
        raise UsageError(f"{name} not found on PATH or in {REPO_BIN}; build it with "
                         f"'scripts/build_go_tools.sh {name}' (needs Go >= 1.24)")
    return path


def tool_version(name: str) -> str:
    """The version to record with a run: the go.mod pin for the repo's own build, else what
    the binary on PATH says about itself (``--version``), prefixed with its path."""
    path = find_tool(name)
    if path is not None and path.parent == REPO_BIN and GO_MOD.exists():
        for line in GO_MOD.read_text().splitlines():
            if MODULES[name] in line.split()[:1] or line.strip().startswith(MODULES[name]):
                return line.split()[-1]
    if path is None:
        return "unknown"
    try:
        out = subprocess.run([str(path), "--version"], capture_output=True, text=True, timeout=10)
        said = (out.stdout or out.stderr).strip().splitlines()[:1]
    except (OSError, subprocess.TimeoutExpired):
        said = []
    return f"{path} ({said[0] if said else 'no --version'})"
