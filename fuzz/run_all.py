"""``make fuzz``: run every fuzz target for a bounded time, one subprocess each, and write
fuzz/results.json (executions, new crash files, status per target) plus a table.

    python3 -m fuzz.run_all [--seconds S] [--runs N] [--only T1,T2] [--jobs J]

results.json keeps one entry per target with the budget it ran under (``runs`` or
``seconds_budget``) and its date: a run with ``--only`` replaces only those targets' entries.
``--jobs`` runs that many targets at once (each is one process, one core).

Default 20 s per target (14 targets: ~5 minutes). ``--runs 1000000 --jobs 2`` reaches the
issue's 1M executions per target in ~30 minutes on 2 cores (the slowest target ~8 min).
"""
from __future__ import annotations

import argparse
import datetime
import json
import re
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

from fuzz.targets import CRASH_DIR, FUZZ_DIR, TARGETS, available

_EXEC = re.compile(r"stat::number_of_executed_units:\s*(\d+)")


def run_one(name: str, seconds: int, runs: int) -> dict:
    t = TARGETS[name]
    if not available(t):
        return {"target": name, "status": "missing", "executions": 0, "seconds": 0.0, "crashes": []}
    before = set((CRASH_DIR / name).glob("*")) if (CRASH_DIR / name).exists() else set()
    argv = [sys.executable, "-m", "fuzz.run", name]
    argv += ["--seconds", str(seconds)] if seconds else []
    argv += ["--runs", str(runs)] if runs else []
    t0 = time.time()
    p = subprocess.run(argv, capture_output=True, text=True, cwd=FUZZ_DIR.parent)
    el = time.time() - t0
    m = _EXEC.findall(p.stderr)
    after = set((CRASH_DIR / name).glob("*")) if (CRASH_DIR / name).exists() else set()
    new = sorted(str(x.relative_to(FUZZ_DIR.parent)) for x in after - before)
    status = "ok" if p.returncode == 0 else "crash" if new else f"error rc={p.returncode}"
    res = {"target": name, "what": t.what, "status": status, "executions": int(m[-1]) if m else 0,
           "seconds": round(el, 1), "crashes": new}
    if status != "ok":
        tail = [ln for ln in p.stderr.splitlines() if ln.strip()][-12:]
        res["log_tail"] = tail
    return res


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--seconds", type=int, default=20)
    ap.add_argument("--runs", type=int, default=0)
    ap.add_argument("--only", default="")
    ap.add_argument("--jobs", type=int, default=1)
    a = ap.parse_args()
    names = [n for n in TARGETS if not a.only or n in a.only.split(",")]
    if a.only and not names:
        sys.exit(f"fuzz: no target named {a.only!r}; targets: {', '.join(TARGETS)}")
    budget = {"runs": a.runs} if a.runs else {"seconds_budget": a.seconds}
    today = datetime.date.today().isoformat()
    results = []

    def one(n: str) -> dict:
        r = run_one(n, 0 if a.runs else a.seconds, a.runs)
        r.update(budget, date=today)
        print(f"{n:28s} {r['status']:10s} {r['executions']:>10,d} execs {r['seconds']:7.1f} s"
              + (f"  {len(r['crashes'])} crash file(s)" if r["crashes"] else ""), flush=True)
        for ln in r.get("log_tail", [])[-6:]:
            print("    " + ln)
        return r

    with ThreadPoolExecutor(max(1, a.jobs)) as ex:
        results = list(ex.map(one, names))
    out = FUZZ_DIR / "results.json"
    kept = {}
    if out.exists():
        try:
            old = json.loads(out.read_text())
            kept = {r["target"]: r for r in old.get("results", [])}
        except (ValueError, KeyError, TypeError):
            kept = {}
    kept.update({r["target"]: r for r in results})
    merged = [kept[n] for n in TARGETS if n in kept]
    out.write_text(json.dumps({"results": merged}, indent=1))
    bad = [r for r in results if r["status"] not in ("ok", "missing")]
    print(f"{len(results)} targets, {sum(r['executions'] for r in results):,d} executions, "
          f"{len(bad)} with findings -> {out}")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
