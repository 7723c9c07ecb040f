"""`netsurvey export`: one run's rows as JSONL, CSV and Parquet plus manifest.json, read
back with json, csv and pyarrow and compared with the values written; the Python API
(netsurvey.connect / netsurvey.load)."""
from __future__ import annotations

import csv
import datetime as dt
import hashlib
import json
import math
from pathlib import Path

import pytest

from conftest import run_cli
from netsurvey.export import export_run, run_tables
from netsurvey.targets import import_list

T0 = dt.datetime(2026, 11, 2, 10, 30, 15, 123456, tzinfo=dt.timezone.utc)
T0_ISO = "2026-11-02T10:30:15.123456+00:00"


@pytest.fixture
def run(db):
    """Run 1 (tfo, list 'sample' top 5) with three probes, one TLS handshake, one Atlas raw
    result and ping; run 2 with a probe that must not be exported."""
    import_list(db, Path("tests/data/sample_top.csv"), "sample", dt.date(2026, 11, 1))
    with db.connect() as conn:
        rid = conn.execute(
            "INSERT INTO scan_run (kind, parameters, vantage, tool_versions, status, started_at, finished_at, counts)"
            " VALUES ('tfo', '{\"list\": \"sample\", \"top\": 5}', '{\"host\": \"v1\", \"netns\": \"nstb-vantage\"}',"
            " '{\"netsurvey\": \"0.1.0\"}', 'finished', now(), now(), '{\"ok\": 2}') RETURNING id").fetchone()[0]
        other = conn.execute("INSERT INTO scan_run (kind, status) VALUES ('tfo', 'finished') RETURNING id").fetchone()[0]
        conn.execute(
            "INSERT INTO tfo_probe (run_id, round, rank, hostname, address, port, status, reply, tfo_kind, cookie,"
            " cookie_len, options, rcv_window, error, probed_at) VALUES"
            " (%(r)s, 0, 8, 'on1.tfo.test', '198.18.3.1', 80, 'success', 'syn-ack', 'rfc7413', '\\x00a1ff10'::bytea, 4,"
            "  ARRAY['mss=1460', 'sackok', 'say \"hi\", ok'], 65535, NULL, %(t)s),"
            " (%(r)s, 0, 10, 'off.tfo.test', '2001:2::3:2', 80, 'success', 'syn-ack', NULL, NULL, NULL,"
            "  ARRAY[]::text[], 64240, NULL, %(t)s),"
            " (%(r)s, 0, 2, 'example.test', NULL, 80, 'resolution-failed', NULL, NULL, NULL, NULL, NULL, NULL,"
            "  E'nxdomain\\nline two', %(t)s),"
            " (%(o)s, 0, 1, 'www.example.test', '198.18.2.1', 80, 'success', 'rst', NULL, NULL, NULL, NULL, 0, NULL, %(t)s)",
            {"r": rid, "o": other, "t": T0})
        conn.execute(
            "INSERT INTO tls_handshake (run_id, rank, hostname, address, port, version, status, cert_sha256, cert_sans,"
            " handshake_ms, observed_at) VALUES (%s, 13, 'tls12.example.test', '198.18.2.13', 443, '1.2', 'success',"
            " '\\xdeadbeef'::bytea, ARRAY['tls12.example.test', '*.example.test'], 'NaN', %s)", (rid, T0))
        conn.execute("INSERT INTO atlas_result_raw (run_id, msm_id, prb_id, ts, result, fetched_at) VALUES"
                     " (%s, 1001, 7, 1700000000, '{\"type\": \"ping\", \"avg\": 12.5, \"result\": [{\"rtt\": 12.5}]}', %s)",
                     (rid, T0))
        conn.execute("INSERT INTO atlas_ping (run_id, msm_id, prb_id, ts, role, af, sent, rcvd, avg_ms, rtts_ms)"
                     " VALUES (%s, 1001, 7, 1700000000, 'resolver', 4, 3, 2, 12.25, ARRAY[12.0, 12.5, NULL])", (rid,))
    return rid


def _probes_expected():
    return [
        {"rank": 8, "hostname": "on1.tfo.test", "address": "198.18.3.1", "cookie": "00a1ff10", "cookie_len": 4,
         "options": ["mss=1460", "sackok", 'say "hi", ok'], "error": None, "probed_at": T0_ISO},
        {"rank": 10, "hostname": "off.tfo.test", "address": "2001:2::3:2", "cookie": None, "cookie_len": None,
         "options": [], "error": None, "probed_at": T0_ISO},
        {"rank": 2, "hostname": "example.test", "address": None, "cookie": None, "cookie_len": None,
         "options": None, "error": "nxdomain\nline two", "probed_at": T0_ISO},
    ]


def _files(manifest):
    return {f["table"]: f for f in manifest["files"]}


def _check_manifest(out: Path, manifest: dict, rid: int, fmt: str):
    on_disk = json.loads((out / "manifest.json").read_text())
    assert on_disk["run"]["id"] == rid and on_disk["run"]["kind"] == "tfo"
    assert on_disk["run"]["parameters"] == {"list": "sample", "top": 5}
    assert on_disk["run"]["vantage"]["netns"] == "nstb-vantage"
    assert on_disk["run"]["tool_versions"] == {"netsurvey": "0.1.0"}
    assert on_disk["target_list"]["name"] == "sample" and on_disk["target_list"]["list_date"] == "2026-11-01"
    assert on_disk["exporter"]["netsurvey"] and "0010_model_views.sql" in on_disk["exporter"]["schema_migrations"]
    files = _files(on_disk)
    assert files["tfo_probe"]["rows"] == 3 and files["tls_handshake"]["rows"] == 1
    assert files["target"]["rows"] == 5            # the run's cut of its list
    assert files["dns_ttl_probe"]["rows"] == 0      # every table with run_id, empty ones too
    for f in on_disk["files"]:
        data = (out / f["file"]).read_bytes()
        assert hashlib.sha256(data).hexdigest() == f["sha256"] and len(data) == f["bytes"]
        assert f["file"].endswith("." + fmt)
    cols = {c["name"]: c for c in files["tfo_probe"]["columns"]}
    assert cols["cookie"]["type"] == "bytea" and "cookie" in cols["cookie"]["comment"].lower()
    # the files are exactly the ones the manifest lists
    assert sorted(p.name for p in out.iterdir()) == sorted([f["file"] for f in on_disk["files"]] + ["manifest.json"])


def test_export_jsonl_reads_back(db, run, tmp_path):
    out = tmp_path / "x"
    manifest = export_run(db, run, out, "jsonl", batch_rows=2)
    _check_manifest(out, manifest, run, "jsonl")
    rows = [json.loads(line) for line in (out / "tfo_probe.jsonl").read_text().splitlines()]
    got = sorted(rows, key=lambda r: r["rank"], reverse=True)
    exp = sorted(_probes_expected(), key=lambda r: r["rank"], reverse=True)
    for g, e in zip(got, exp):
        assert g["run_id"] == run
        assert {k: g[k] for k in e} == e
    tls = json.loads((out / "tls_handshake.jsonl").read_text())
    assert tls["cert_sha256"] == "deadbeef" and tls["cert_sans"] == ["tls12.example.test", "*.example.test"]
    assert tls["handshake_ms"] == "NaN"            # JSON has no NaN: the string, as documented
    raw = json.loads((out / "atlas_result_raw.jsonl").read_text())
    assert raw["result"] == {"type": "ping", "avg": 12.5, "result": [{"rtt": 12.5}]}   # nested JSON, not text
    ping = json.loads((out / "atlas_ping.jsonl").read_text())
    assert ping["rtts_ms"] == [12.0, 12.5, None] and ping["avg_ms"] == 12.25
    # streamed through a server-side cursor, 2 rows per fetch: 3 probe rows = 2 batches
    assert manifest["_batches"]["tfo_probe"] == 2 and manifest["_batches"]["target"] == 3


def test_export_csv_reads_back(db, run, tmp_path):
    out = tmp_path / "x"
    manifest = export_run(db, run, out, "csv")
    _check_manifest(out, manifest, run, "csv")
    with (out / "tfo_probe.csv").open(newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert len(rows) == 3
    by_rank = {int(r["rank"]): r for r in rows}
    assert by_rank[8]["cookie"] == "00a1ff10" and by_rank[8]["probed_at"] == T0_ISO
    assert json.loads(by_rank[8]["options"]) == ["mss=1460", "sackok", 'say "hi", ok']
    assert by_rank[10]["options"] == "[]" and by_rank[2]["options"] == ""     # empty array vs NULL
    assert by_rank[2]["error"] == "nxdomain\nline two" and by_rank[2]["address"] == ""
    assert by_rank[10]["address"] == "2001:2::3:2"
    with (out / "atlas_result_raw.csv").open(newline="") as fh:
        raw = next(csv.DictReader(fh))
    assert json.loads(raw["result"])["result"] == [{"rtt": 12.5}]
    with (out / "target.csv").open(newline="") as fh:
        assert [r["hostname"] for r in csv.DictReader(fh)][:2] == ["www.example.test", "example.test"]


def test_export_parquet_reads_back(db, run, tmp_path):
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq
    out = tmp_path / "x"
    manifest = export_run(db, run, out, "parquet", batch_rows=1)
    _check_manifest(out, manifest, run, "parquet")
    t = pq.read_table(out / "tfo_probe.parquet")
    assert str(t.schema.field("probed_at").type) == "timestamp[us, tz=UTC]"
    assert pa.types.is_list(t.schema.field("options").type) and pa.types.is_string(t.schema.field("options").type.value_type)
    assert t.schema.field("cookie").metadata[b"pg_type"] == b"bytea"
    rows = {r["rank"]: r for r in t.to_pylist()}
    for e in _probes_expected():
        g = rows[e["rank"]]
        assert g["probed_at"] == T0
        assert {k: g[k] for k in e if k != "probed_at"} == {k: v for k, v in e.items() if k != "probed_at"}
    assert pq.ParquetFile(out / "tfo_probe.parquet").metadata.num_row_groups == 3   # one per fetched batch
    tls = pq.read_table(out / "tls_handshake.parquet").to_pylist()[0]
    assert math.isnan(tls["handshake_ms"]) and tls["cert_sha256"] == "deadbeef"
    ping = pq.read_table(out / "atlas_ping.parquet").to_pylist()[0]
    assert ping["rtts_ms"] == [12.0, 12.5, None] and ping["af"] == 4
    empty = pq.read_table(out / "dns_ttl_probe.parquet")
    assert empty.num_rows == 0 and "ttl" in empty.schema.names


def test_tables_come_from_the_catalog(db, run):
    with db.connect() as conn:
        conn.execute("CREATE TABLE zz_new_probe (run_id bigint REFERENCES scan_run(id), v integer)")
        conn.execute("INSERT INTO zz_new_probe VALUES (%s, 42)", (run,))
        tables = run_tables(conn)
    assert "zz_new_probe" in tables and "tfo_probe" in tables and "job_shard" in tables
    assert "target" not in tables and "scan_run" not in tables and "tfo_support_by_cut" not in tables


def test_export_cli_table_view_and_errors(db, run, tmp_path):
    out = tmp_path / "one"
    r = run_cli("export", "--run", str(run), "--table", "tfo_support_by_cut", "--format", "csv",
                "--out", str(out), dsn=db.dsn)
    assert r.returncode == 0, r.stderr
    assert sorted(p.name for p in out.iterdir()) == ["manifest.json", "tfo_support_by_cut.csv"]
    with (out / "tfo_support_by_cut.csv").open(newline="") as fh:
        assert {r["cut"] for r in csv.DictReader(fh)} == {"10", "100", "1000", "10000", "100000", "1000000"}

    def usage(args, text):
        target = tmp_path / "never"
        r = run_cli("export", *args, "--out", str(target), dsn=db.dsn)
        assert r.returncode == 2, r.stderr
        lines = r.stderr.strip().splitlines()
        assert len(lines) == 1 and text in lines[0], r.stderr
        assert not target.exists()

    usage(["--run", "999999"], "no scan_run with id 999999")
    usage(["--run", str(run), "--format", "xml"], "--format")
    usage(["--run", str(run), "--table", "target"], "has no run_id column")
    r = run_cli("export", "--run", str(run), "--out", str(out), dsn=db.dsn)      # not empty
    assert r.returncode == 2 and "not an empty directory" in r.stderr


def test_python_api_load(db, run):
    pytest.importorskip("pandas")
    import netsurvey
    from netsurvey.errors import UsageError

    df = netsurvey.load(run, "tfo_probe", dsn=db.dsn)
    assert len(df) == 3 and set(df["hostname"]) == {"on1.tfo.test", "off.tfo.test", "example.test"}
    assert str(df["probed_at"].dt.tz) == "UTC" and (df["probed_at"] == T0).all()
    row = df.set_index("rank").loc[8]
    assert row["cookie"] == "00a1ff10" and list(row["options"]) == ["mss=1460", "sackok", 'say "hi", ok']
    assert df["cookie_len"].isna().sum() == 2
    two = netsurvey.load(run, "tfo_support_by_cut", columns=["cut", "tfo"], dsn=db.dsn)
    assert list(two.columns) == ["cut", "tfo"] and len(two) == 6
    assert len(netsurvey.load(run, "dns_ttl_probe", dsn=db.dsn)) == 0
    for args, text in [((999999, "tfo_probe"), "no scan_run"), ((run, "target"), "run_id column")]:
        with pytest.raises(UsageError, match=text):
            netsurvey.load(*args, dsn=db.dsn)
    with netsurvey.connect(dsn=db.dsn) as conn:
        assert conn.execute("SHOW TimeZone").fetchone()[0] == "UTC"
        assert conn.execute("SELECT count(*) FROM tfo_probe WHERE run_id = %s", (run,)).fetchone()[0] == 3


def test_duckdb_reads_the_parquet_export(db, run, tmp_path):
    duckdb = pytest.importorskip("duckdb")
    export_run(db, run, tmp_path / "x", "parquet")
    con = duckdb.connect()
    n, tfo = con.execute(f"SELECT count(*), count(*) FILTER (WHERE cookie_len > 0) "
                         f"FROM '{tmp_path / 'x' / 'tfo_probe.parquet'}'").fetchone()
    assert (n, tfo) == (3, 1)
