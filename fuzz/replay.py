"""Replay files through a fuzz target and print the traceback of each failure.

    python3 -m fuzz.replay TARGET FILE...
"""
from __future__ import annotations

import sys
import traceback
from pathlib import Path

from fuzz.targets import TARGETS


def main() -> None:
    t = TARGETS[sys.argv[1]]
    for f in sys.argv[2:]:
        data = Path(f).read_bytes()
        try:
            t.func(data)
            print(f"{f}: ok")
        except Exception:  # noqa: BLE001 - report everything
            print(f"{f}: {data[:120]!r}")
            traceback.print_exc(limit=-3)


if __name__ == "__main__":
    main()
