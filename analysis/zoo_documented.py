"""The zoos' documented defaults as `plot zoo-table` reads them: from the database only
(zoo_documented_default, written by `netsurvey testbed zoo-record`), never from the
testbed's code."""
from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class ZooServer:
    """One zoo server: its label, name, addresses and its facts in the ground truth's shape
    (fact -> {"value", "source", further properties})."""

    zoo: str
    label: str
    hostname: str | None
    addresses: tuple[str, ...]
    port: int | None
    zone: str | None
    facts: dict = field(default_factory=dict, hash=False, compare=False)

    @property
    def v4(self) -> str | None:
        return next((a for a in self.addresses if ":" not in a), None)


def servers(conn, *zoos: str) -> list[ZooServer]:
    """The recorded servers of ``zoos`` (every zoo when none is named), by zoo and label;
    [] when nothing was recorded (or before migration 0180)."""
    if not conn.execute("SELECT to_regclass('zoo_documented_default') IS NOT NULL").fetchone()[0]:
        return []
    rows = conn.execute(
        "SELECT zoo, label, hostname, array(SELECT host(a) FROM unnest(addresses) a), port, zone, implementation,"
        " fact, value, detail, source FROM zoo_documented_default WHERE (%s::text[] IS NULL OR zoo = ANY(%s))"
        " ORDER BY zoo, label, fact", (list(zoos) or None, list(zoos) or None)).fetchall()
    out: dict[tuple[str, str], ZooServer] = {}
    for zoo, label, hostname, addrs, port, zone, impl, fact, value, detail, source in rows:
        s = out.setdefault((zoo, label), ZooServer(zoo, label, hostname, tuple(addrs), port, zone, {}))
        if impl is not None:
            s.facts["implementation"] = impl
        s.facts[fact] = {"value": value, "source": source, **(detail or {})}
    return list(out.values())
