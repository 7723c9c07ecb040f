"""Find and kill the processes of one browser by its (unique) profile directory."""
from __future__ import annotations

import os
import signal
from pathlib import Path


def browser_pids(profile_dir: Path) -> list[int]:
    """PIDs whose command line mentions ``profile_dir`` (the browser and its helpers), or
    whose environment names it (WebKit: NETSURVEY_BROWSER_PROFILE, drivers.py)."""
    needle = str(profile_dir).encode()
    env_needle = b"NETSURVEY_BROWSER_PROFILE=" + needle + b"\0"
    pids = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            cmd = Path(f"/proc/{d}/cmdline").read_bytes()
            stat = Path(f"/proc/{d}/stat").read_text()
        except OSError:
            continue
        if ") Z " in stat:
            continue
        if needle not in cmd:
            try:
                if env_needle not in Path(f"/proc/{d}/environ").read_bytes() + b"\0":
                    continue
            except OSError:
                continue
        pids.append(int(d))
    return pids


def kill_browser(profile_dir: Path) -> int:
    """SIGKILL every process of the browser using ``profile_dir``; returns how many."""
    n = 0
    for pid in browser_pids(profile_dir):
        try:
            os.kill(pid, signal.SIGKILL)
            n += 1
        except OSError:
            pass
    return n
