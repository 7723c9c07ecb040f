"""tests/support/sniffer.py run inside a network namespace for the duration of a ``with`` block:
every packet the namespace sends on one interface, seen by the kernel, not by netsurvey.
``packets`` (one dict per packet, see tests/support/sniffer.py) and ``stats`` (``packets``,
``kernel_drops``) are filled on exit."""
from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

SNIFFER = Path(__file__).resolve().parent / "sniffer.py"


class Capture:
    def __init__(self, namespace: str, iface: str, path: Path, seconds: int = 300):
        self.namespace, self.iface, self.path, self.seconds = namespace, iface, Path(path), seconds
        self.packets: list[dict] = []
        self.stats: dict = {}

    def __enter__(self) -> "Capture":
        self.proc = subprocess.Popen(["ip", "netns", "exec", self.namespace, sys.executable, str(SNIFFER), "--out",
                                      str(self.path), "--iface", self.iface, "--seconds", str(self.seconds)],
                                     stdout=subprocess.PIPE, text=True)
        assert self.proc.stdout.readline().strip() == "ready"
        return self

    def __exit__(self, *exc) -> bool:
        time.sleep(0.3)   # let the last frames through
        self.proc.send_signal(signal.SIGTERM)
        out, _ = self.proc.communicate(timeout=20)
        self.stats = json.loads(out.strip().splitlines()[-1])
        self.packets = [json.loads(x) for x in self.path.read_text().splitlines()]
        return False


def vantage_capture(path: Path, seconds: int = 200) -> Capture:
    """What the testbed's vantage (nstb-vantage) sends on its bridge (tbbr0)."""
    return Capture("nstb-vantage", "tbbr0", path, seconds=seconds)
