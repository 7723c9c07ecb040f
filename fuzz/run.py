"""Run one fuzz target under atheris (libFuzzer, coverage-guided).

    python3 -m fuzz.run TARGET [--seconds S | --runs N]

New coverage-increasing inputs go to fuzz/corpus/TARGET/, crashes to
fuzz/crashes/TARGET/crash-<sha1> (then: add a regression test, see
tests/fuzz/test_fuzz_regressions.py). libFuzzer prints ``stat::number_of_executed_units`` at the end.
"""
from __future__ import annotations

import argparse
import importlib
import sys

from fuzz.targets import CORPUS_DIR, CRASH_DIR, TARGETS, guarded


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("target", choices=sorted(TARGETS))
    ap.add_argument("--seconds", type=int, default=0, help="stop after this many seconds")
    ap.add_argument("--runs", type=int, default=0, help="stop after this many executions")
    a = ap.parse_args()
    import atheris

    t = TARGETS[a.target]
    top = t.module.split(".")[0]
    with atheris.instrument_imports(include=[top]):
        importlib.import_module(t.module)
    corpus = CORPUS_DIR / t.name
    crashes = CRASH_DIR / t.name
    corpus.mkdir(parents=True, exist_ok=True)
    crashes.mkdir(parents=True, exist_ok=True)
    args = [sys.argv[0], str(corpus), f"-max_len={t.max_len}", f"-artifact_prefix={crashes}/",
            "-print_final_stats=1", "-timeout=10", "-rss_limit_mb=2048"]
    if a.seconds:
        args.append(f"-max_total_time={a.seconds}")
    if a.runs:
        args.append(f"-runs={a.runs}")
    atheris.Setup(args, guarded(t.name))
    atheris.Fuzz()


if __name__ == "__main__":
    main()
