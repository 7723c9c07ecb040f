"""The prolongation attack on a DNS query log (thesis ch. 4.5.3, Def. 1-4, Fig 4.11-4.13).

Input: one row per query ``(user_id, ts, hostname)``, ts in unix seconds; each query is
taken as a visit of site ``hostname`` (thesis assumption: every query led to a TLS
session; DNS caching is not modelled). Everything is computed inside PostgreSQL, so a log
of 100M rows is streamed once into an unlogged table (or read from the ``model_dns_query``
view) and never held in Python memory.

For each session-resumption lifetime l (seconds):
- Def. 1/2: the longest consecutive tracking period lcp(v, l) of a user's visits to one
  site is the longest time span t_j - t_i of a run of visits whose gaps are all <= l;
  lcp_max(u, l) = max over sites. Reported: median (percentile_cont 0.5) and mean over users.
- Def. 3: a user is permanently trackable if for some site all gaps are <= l and the first
  (last) visit is within l of the sample start (end). The sample period is the log's first
  to last timestamp unless given.
- Def. 4 / Fig 4.13: the share of all revisits (consecutive visits of a user to a site)
  whose interval is <= l, and the CDF of revisit intervals.
"""
from __future__ import annotations

import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from netsurvey.db import Database
from netsurvey.errors import UsageError

#: Default lifetimes (s): 1 min .. 7 days, the range of Fig 4.11/4.12.
DEFAULT_LIFETIMES = (60, 300, 600, 1800, 3600, 3 * 3600, 7 * 3600, 12 * 3600, 86400, 2 * 86400,
                     3 * 86400, 7 * 86400)

#: Database view the model reads when no --input is given (see analysis/README.md).
DB_VIEW = "model_dns_query"


@dataclass(frozen=True)
class ProlongationOptions:
    """``lifetimes_s``: session-resumption lifetimes to evaluate (s); ``sample_start`` /
    ``sample_end``: the sample period (unix s; default: the log's first / last query);
    ``cdf_points``: resolution of the revisit-interval CDF."""

    lifetimes_s: tuple[float, ...] = DEFAULT_LIFETIMES
    sample_start: Optional[float] = None
    sample_end: Optional[float] = None
    cdf_points: int = 200


def load_log(db: Database, path: Path) -> str:
    """Stream a CSV log (user_id,unix_time,hostname; optional header) into a new unlogged
    table; returns its name. The caller drops it (``drop_table``)."""
    table = f"sim_dns_log_{uuid.uuid4().hex[:12]}"
    with path.open("rb") as fh:
        first = fh.readline()
        fields = first.decode("utf-8", "replace").strip().split(",")
        if len(fields) != 3:
            raise UsageError(f"{path}:1: expected 3 columns user_id,unix_time,hostname, got {len(fields)}")
        try:
            float(fields[1])
            header = False
        except ValueError:
            header = True
        fh.seek(0)
        import psycopg

        with db.connect() as conn:
            conn.execute(f"CREATE UNLOGGED TABLE {table} (user_id text NOT NULL, ts float8 NOT NULL, hostname text NOT NULL)")
            try:
                with conn.cursor().copy(f"COPY {table} FROM STDIN WITH (FORMAT csv{', HEADER true' if header else ''})") as cp:
                    while chunk := fh.read(1 << 20):
                        cp.write(chunk)
            except psycopg.Error as exc:
                conn.rollback()
                raise UsageError(f"{path}: {(exc.diag.message_primary or str(exc)).strip()} "
                                 f"({(exc.diag.context or '').strip()})") from None
            conn.commit()
    return table


def drop_table(db: Database, table: str) -> None:
    with db.connect() as conn:
        conn.execute(f"DROP TABLE IF EXISTS {table}")
        conn.commit()


def prolongation(db: Database, source: str, opts: ProlongationOptions = ProlongationOptions()) -> dict:
    """Run the model over ``source`` (a table or view with user_id, ts, hostname)."""
    from analysis.engine import cdf

    lifetimes = sorted(set(float(x) for x in opts.lifetimes_s))
    if not lifetimes or lifetimes[0] < 0:
        raise UsageError("lifetimes must be non-negative seconds")
    gaps = f"sim_gaps_{uuid.uuid4().hex[:12]}"
    try:
        with db.connect() as conn:
            n_rows, n_users, t0, t1 = conn.execute(
                f"SELECT count(*), count(DISTINCT user_id), min(ts), max(ts) FROM {source}").fetchone()
            if not n_rows:
                raise UsageError(f"{source}: the DNS log is empty")
            start = opts.sample_start if opts.sample_start is not None else t0
            end = opts.sample_end if opts.sample_end is not None else t1
            if start > t0 or end < t1:
                raise UsageError("the sample period must contain every query of the log")
            conn.execute(f"""CREATE UNLOGGED TABLE {gaps} AS
                SELECT user_id, hostname, ts,
                       ts - lag(ts) OVER (PARTITION BY user_id, hostname ORDER BY ts) AS gap
                FROM {source}""")
            # Def. 3: per (user, site) the smallest lifetime that makes it permanently trackable
            perm = conn.execute(f"""
                WITH us AS (SELECT user_id, greatest(coalesce(max(gap), 0), min(ts) - %s, %s - max(ts)) AS need
                            FROM {gaps} GROUP BY user_id, hostname),
                     u AS (SELECT user_id, min(need) AS need FROM us GROUP BY user_id)
                SELECT l, count(*) FILTER (WHERE need <= l)::float8 / %s
                FROM u CROSS JOIN unnest(%s::float8[]) AS l GROUP BY l ORDER BY l""",
                (start, end, n_users, lifetimes)).fetchall()
            # Def. 1/2: longest consecutive tracking period per user and lifetime
            lcp = conn.execute(f"""
                WITH seg AS (
                    SELECT l, user_id, hostname, ts,
                           sum(coalesce((gap > l)::int, 0)) OVER (PARTITION BY l, user_id, hostname ORDER BY ts
                                                                  ROWS UNBOUNDED PRECEDING) AS seg
                    FROM {gaps} CROSS JOIN unnest(%s::float8[]) AS l),
                 span AS (SELECT l, user_id, max(ts) - min(ts) AS span FROM seg GROUP BY l, user_id, hostname, seg),
                 u AS (SELECT l, user_id, max(span) AS lcp FROM span GROUP BY l, user_id)
                SELECT l, percentile_cont(0.5) WITHIN GROUP (ORDER BY lcp), avg(lcp), max(lcp)
                FROM u GROUP BY l ORDER BY l""", (lifetimes,)).fetchall()
            # Def. 4: revisits within the lifetime
            n_revisits = conn.execute(f"SELECT count(gap) FROM {gaps}").fetchone()[0]
            within = conn.execute(f"""SELECT l, count(gap) FILTER (WHERE gap <= l)
                                      FROM {gaps} CROSS JOIN unnest(%s::float8[]) AS l GROUP BY l ORDER BY l""",
                                  (lifetimes,)).fetchall()
            conn.commit()
        revisit_cdf = cdf(db, f"SELECT gap AS value FROM {gaps}", points=opts.cdf_points) if n_revisits else []
    finally:
        drop_table(db, gaps)
    perm_d = dict(perm)
    within_d = dict(within)
    rows = []
    for l, med, avg, mx in lcp:
        rows.append({"lifetime_s": l, "lcp_median_s": float(med), "lcp_mean_s": float(avg), "lcp_max_s": float(mx),
                     "share_permanently_trackable": perm_d[l],
                     "share_revisits_within_lifetime": within_d[l] / n_revisits if n_revisits else 0.0})
    return {"model": "prolongation", "queries": n_rows, "users": n_users, "revisits": n_revisits,
            "sample_start": start, "sample_end": end, "sample_days": (end - start) / 86400,
            "lifetimes": rows,
            "revisit_interval_cdf": {"values_s": list(revisit_cdf[0].values) if revisit_cdf else [],
                                     "probs": list(revisit_cdf[0].probs) if revisit_cdf else []}}
