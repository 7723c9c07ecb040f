"""Issue 26: `scan tls` and `scan quic` read, resolve and probe their list batch by batch
(netsurvey.scanning.ResolvingStream) instead of resolving the whole list before the first
handshake, and their dry runs contact no host (they ask the resolver, as the run does, to
judge the addresses by the policy: tests/core/test_dry_run_plan.py).

Seen from outside: tests/support/sniffer.py on the testbed vantage's bridge records the DNS questions
to the testbed resolver and the SYNs to the TLS host. Before streams, every question of the
list went out before the first SYN (and `scan quic --dry-run` asked the resolver for every
name)."""
from __future__ import annotations

import json
import sys

import pytest

from conftest import needs_root, run_cli
from support.sniffing import vantage_capture

pytestmark = [needs_root(), pytest.mark.root]

TLSBENCH = "198.18.2.10"   # every *.tlsbench.example.test (config/testbed.toml)




def _import(db, tmp_path, names, name):
    f = tmp_path / f"{name}.csv"
    f.write_text("".join(f"{i},{h}\n" for i, h in enumerate(names, 1)))
    r = run_cli("targets", "import", str(f), "--list", name, dsn=db.dsn)
    assert r.returncode == 0, r.stderr


def _rows(db, q, *p):
    with db.connect() as conn:
        return conn.execute(q, p).fetchall()


#: Batches of 4 names, interleaving windows of 4 targets (the defaults are 2,000 and 40,000).
SMALL = ("import runpy, sys; import netsurvey.scanning as s, netsurvey.spread as w; "
         "s.RESOLVE_BATCH = 4; w.WINDOW = 4; "
         "sys.argv = ['netsurvey'] + sys.argv[1:]; runpy.run_module('netsurvey.cli', run_name='__main__')")


def test_tls_probes_before_the_list_is_resolved(db, testbed, tmp_path):
    names = [f"s{i}.tlsbench.example.test" for i in range(12)] + ["nxdomain-s.example.test"]
    _import(db, tmp_path, names, "tlsstream")
    with vantage_capture(tmp_path / "pkts.jsonl") as sn:
        r = run_cli("testbed", "exec", "--", sys.executable, "-c", SMALL, "--dsn", db.dsn, "scan", "tls",
                    "--list", "tlsstream", "--tls", "1.3", "--no-check-resumption", "--no-ipv6", "--no-verify",
                    "--concurrency", "1", "--json", dsn=db.dsn, timeout=180)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout.strip().splitlines()[-1])
    got = dict(_rows(db, "SELECT hostname, status FROM tls_handshake WHERE run_id=%s", out["run_id"]))
    assert sorted(got) == sorted(names)
    assert got.pop("nxdomain-s.example.test") == "resolution-failed"
    assert set(got.values()) == {"success"}, got
    assert out.get("resolution-failed") == 1, out
    assert sn.stats["kernel_drops"] == 0
    questions = [p for p in sn.packets if p.get("dns_id") is not None]
    syns = [p for p in sn.packets if p.get("syn") and p["dst"] == TLSBENCH and p["dport"] == 443]
    assert len(syns) == 12 and len(questions) >= 13, (len(syns), len(questions))
    first_syn = min(p["t"] for p in syns)
    before = [p for p in questions if p["t"] < first_syn]
    # the first batch and the one resolved ahead (4 + 4 names, A only); the rest while probing
    assert len(before) <= 8 + 2, f"{len(before)} of {len(questions)} DNS questions before the first SYN"
    assert len(before) < len(questions)


def test_quic_dry_run_contacts_no_host(db, testbed, tmp_path):
    """The dry runs of scan quic, quic-discover and tls ask the testbed's resolver about the
    list's names (as their runs do: the plan judges each address) and send nothing else:
    no packet to a host. (Before, they resolved nothing, and their plans could not count
    what the policy blocks.)"""
    names = ["www.example.test", "retry.example.test", "notoken.example.test", "a.test"]
    _import(db, tmp_path, names, "quicdry")
    resolver = {"198.18.1.1", "2001:2:0:1::1"}   # the testbed's unbound (the vantage's resolv.conf)
    gt = testbed.status()["ground_truth"]
    addrs = {a for kind in ("tls_hosts", "quic_hosts") for h in gt[kind] if h["hostname"] in names
             for a in h["addresses"]}
    for cmd in (["scan", "quic"], ["scan", "quic-discover"], ["scan", "tls"]):
        with vantage_capture(tmp_path / f"dry-{cmd[-1]}.jsonl") as sn:
            r = run_cli("testbed", "exec", "--", sys.executable, "-m", "netsurvey.cli", "--dsn", db.dsn, *cmd,
                        "--list", "quicdry", "--dry-run", dsn=db.dsn, timeout=120)
        assert r.returncode == 0, r.stderr
        # every name has an IPv4 and an IPv6 address (a.test too): one target each
        assert f"{2 * len(names)} targets would be probed" in r.stdout, r.stdout
        for h in names:
            assert h in r.stdout
        # to the hosts (the testbed is shared: other sessions' scans from the vantage are on
        # the bridge too); DNS questions to the resolver only
        sent = [p for p in sn.packets if p.get("proto") != "icmp6" and
                (p["dst"] in addrs or (p.get("dns_id") is not None and p["dst"] not in resolver))]
        assert sent == [], (cmd, sent[:5])
    # positive control: the same list without --dry-run contacts the hosts
    with vantage_capture(tmp_path / "real.jsonl") as sn:
        r = run_cli("testbed", "exec", "--", sys.executable, "-m", "netsurvey.cli", "--dsn", db.dsn, "scan", "quic",
                    "--list", "quicdry", "--timeout", "2s", "--no-resume", "--json", dsn=db.dsn, timeout=120)
    assert r.returncode == 0, r.stderr
    assert any(p["dst"] in addrs for p in sn.packets)
    out = json.loads(r.stdout.strip().splitlines()[-1])
    hosts = {h for h, in _rows(db, "SELECT DISTINCT hostname FROM quic_connection WHERE run_id=%s", out["run_id"])}
    assert hosts == set(names), hosts


def test_targets_given_with_shards_are_probed_once(db, testbed, tmp_path):
    """`--target` entries beside a sharded `--list` belong to one shard each (hashed like the
    list's names), not to every shard: before, each of the two shards handshook them all."""
    names = [f"l{i}.tlsbench.example.test" for i in range(6)]
    _import(db, tmp_path, names, "tlsshard")
    extra = [f"x{i}.tlsbench.example.test" for i in range(6)] + [f"y{i}.tlsbench.example.test={TLSBENCH}"
                                                                   for i in range(4)]
    with vantage_capture(tmp_path / "shards.jsonl") as sn:
        r = run_cli("testbed", "exec", "--", sys.executable, "-m", "netsurvey.cli", "--dsn", db.dsn, "scan", "tls",
                    "--list", "tlsshard", *[f"--target={t}" for t in extra], "--tls", "1.3",
                    "--no-check-resumption", "--no-ipv6", "--no-verify", "--procs", "2", dsn=db.dsn, timeout=180)
    assert r.returncode == 0, r.stderr
    run_id = int(r.stdout.strip().splitlines()[-1].split()[1].rstrip(":"))
    got = _rows(db, "SELECT hostname, count(*) FROM tls_handshake WHERE run_id=%s GROUP BY 1", run_id)
    want = names + [t.split("=")[0] for t in extra]
    assert dict(got) == {h: 1 for h in want}, got
    syns = [p for p in sn.packets if p.get("syn") and p["dst"] == TLSBENCH and p["dport"] == 443]
    assert len(syns) == len(want), len(syns)
