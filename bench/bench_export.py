"""Peak RSS and time of `netsurvey export` over one run of N tfo_probe rows, per format,
against the command's start-up alone (a temporary embedded PostgreSQL; nothing else used):

    python3 bench/bench_export.py 1000000 [csv jsonl parquet]
"""
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))
from netsurvey.db import Database, stop_embedded
from tests.conftest import _create_database

N = int(sys.argv[1]) if len(sys.argv) > 1 else 1_000_000
root = pathlib.Path(tempfile.mkdtemp(prefix="wt22bench-"))
srv = Database.resolve(None, root / "pgdata")
db = Database(dsn=_create_database(srv.dsn)); db.migrate()
with db.connect() as c:
    rid = c.execute("INSERT INTO scan_run (kind, status) VALUES ('tfo','finished') RETURNING id").fetchone()[0]
    c.execute("""INSERT INTO tfo_probe (run_id, rank, hostname, address, port, status, reply, tfo_kind, cookie, cookie_len, options, rcv_window)
                 SELECT %s, g, 'host' || g || '.example.test', ('198.18.' || (g %% 250) || '.' || (g %% 200 + 1))::inet, 80,
                        'success', 'syn-ack', 'rfc7413', decode(md5(g::text), 'hex'), 16, ARRAY['mss=1460','sackok','ws=7'], 65535
                 FROM generate_series(1, %s) g""", (rid, N))
for fmt in sys.argv[2:] or ("csv", "jsonl", "parquet"):
    out = root / f"out-{fmt}"
    t = time.monotonic()
    r = subprocess.run(["/usr/bin/time", "-v", sys.executable, "-m", "netsurvey.cli", "export", "--run", str(rid),
                        "--table", "tfo_probe", "--format", fmt, "--out", str(out)],
                       env=dict(os.environ, NETSURVEY_DSN=db.dsn), capture_output=True, text=True)
    el = time.monotonic() - t
    rss = [l for l in r.stderr.splitlines() if "Maximum resident" in l]
    size = sum(p.stat().st_size for p in out.iterdir())
    print(f"{fmt}: rc={r.returncode} {N} rows in {el:.1f} s, {size/1e6:.1f} MB, {rss[0].strip() if rss else r.stderr[-300:]}", flush=True)
# baseline: the command's start-up alone
r = subprocess.run(["/usr/bin/time", "-v", sys.executable, "-m", "netsurvey.cli", "export", "--help"], capture_output=True, text=True)
print("baseline (export --help):", [l.strip() for l in r.stderr.splitlines() if "Maximum resident" in l])
stop_embedded(root / "pgdata"); shutil.rmtree(root, ignore_errors=True)
