"""Top-list import: good, zipped, bad lines, IDN, duplicates, 1M lines streaming."""
import datetime as dt
import resource
import zipfile

import pytest

from netsurvey.errors import UsageError
from netsurvey.targets import import_list, normalize_hostname, select_targets


def rows(db, name):
    return [(t.rank, t.hostname) for t in select_targets(db, name)]


def test_import_plain(db, tmp_path):
    f = tmp_path / "l.csv"
    f.write_text("1,Example.TEST\n2,www.example.test.\n\n# comment\n3,b.test\n")
    rep = import_list(db, f, "l", dt.date(2026, 1, 2))
    assert (rep.imported, rep.n_bad, rep.duplicates) == (3, 0, 0)
    assert rows(db, "l") == [(1, "example.test"), (2, "www.example.test"), (3, "b.test")]


def test_import_zipped_top1m(db, tmp_path):
    z = tmp_path / "tranco.zip"
    with zipfile.ZipFile(z, "w") as zf:
        zf.writestr("top-1m.csv", "".join(f"{i},h{i}.test\n" for i in range(1, 501)))
    rep = import_list(db, z, "z")
    assert rep.imported == 500
    assert select_targets(db, "z", top=3)[-1].hostname == "h3.test"


def test_idn_and_duplicates(db, tmp_path):
    f = tmp_path / "l.csv"
    f.write_text("1,bücher.test\n2,a.test\n3,A.test\n2,c.test\n4,xn--bcher-kva.test\n")
    rep = import_list(db, f, "idn")
    assert rows(db, "idn") == [(1, "xn--bcher-kva.test"), (2, "a.test")]
    assert rep.duplicates == 3 and rep.n_bad == 0


def test_bad_lines_reported_with_numbers(db, tmp_path):
    f = tmp_path / "l.csv"
    good = "".join(f"{i},h{i}.test\n" for i in range(1, 200))
    f.write_text(good + "x,bad.test\n200,bad name.test\n")
    rep = import_list(db, f, "b", max_bad_share=0.05)
    assert rep.imported == 199
    assert [(b.line_no, b.reason.split()[0]) for b in rep.bad] == [(200, "bad"), (201, "hostname")]


def test_too_many_bad_lines_imports_nothing(db, tmp_path):
    f = tmp_path / "l.csv"
    f.write_text("1,a.test\n2,-bad-.test\nthree,c.test\n")
    with pytest.raises(UsageError, match=r"l.csv:2: .*nothing imported"):
        import_list(db, f, "bad", max_bad_share=0.1)
    with db.connect() as conn:
        assert conn.execute("SELECT count(*) FROM target_list").fetchone()[0] == 0
        assert conn.execute("SELECT count(*) FROM target").fetchone()[0] == 0


def test_reimport_needs_replace(db, tmp_path):
    f = tmp_path / "l.csv"
    f.write_text("1,a.test\n")
    import_list(db, f, "r", dt.date(2026, 1, 1))
    with pytest.raises(UsageError, match="already imported"):
        import_list(db, f, "r", dt.date(2026, 1, 1))
    f.write_text("1,b.test\n")
    import_list(db, f, "r", dt.date(2026, 1, 1), replace=True)
    assert rows(db, "r") == [(1, "b.test")]


@pytest.mark.parametrize("raw,ok", [("a" * 64 + ".test", False), ("ok-1.test", True), ("-x.test", False),
                                    ("x..test", False), ("ÄÖ.test", True)])
def test_normalize(raw, ok):
    if ok:
        assert normalize_hostname(raw).isascii()
    else:
        with pytest.raises(ValueError):
            normalize_hostname(raw)


def test_million_lines_stream(db, tmp_path):
    f = tmp_path / "big.csv"
    with f.open("w") as fh:
        for i in range(1, 1_000_001):
            fh.write(f"{i},host{i}.example.test\n")
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    rep = import_list(db, f, "big")
    grown_mib = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
    assert rep.imported == 1_000_000
    assert grown_mib < 100, f"import grew RSS by {grown_mib:.0f} MiB: not streaming"
    with db.connect() as conn:
        assert conn.execute("SELECT max(rank) FROM target").fetchone()[0] == 1_000_000


def test_stream_counts_in_sql_and_shards_match_shard_of(db, tmp_path):
    """Issue 26: the list is streamed (server-side cursor), counted in SQL, and a shard's
    names are chosen in SQL by the same hash as shard.shard_of (every name exactly once
    over the shards, after the --top cut)."""
    from netsurvey import shard
    from netsurvey.runctx import RunContext, ShardSpec, activate
    from netsurvey.targets import STREAM_BATCH, stream_targets

    n = STREAM_BATCH + 1234   # more than one batch of the cursor
    f = tmp_path / "l.csv"
    f.write_text("".join(f"{i},n{i}.b{i // 16}.scale.test\n" for i in range(1, n + 1)) + "99999999,xn--bcher-kva.test\n")
    import_list(db, f, "s")
    s = stream_targets(db, "s")
    assert len(s) == n + 1
    assert [t.rank for t in s] == list(range(1, n + 1)) + [99999999]
    assert len(stream_targets(db, "s", top=77)) == 77
    for count in (1, 3, 7):
        seen = []
        for i in range(count):
            with activate(RunContext(measurement="x", shard=ShardSpec(i, count, 1))):
                part = stream_targets(db, "s", top=n)
                got = list(part)
                assert len(part) == len(got)
                assert all(shard.shard_of(t.hostname, count) == i for t in got)
                seen += [t.hostname for t in got]
        assert sorted(seen) == sorted(h for _, h in rows(db, "s")[:n])
