"""The run path owns a run's life (netsurvey/measure.py): a measurement opens its run with
``open_scan(params)`` (its declared kind), adds to ``ctx.counts`` and returns; the run path
ends the run - finished when it returns, failed (with the error) when it raises, cancelled
on Ctrl-C or when the measurement says so, the previous run when it opens its next one.
In-process against a real database; nothing is contacted (no targets)."""
from __future__ import annotations

import psycopg
import pytest
import typer

from netsurvey import measure
from netsurvey.clicompat import Exit
from netsurvey.clictx import open_scan, state
from netsurvey.errors import UsageError
from netsurvey.runctx import RunContext


@pytest.fixture
def declared(db, monkeypatch):
    """Declare throwaway measurements on a private group; the registry forgets them after."""
    monkeypatch.setattr(state, "dsn", db.dsn)
    monkeypatch.setattr(state, "_db", None)
    monkeypatch.setattr(state, "_config", None)
    names: list[str] = []

    def declare(name: str, body, kind=None, render_text=None, group=None):
        measure.measurement(group or typer.Typer(), name, contacts_network=False, kind=kind,
                            render_text=render_text)(body)
        names.append(name)
        return measure.registry()[name]

    yield declare
    for n in names:
        measure._REGISTRY.pop(n, None)


def _runs(db) -> list[tuple]:
    with psycopg.connect(db.dsn) as c:
        return c.execute("SELECT kind, status, counts FROM scan_run ORDER BY id").fetchall()


def _run(m) -> None:
    measure.run_inline(RunContext(measurement=m.name), m, {})


def test_returning_finishes_the_run_with_its_counts_under_the_declared_kind(db, declared):
    def body():
        ctx = open_scan({"x": 1})
        ctx.counts.update(probed=3, success=2)
    _run(declared("rp-ok", body))
    assert _runs(db) == [("rp-ok", "finished", {"probed": 3, "success": 2})]


def test_a_second_engine_records_runs_under_its_declared_kind(db, declared):
    def body() -> None:
        open_scan({})
    _run(declared("rp-engine", body, kind="rp-shared-kind"))
    assert _runs(db) == [("rp-shared-kind", "finished", {})]


def test_raising_fails_the_run_with_partial_counts_and_the_error(db, declared):
    def body():
        ctx = open_scan({})
        ctx.counts["attempts"] = 7
        raise UsageError("--groups: bad line 3")
    with pytest.raises(UsageError):
        _run(declared("rp-fail", body))
    [(kind, status, counts)] = _runs(db)
    assert (kind, status, counts["attempts"]) == ("rp-fail", "failed", 7)
    assert counts["error"] == "UsageError: --groups: bad line 3"


def test_the_next_run_ends_the_one_before_and_the_last_ends_with_the_command(db, declared):
    def body():
        for i in range(3):
            open_scan({"round": i}).counts["round"] = i
    _run(declared("rp-rounds", body))
    assert _runs(db) == [("rp-rounds", "finished", {"round": i}) for i in range(3)]


def test_ctrl_c_cancels_and_a_chosen_outcome_is_kept(db, declared):
    def interrupted():
        open_scan({})
        raise KeyboardInterrupt

    def stopped_early():
        ctx = open_scan({})
        ctx.run.outcome = "cancelled"
        ctx.run.final_counts = lambda: {"rounds_done": 2}
    with pytest.raises(KeyboardInterrupt):
        _run(declared("rp-ctrl-c", interrupted))
    _run(declared("rp-early", stopped_early))
    assert [(k, s) for k, s, _ in _runs(db)] == [("rp-ctrl-c", "cancelled"), ("rp-early", "cancelled")]
    assert _runs(db)[1][2] == {"rounds_done": 2}


def test_exit_zero_finishes_exit_nonzero_fails(db, declared):
    def ok():
        open_scan({})
        raise Exit(0)

    def bad():
        open_scan({})
        raise Exit(1)
    for name, body in (("rp-exit0", ok), ("rp-exit1", bad)):
        with pytest.raises(Exit):
            _run(declared(name, body))
    assert [(k, s) for k, s, _ in _runs(db)] == [("rp-exit0", "finished"), ("rp-exit1", "failed")]


def test_open_scan_outside_a_measurement_needs_a_kind(db, declared):
    with pytest.raises(RuntimeError, match="kind="):
        open_scan({})
    with measure.run_path("rp-server"):
        open_scan({}, kind="rp-server").counts["queries"] = 4
    assert _runs(db) == [("rp-server", "finished", {"queries": 4})]


def test_no_plugin_ends_runs_or_catches_base_exception():
    """The run path alone ends runs: no plugin package calls finish or catches BaseException."""
    import re
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    found = []
    for pkg in ("scanners", "browser_probes", "atlas", "analysis", "testbed"):
        for f in (root / pkg).rglob("*.py"):
            for no, line in enumerate(f.read_text().splitlines(), 1):
                if re.search(r"\.finish\(|except BaseException", line):
                    found.append(f"{f.relative_to(root)}:{no}: {line.strip()}")
    assert not found, "\n".join(found)


def test_counts_json_cannot_hold_still_end_the_run(db, declared):
    """Counts JSON cannot hold as they are (a NaN mean, a set, a datetime) end the run all
    the same, with those values as text; before, json.dumps (TypeError) or jsonb ('NaN')
    failed inside finish and the run stayed 'running' with every count lost."""
    import datetime as dt

    def odd():
        ctx = open_scan({})
        ctx.counts.update(probed=2, mean_rtt_ms=float("nan"), seen={"a"}, at=dt.date(2024, 1, 2))
    _run(declared("rp-odd-counts", odd))
    [(kind, status, counts)] = _runs(db)
    assert (kind, status, counts["probed"]) == ("rp-odd-counts", "finished", 2)
    assert counts["mean_rtt_ms"] == "nan" and counts["at"] == "2024-01-02"


def test_a_failure_ending_the_previous_run_still_ends_the_next(db, declared, monkeypatch):
    """Ending run 1 fails when run 2 opens (the database went away for a moment): run 2
    was already inserted, so the run path must still end it; before, it was never
    adopted and stayed 'running' (and so did every run after a failing one)."""
    from netsurvey import runs as runs_mod

    real = runs_mod.Run.finish
    calls = []

    def flaky(self, status="finished", counts=None):
        calls.append(self.id)
        if len(calls) == 1:
            self.ended = True
            raise psycopg.OperationalError("server closed the connection")
        return real(self, status, counts)

    def two():
        open_scan({"round": 1})
        open_scan({"round": 2}).counts["round"] = 2
    monkeypatch.setattr(runs_mod.Run, "finish", flaky)
    with pytest.raises(psycopg.OperationalError):
        _run(declared("rp-flaky-end", two))
    runs_mod.release_run(db, calls[0])   # run 1's end failed: its liveness lock is this test's to give back
    statuses = [s for _, s, _ in _runs(db)]
    assert statuses == ["running", "failed"], statuses   # run 1: its end failed; run 2 ended by the run path


def test_sys_exit_zero_finishes_the_run(db, declared):
    import sys

    def body():
        open_scan({})
        sys.exit(0)
    with pytest.raises(SystemExit):
        _run(declared("rp-sysexit0", body))
    assert [(k, s) for k, s, _ in _runs(db)] == [("rp-sysexit0", "finished")]


@pytest.mark.parametrize("text", [
    "connection to password = s3cr3t failed", "password='a s3cr3t' refused", 'password="s3cr3t x"',
    "postgresql://u:s3cr3t@h/db unreachable", "host=h password=s3cr3t dbname=x"])
def test_a_failed_runs_error_never_holds_a_password(db, declared, text):
    def body():
        open_scan({})
        raise RuntimeError(text)
    with pytest.raises(RuntimeError):
        _run(declared("rp-secret", body))
    [(_, status, counts)] = _runs(db)
    assert status == "failed" and "s3cr3t" not in counts["error"], counts


# -- the summary: printed once, by the run path -------------------------------------------
def _stdout_of(m, capsys, **params) -> list[str]:
    capsys.readouterr()
    measure.run_inline(RunContext(measurement=m.name), m, params)
    return capsys.readouterr().out.splitlines()


def test_the_run_path_prints_the_returned_summary_once_as_json_or_text(db, declared, capsys):
    """One returned result, two forms: --json prints it as exactly one JSON line with the
    same keys and values (extra fields kept); text prints exactly one line. A measurement
    that printed its summary itself as well, or a run path that printed it twice or not at
    all, fails here."""
    import json

    def body():
        ctx = open_scan({})
        ctx.counts.update(success=2, timeout=1)
        return {"run_id": ctx.run.id, "counts": dict(ctx.counts), "engine": {"sent": 3}}
    m = declared("rp-summary", body)
    out = _stdout_of(m, capsys, as_json=True)
    run_id = q_last_run(db)
    assert len(out) == 1, out
    assert json.loads(out[0]) == {"run_id": run_id, "counts": {"success": 2, "timeout": 1}, "engine": {"sent": 3}}
    out = _stdout_of(m, capsys, as_json=False)
    assert out == [f"rp-summary run {q_last_run(db)}: success 2, timeout 1"], out
    # printed after the run ended: the summary never shows a run still 'running'
    assert [s for _, s, _ in _runs(db)] == ["finished", "finished"]


def test_a_measurement_returning_nothing_is_summed_up_from_its_counts(db, declared, capsys):
    import json

    def body():
        open_scan({}).counts.update(probed=4)
    m = declared("rp-summary-counts", body)
    out = _stdout_of(m, capsys, as_json=True)
    assert [json.loads(ln) for ln in out] == [{"run_id": q_last_run(db), "counts": {"probed": 4}}], out
    assert _stdout_of(m, capsys) == [f"rp-summary-counts run {q_last_run(db)}: probed 4"]


def test_render_text_shapes_the_text_only_and_json_stays_the_result(db, declared, capsys):
    import json

    def body():
        ctx = open_scan({})
        return {"run_id": ctx.run.id, "rows": [{"a": 1}, {"a": 2}]}
    m = declared("rp-summary-table", body, render_text=lambda r: "\n".join(f"row a={x['a']}" for x in r["rows"]))
    assert _stdout_of(m, capsys) == ["row a=1", "row a=2"]
    out = _stdout_of(m, capsys, as_json=True)
    assert len(out) == 1 and json.loads(out[0])["rows"] == [{"a": 1}, {"a": 2}], out


def test_no_summary_for_a_dry_run_a_failure_or_a_command_without_a_run(db, declared, capsys):
    from netsurvey.runctx import DryRunDone

    def dry():
        raise DryRunDone("rp")

    def fails():
        open_scan({})
        raise UsageError("bad")
    assert _stdout_of(declared("rp-no-run", lambda: None), capsys, as_json=True) == []
    assert _stdout_of(declared("rp-dry", dry), capsys, as_json=True) == []
    with pytest.raises(UsageError):
        _stdout_of(declared("rp-fails", fails), capsys, as_json=True)
    assert capsys.readouterr().out == ""


def test_json_is_the_run_paths_shared_option(db, declared):
    """--json is added by the declaration (in --help, parsed like any option) and reaches
    the run path; a measurement may not declare it again."""
    import json

    from typer.testing import CliRunner

    app = typer.Typer()

    @app.callback()
    def main() -> None:
        pass

    def body():
        ctx = open_scan({})
        ctx.counts["n"] = 1
        from netsurvey.runctx import json_output
        return {"run_id": ctx.run.id, "json_seen": json_output()}
    declared("rp-json-opt", body, group=app)
    r = CliRunner().invoke(app, ["rp-json-opt", "--json"])
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout.strip()) == {"run_id": q_last_run(db), "json_seen": True}
    assert "--json" in CliRunner().invoke(app, ["rp-json-opt", "--help"]).stdout

    def own_json(as_json: bool = typer.Option(False, "--json")):
        pass
    with pytest.raises(RuntimeError, match="reserved for the run path"):
        declared("rp-own-json", own_json)


def test_no_measurement_prints_its_own_json_summary():
    """Only the run path prints a measurement's summary: no print/echo of json.dumps in a
    plugin package, except the few commands that are not measurements (atlas fetch and
    asmap print their own results) and the observer's record stream."""
    import ast
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    allowed = {("atlas/cli.py", "fetch_cmd"), ("atlas/cli.py", "asmap_cmd"), ("browser_probes/observer.py", "*")}
    found = []
    for pkg in ("scanners", "browser_probes", "atlas"):
        for f in (root / pkg).rglob("*.py"):
            rel = str(f.relative_to(root))
            if "/tests/" in rel or rel.endswith("demo.py") or (rel, "*") in allowed:
                continue
            tree = ast.parse(f.read_text())
            for top in tree.body:
                for node in ast.walk(top):
                    if not (isinstance(node, ast.Call) and any(
                            isinstance(a, ast.Call) and isinstance(a.func, ast.Attribute) and a.func.attr == "dumps"
                            for a in node.args)):
                        continue
                    fn = node.func
                    name = fn.attr if isinstance(fn, ast.Attribute) else getattr(fn, "id", "")
                    where = getattr(top, "name", "")
                    if name in ("print", "echo") and (rel, where) not in allowed:
                        found.append(f"{rel}:{node.lineno} (in {where})")
    assert not found, "\n".join(found)


def q_last_run(db) -> int:
    with psycopg.connect(db.dsn) as c:
        return c.execute("SELECT max(id) FROM scan_run").fetchone()[0]
