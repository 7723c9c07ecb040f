"""CDF over 10M observations: analysis.engine.cdf (percentile_disc inside PostgreSQL, a
1000-point grid streamed back) side by side with the peer approach (fetch every value into
Python, numpy sort + quantiles), in one run on the same table. Reports seconds and peak
memory of the Python process (tracemalloc peak of Python allocations; RSS growth).

    python3 bench/bench_cdf.py [--rows 10000000] [--dsn DSN]
"""
from __future__ import annotations

import argparse
import sys
import time
import tracemalloc
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np  # noqa: E402
import psycopg  # noqa: E402

from analysis.engine import cdf  # noqa: E402
from netsurvey.db import Database  # noqa: E402


def rss_mib() -> float:
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def measure(fn):
    tracemalloc.start()
    r0 = rss_mib()
    t = time.perf_counter()
    out = fn()
    sec = time.perf_counter() - t
    peak = tracemalloc.get_traced_memory()[1] / 2**20
    tracemalloc.stop()
    return out, sec, peak, rss_mib() - r0


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=10_000_000)
    ap.add_argument("--dsn", default=None)
    a = ap.parse_args()
    db = Database.resolve(a.dsn, Path(".netsurvey/bench-pgdata"))
    with psycopg.connect(db.dsn, autocommit=True) as conn:
        conn.execute("DROP TABLE IF EXISTS bench_cdf_obs")
        conn.execute("CREATE UNLOGGED TABLE bench_cdf_obs (value float8)")
        t = time.perf_counter()
        conn.execute("INSERT INTO bench_cdf_obs SELECT random() * 1000 FROM generate_series(1, %s)", (a.rows,))
        conn.execute("ANALYZE bench_cdf_obs")
        print(f"loaded {a.rows:,} rows in {time.perf_counter() - t:.1f} s")
    (ours,), s_ours, peak_ours, rss_ours = measure(lambda: cdf(db, "SELECT value FROM bench_cdf_obs"))

    def peer():
        with psycopg.connect(db.dsn) as conn:
            vals = np.array([r[0] for r in conn.execute("SELECT value FROM bench_cdf_obs")], dtype=float)
        vals.sort()
        return np.quantile(vals, np.arange(1, 1001) / 1000, method="inverted_cdf")

    q, s_peer, peak_peer, rss_peer = measure(peer)
    assert ours.n == a.rows and abs(ours.values[499] - q[499]) < 1e-9, "both approaches must agree on the median"
    print(f"{'approach':44} {'seconds':>8} {'py peak MiB':>12} {'RSS +MiB':>9}")
    print(f"{'engine.cdf (percentile_disc in PostgreSQL)':44} {s_ours:8.2f} {peak_ours:12.2f} {rss_ours:9.1f}")
    print(f"{'peer: fetch all + numpy quantile':44} {s_peer:8.2f} {peak_peer:12.1f} {rss_peer:9.1f}")
    print(f"ratio peer/ours: time {s_peer / s_ours:.2f}x, Python peak memory {peak_peer / max(peak_ours, 1e-6):.0f}x")
    with psycopg.connect(db.dsn, autocommit=True) as conn:
        conn.execute("DROP TABLE bench_cdf_obs")
    if db.embedded_dir and not a.dsn:
        from netsurvey.db import stop_embedded

        stop_embedded(db.embedded_dir)  # the bench's own embedded server


if __name__ == "__main__":
    main()
