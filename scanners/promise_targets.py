"""Testbed hosts and address ranges the scanners' promise cases aim at (the ``promises``
module of each scanner package; the testbed's ground truth is in testbed/README.md)."""
from __future__ import annotations

#: the TLS hosts of the shared testbed (nginx, both families)
TLS_HOSTS = ("a.test", "b.test", "t.test", "example.test", "www.example.test", "static.example.test")
#: 198.19.0.1-32: addresses the testbed's 'scale' namespace answers
SCALE = tuple(f"198.19.0.{i}" for i in range(1, 33))


def targets(*specs: str) -> list[str]:
    """``--target X`` for each spec."""
    return [a for x in specs for a in ("--target", x)]
