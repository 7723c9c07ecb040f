"""CDFs, percentiles and shares computed inside PostgreSQL.

Nothing here loads raw observations into Python: a CDF is returned as at most
``points`` quantiles per group (``percentile_disc`` over a fixed probability grid), plus
the exact count per group, so 10M rows cost the database a sort and Python a few KB.
Queries are parameterised; the caller passes the source query (a SELECT yielding columns
``value`` and optionally ``grp``) and its parameters.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional, Sequence

from netsurvey.db import Database


@dataclass(frozen=True)
class Cdf:
    """Empirical CDF of one group: ``values[i]`` is the smallest observation x with
    P(X <= x) >= ``probs[i]``; ``n`` is the number of observations (NULLs excluded)."""

    group: Any
    n: int
    values: tuple[float, ...]
    probs: tuple[float, ...]

    def at(self, x: float) -> float:
        """Share of observations <= x (step function, from the quantile grid)."""
        share = 0.0
        for v, p in zip(self.values, self.probs):
            if v <= x:
                share = p
        return share


def cdf(db: Database, source_sql: str, params: Sequence[Any] = (), *, points: int = 1000) -> list[Cdf]:
    """CDFs of ``value`` per ``grp`` (a single group None if the source has no ``grp``)."""
    with db.connect() as conn:
        cols = [d.name for d in conn.execute(f"SELECT * FROM ({source_sql}) s LIMIT 0", params).description]
        grp = "grp" if "grp" in cols else "NULL::text"
        rows = conn.execute(
            f"""
            WITH s AS ({source_sql}),
                 grid AS (SELECT array_agg(g::float8 / %s ORDER BY g) AS p FROM generate_series(1, %s) g)
            SELECT {grp} AS grp, count(value) AS n,
                   percentile_disc((SELECT p FROM grid)) WITHIN GROUP (ORDER BY value) AS q
            FROM s WHERE value IS NOT NULL GROUP BY 1 ORDER BY 1 NULLS FIRST
            """, (*params, points, points)).fetchall()
    out = []
    for g, n, q in rows:
        probs = [i / points for i in range(1, points + 1)]
        # collapse repeated quantiles into steps: keep the largest prob for each value
        vals, ps = [], []
        for v, p in zip(q, probs):
            if vals and vals[-1] == v:
                ps[-1] = p
            else:
                vals.append(float(v))
                ps.append(p)
        out.append(Cdf(g, n, tuple(vals), tuple(ps)))
    return out


def percentiles(db: Database, source_sql: str, params: Sequence[Any] = (),
                probs: Sequence[float] = (0.5, 0.95, 0.99)) -> dict[Any, dict[float, float]]:
    """Exact percentiles (percentile_disc) of ``value`` per ``grp``."""
    with db.connect() as conn:
        cols = [d.name for d in conn.execute(f"SELECT * FROM ({source_sql}) s LIMIT 0", params).description]
        grp = "grp" if "grp" in cols else "NULL::text"
        rows = conn.execute(
            f"SELECT {grp}, percentile_disc(%s::float8[]) WITHIN GROUP (ORDER BY value) "
            f"FROM ({source_sql}) s WHERE value IS NOT NULL GROUP BY 1", (list(probs), *params)).fetchall()
    return {g: dict(zip(probs, map(float, q))) for g, q in rows}


def shares(db: Database, source_sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, Any, int, float]]:
    """(grp, category, count, share within grp) for a source yielding ``grp`` and ``category``."""
    with db.connect() as conn:
        return [tuple(r) for r in conn.execute(
            f"""SELECT grp, category, count(*)::int,
                       count(*)::float8 / sum(count(*)) OVER (PARTITION BY grp)
                FROM ({source_sql}) s GROUP BY grp, category ORDER BY grp, category""", params).fetchall()]


def latest_run(db: Database, kind: str) -> Optional[int]:
    with db.connect() as conn:
        row = conn.execute("SELECT max(id) FROM scan_run WHERE kind = %s AND status = 'finished'", (kind,)).fetchone()
    return row[0] if row else None
