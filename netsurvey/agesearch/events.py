"""Reading an age search's event log back (``--resume``): the brackets of its chains and
its planned attempts that have no outcome yet. Each scanner has its own event table with
these columns in common: run_id, round, grid_index, event ('planned', the accepted event,
'refused', 'finished', ...), detail ('decided-as:J' on a late outcome) and due_at."""
from __future__ import annotations

from typing import Sequence

from .engine import PriorChain

#: the index an outcome decided: grid_index, or J of a 'decided-as:J' detail
_DECIDED = "CASE WHEN detail LIKE 'decided-as:%%' THEN split_part(detail, ':', 2)::int ELSE grid_index END"


def prior_chains(conn, table: str, chain: Sequence[str], run_id: int, *, accepted: str, where: str = "",
                 extra: Sequence[str] = ()) -> list[tuple[tuple, PriorChain, tuple]]:
    """The chains of run ``run_id`` in ``table``, grouped by the column expressions ``chain``:
    [(chain values, :class:`~.engine.PriorChain`, values of the aggregates ``extra``)].
    lo is the largest index decided accepted (event ``accepted``), hi the smallest decided
    refused (0: none), decided every index with an outcome; ``where`` narrows the rows
    (an SQL condition, ANDed)."""
    cols = ", ".join(chain)
    rows = conn.execute(
        f"""SELECT {cols},
                   coalesce(max(decided) FILTER (WHERE event = %s), 0),
                   min(decided) FILTER (WHERE event = 'refused'),
                   max(round), bool_or(event = 'finished'),
                   array_agg(grid_index) FILTER (WHERE event IN (%s, 'refused')){"".join(", " + e for e in extra)}
            FROM (SELECT *, {_DECIDED} AS decided FROM {table} WHERE run_id = %s{" AND " + where if where else ""}) e
            GROUP BY {", ".join(str(i + 1) for i in range(len(chain)))}""", (accepted, accepted, run_id)).fetchall()
    w = len(chain)
    return [(tuple(r[:w]), PriorChain(lo=r[w], hi=r[w + 1] or 0, round=r[w + 2] or 0, finished=bool(r[w + 3]),
                                      decided=frozenset(r[w + 4] or ())), tuple(r[w + 5:])) for r in rows]


def unanswered(table: str, same: Sequence[str], nullable: Sequence[str] = ()) -> str:
    """``FROM ... WHERE ...`` of the planned attempts (alias ``p``) of run %s in ``table``
    that no other event of the same attempt followed (same run, columns ``same``, round and
    grid_index; a column in ``nullable`` matches NULL to NULL): the attempts still pending."""
    match = " AND ".join(f"o.{c} IS NOT DISTINCT FROM p.{c}" if c in nullable else f"o.{c} = p.{c}"
                         for c in (*same, "round", "grid_index"))
    return (f"FROM {table} p WHERE p.run_id = %s AND p.event = 'planned' AND NOT EXISTS ("
            f"SELECT 1 FROM {table} o WHERE o.run_id = p.run_id AND {match} AND o.event <> 'planned')")
