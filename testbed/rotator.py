"""Rotates the TLS ticket keys of groups with a rotation period: at each epoch boundary it
installs the new key files (see tickets.py) and sends SIGHUP to the nginx master.

Usage: python -m testbed.rotator --dir STATE_DIR
"""
from __future__ import annotations

import argparse
import json
import math
import os
import signal
import time
from pathlib import Path

from .model import load_testbed_config
from .tickets import install_keys, key_epoch


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--dir", required=True)
    d = Path(ap.parse_args().dir)
    st = json.loads((d / "state.json").read_text())
    cfg = load_testbed_config(Path(st["config_path"]))
    secret = bytes.fromhex(st["secret_hex"])
    groups = {g.name: g.rotation for g in cfg.ticket_key_groups if g.rotation > 0}
    used = {h.key_group for h in cfg.tls_hosts}
    groups = {g: r for g, r in groups.items() if g in used}
    epochs = {g: key_epoch(r) for g, r in groups.items()}
    signal.signal(signal.SIGTERM, lambda *_: os._exit(0))
    while groups:
        now = time.time()
        nxt = min((math.floor(now / r) + 1) * r for r in groups.values())
        time.sleep(max(0.0, nxt - now) + 0.01)
        changed = False
        for g, r in groups.items():
            e = key_epoch(r)
            if e != epochs[g]:
                install_keys(d / "ticket-keys", secret, g, r)
                epochs[g] = e
                changed = True
        if changed:
            try:
                pid = int((d / "nginx" / "nginx.pid").read_text())
                os.kill(pid, signal.SIGHUP)
                print(f"{time.time():.3f} rotated keys, HUP nginx {pid}", flush=True)
            except (OSError, ValueError) as exc:
                print(f"{time.time():.3f} cannot HUP nginx: {exc}", flush=True)


if __name__ == "__main__":
    main()
