"""`netsurvey demo` step: the RIPE Atlas campaign against the testbed's stand-in API, with
the instrumented authoritative server answering a real query through unbound."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

STEP = "RIPE Atlas resolver RTTs (against the testbed's Atlas stand-in)"
KEY_FILE = Path("/run/netsurvey/testbed/atlas-api-key")
ZONE = "dnstest.example.test"
AUTH_ADDR = "198.18.108.53"
#: Hand-made origin-AS map of the stand-in's world (testbed/atlas_fixtures): the probes'
#: /24s and their ISPs' resolver /24s share an AS; 198.18.112.53 is a "public" resolver.
DEMO_ASNS = {"198.18.100.0/24": 64496, "198.18.110.0/24": 64496, "198.18.101.0/24": 64497,
             "198.18.111.0/24": 64497, "198.18.102.0/24": 64498, "198.18.112.0/24": 64498,
             "198.18.112.53/32": 64510, "198.18.103.0/24": 64499, "198.18.113.0/24": 64499,
             "198.18.0.0/24": 64500}


def _cli(*args: str, env: dict, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "netsurvey.cli", *args], env=env,
                          capture_output=True, text=True, timeout=timeout)


def whoami_through_unbound(dsn: str, env: dict, label: str) -> tuple[str, list]:
    """Start the authoritative server in the atlasres namespace, query LABEL.ZONE through the
    testbed's unbound from the vantage, stop it; returns (answer, logged source addresses)."""
    srv = subprocess.Popen(["ip", "netns", "exec", "nstb-atlasres", sys.executable, "-m",
                            "netsurvey.cli", "atlas", "authoritative", "--zone", ZONE,
                            "--listen", AUTH_ADDR, "--max-seconds", "20"],
                           env=dict(env, NETSURVEY_DSN=dsn), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           text=True)
    try:
        line = srv.stdout.readline()
        if not line.startswith("READY"):
            raise RuntimeError(f"authoritative server did not start: {line} {srv.stderr.read()}")
        run_id = int(line.split()[1].split("=")[1])
        q = _cli("testbed", "exec", "--", sys.executable, "-c",
                 "import dns.resolver; print(dns.resolver.resolve(%r, 'A')[0].address)"
                 % f"{label}.{ZONE}", env=env)
        if q.returncode:
            raise RuntimeError(f"query failed: {q.stderr.strip()[-300:]}")
        answer = q.stdout.strip()
    finally:
        srv.terminate()
        srv.wait(timeout=10)
    import psycopg
    with psycopg.connect(dsn) as conn:
        rows = conn.execute("SELECT host(src_addr), qtype FROM atlas_auth_query WHERE run_id=%s"
                            " AND qname=%s", (run_id, f"{label}.{ZONE}")).fetchall()
    return answer, rows


def run(state, out) -> str:
    if os.geteuid() != 0:
        return "skipped: the testbed needs root"
    from analysis.figures import render
    from testbed.manager import Testbed
    from testbed.model import DEFAULT_TESTBED_CONFIG, load_testbed_config

    from .asmap import write_ipasn

    tb = Testbed(load_testbed_config(DEFAULT_TESTBED_CONFIG), DEFAULT_TESTBED_CONFIG)
    gt = tb.status()["ground_truth"]
    db = state.db
    db.migrate()
    env = dict(os.environ, NETSURVEY_ATLAS_KEY=KEY_FILE.read_text().strip(), NETSURVEY_DSN=db.dsn,
               PYTHONPATH=str(Path(__file__).resolve().parent.parent))
    label = f"demo{int(time.time())}"
    answer, logged = whoami_through_unbound(db.dsn, env, label)
    resolver_egress = sorted({a for a, _ in logged})
    out.print(f"authoritative: {label}.{ZONE} via unbound -> answer {answer}; logged sources "
              f"{resolver_egress} (unbound lives at {gt['dns'].get('resolver_v4', '198.18.1.1')})")
    with tempfile.TemporaryDirectory() as d:
        asn_db = write_ipasn(Path(d) / "ipasn.dat", DEMO_ASNS)
        r = _cli("testbed", "exec", "--", sys.executable, "-m", "netsurvey.cli",
                 "atlas", "run", "--probes", "country:DE", "--count", "800", "--server", "198.18.0.1",
                 "--zone", "whoami.example.test", "--api-host", gt.get("atlas", {}).get("hostname", "atlas.test"),
                 "--poll", "0.3", "--asn-db", str(asn_db), "--json", env=env, timeout=80)
    if r.returncode:
        raise RuntimeError(f"atlas run failed: {r.stderr.strip()[-400:]}")
    res = json.loads(r.stdout.strip().splitlines()[-1])
    figs = Path("out/figures")
    notes = {}
    for name in ("atlas-resolver-rtt", "atlas-rtt-triplet"):
        ctx = render(db, name, figs, [res["run_id"]])
        notes[name] = ctx.notes
        out.print(f"{name}: " + ", ".join(str(p) for p in ctx.written))
    from testbed.atlas_api import atlas_ground_truth, ping_series, target_profile
    fx = atlas_ground_truth()
    with db.connect() as conn:
        measured = conn.execute("SELECT prb_id, host(resolver_addr), rtt_ms FROM atlas_resolver_rtt"
                                " WHERE run_id=%s", (res["run_id"],)).fetchall()
    match = 0
    for prb, addr, rtt in measured:
        got = [x for x in ping_series(target_profile(fx["probes"][prb], addr, addr), 5) if x is not None]
        match += abs(round(sum(got) / len(got), 3) - rtt) < 1e-9
    g = notes["atlas-resolver-rtt"]["groups"]
    return (f"run {res['run_id']}: {res['probes']} probes, {res['measurements']} measurements, "
            f"{res['failures']} failures kept; probe->resolver RTTs {match}/{len(measured)} equal the "
            f"stand-in's fixtures; p95 all {g.get('all', {}).get('p95_ms')} ms; "
            f"{res['triplets']} RTT triplets; whoami via unbound answered {answer} "
            f"(= logged source {resolver_egress})")
