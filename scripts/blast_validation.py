"""BLAST Fig 5 validation under delay (issue 25, item 6): the generated pages
(testbed/pagegen.py) served by the timing testbed's page server behind its delay line,
loaded by real browsers under each link profile, then simulated (``plot blast-validation``).

Run as root, with the database in NETSURVEY_DSN (or the configured default):

    NETSURVEY_TESTBED_KEEP=1 python3 scripts/blast_validation.py \\
        --profiles cable,lte --browsers chromium,firefox --pages 30 --out out/figures

Steps: ``testbed timing up`` (idempotent); write the pages under the page server's roots;
per profile ``testbed profile P --class timing``; per browser ``testbed timing exec --
netsurvey browser pageload --browser B --browsers 1 --url ...`` (one browser at a time: a
second one would compete with the delay line for the CPU); then the profile 'none' again,
the pages removed, and ``plot blast-validation --run ...`` over every run. Prints one JSON
line: the runs per profile and browser and the figure's numbers per profile and browser.
Bad input: one line on stderr, exit 2.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))


def _cli(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), *filter(None, [env.get("PYTHONPATH")])])
    env.setdefault("NETSURVEY_TESTBED_KEEP", "1")
    return subprocess.run([sys.executable, "-m", "netsurvey.cli", *args], cwd=REPO, env=env, capture_output=True,
                          text=True, timeout=timeout)


def _ok(r: subprocess.CompletedProcess, what: str) -> str:
    if r.returncode != 0:
        raise RuntimeError(f"{what} failed (exit {r.returncode}): {r.stderr.strip()[-600:]}")
    return r.stdout


def run(profiles: list[str], browsers: list[str], n_pages: int = 30, seed: int = 25, tag: str = "blastval",
        page_timeout_s: float = 60.0, log=lambda m: print(m, file=sys.stderr)) -> dict:
    """Load the pages under every profile in every browser; returns {"runs": {profile: {browser:
    summary}}, "pages": [GenPage]}. The timing link is back at 'none' and the pages are gone
    afterwards, also on failure."""
    from testbed import pagegen, timing

    _ok(_cli("testbed", "timing", "up"), "testbed timing up")
    pages = pagegen.generate(n_pages, seed=seed, tag=tag, hosts=list(timing.PAGE_HOSTS))
    pagegen.write(pages, timing.pages_root())
    urls = [a for p in pages for a in ("--url", p.url)]
    runs: dict = {}
    try:
        for prof in profiles:
            _ok(_cli("testbed", "profile", prof, "--class", "timing"), f"testbed profile {prof}")
            for b in browsers:
                log(f"{prof}: {b}: {len(pages)} pages")
                out = _ok(_cli("testbed", "timing", "exec", "--", sys.executable, "-m", "netsurvey.cli", "browser",
                               "pageload", "--json", "--browser", b, "--browsers", "1", "--page-timeout",
                               str(page_timeout_s), *urls, timeout=60 + len(pages) * (page_timeout_s + 30)),
                          f"browser pageload {b} under {prof}")
                runs.setdefault(prof, {})[b] = json.loads(out.strip().splitlines()[-1])
    finally:
        _cli("testbed", "profile", "none", "--class", "timing")
        pagegen.remove(timing.pages_root(), tag, hosts=list(timing.PAGE_HOSTS))
    return {"runs": runs, "pages": pages}


class _OneLineParser(argparse.ArgumentParser):
    """Bad input is one line on stderr and exit 2 (argparse prints its usage too)."""

    def error(self, message):
        print(f"blast_validation: {message}", file=sys.stderr)
        sys.exit(2)


def main(argv=None) -> int:
    ap = _OneLineParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--profiles", default="cable,lte")
    ap.add_argument("--browsers", default="chromium,firefox")
    ap.add_argument("--pages", type=int, default=30)
    ap.add_argument("--seed", type=int, default=25)
    ap.add_argument("--out", default="out/figures")
    a = ap.parse_args(argv)
    profiles = [p for p in a.profiles.split(",") if p]
    browsers = [b for b in a.browsers.split(",") if b]
    bad = [b for b in browsers if b not in ("chromium", "firefox", "webkit")]
    if not profiles or not browsers or bad or not 1 <= a.pages <= 200:
        print("blast_validation: give --profiles P,.. --browsers chromium,firefox and 1 <= --pages <= 200",
              file=sys.stderr)
        return 2
    from testbed.model import DEFAULT_TESTBED_CONFIG, load_testbed_config

    known = [p.name for p in load_testbed_config(DEFAULT_TESTBED_CONFIG).profiles]
    unknown = [p for p in profiles if p not in known]
    if unknown:   # before anything is started or written (a typo was found after 'testbed timing up')
        print(f"blast_validation: --profiles {','.join(unknown)}: no such profile (known: {', '.join(known)})",
              file=sys.stderr)
        return 2
    if os.geteuid() != 0:
        print("blast_validation: needs root (the timing testbed's namespaces)", file=sys.stderr)
        return 2
    try:
        res = run(profiles, browsers, a.pages, a.seed)
    except RuntimeError as exc:
        print(f"blast_validation: {exc}", file=sys.stderr)
        return 1
    ids = [str(s["run_id"]) for per in res["runs"].values() for s in per.values()]
    out = _cli("plot", "blast-validation", "--json", "--out", a.out, *[x for i in ids for x in ("--run", i)])
    if out.returncode != 0:
        print(f"blast_validation: plot failed: {out.stderr.strip()[-400:]}", file=sys.stderr)
        return 1
    print(json.dumps({"runs": {p: {b: s["run_id"] for b, s in per.items()} for p, per in res["runs"].items()},
                      "plot": out.stdout.strip()[-4000:]}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
