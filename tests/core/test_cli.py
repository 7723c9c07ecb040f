"""CLI end to end (the real command in a subprocess): the README's sequence, error paths
(one line on stderr, exit 2, nothing written) and config validation."""
import json

import pytest

from conftest import run_cli


def test_readme_sequence(db, tmp_path):
    assert run_cli("db", "up", dsn=db.dsn).returncode == 0
    r = run_cli("targets", "import", "tests/data/sample_top.csv", "--list", "sample", dsn=db.dsn)
    assert r.returncode == 0, r.stderr
    r = run_cli("sql", "select count(*) as n from target", "--format", "json", dsn=db.dsn)
    assert json.loads(r.stdout) == [{"n": 22}]
    r = run_cli("sql", "select rank, hostname from target order by rank limit 2", "--format", "csv", dsn=db.dsn)
    assert r.stdout.splitlines() == ["rank,hostname", "1,www.example.test", "2,example.test"]


@pytest.mark.parametrize("query", ["delete from target", "select 1; commit; delete from target",
                                   "create table x (a int)", "update target set rank = rank + 1"])
def test_sql_refuses_writes(db, query):
    run_cli("targets", "import", "tests/data/sample_top.csv", "--list", "s", dsn=db.dsn)
    r = run_cli("sql", query, dsn=db.dsn)
    assert r.returncode == 2
    assert r.stderr.startswith("netsurvey: error:") and len(r.stderr.strip().splitlines()) == 1
    with db.connect() as conn:
        assert conn.execute("select count(*) from target").fetchone()[0] == 22


def assert_usage_error(r, fragment):
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert fragment in r.stderr
    assert "Traceback" not in r.stderr


def test_bad_inputs_exit_2(db, tmp_path):
    assert_usage_error(run_cli("targets", "import", "nope.csv", "--list", "x", dsn=db.dsn), "nope.csv: file not found")
    assert_usage_error(run_cli("targets", "import", "tests/data/sample_top.csv", "--list", "x", "--date", "2026-13-01",
                               dsn=db.dsn), "--date")
    bad = tmp_path / "bad.csv"
    bad.write_text("1,ok.test\nfoo\n2,b..test\n")
    assert_usage_error(run_cli("targets", "import", str(bad), "--list", "x", dsn=db.dsn), "bad.csv:2:")
    assert_usage_error(run_cli("sql", "select 1", "--format", "xml", dsn=db.dsn), "--format")
    with db.connect() as conn:
        assert conn.execute("select count(*) from target_list").fetchone()[0] == 0


def test_config_errors_name_file_key_reason(db, tmp_path):
    c = tmp_path / "survey.toml"
    c.write_text("[etiquette]\nrate_pps = -5\n")
    assert_usage_error(run_cli("--config", str(c), "targets", "list", dsn=db.dsn), f"{c}: etiquette.rate_pps:")
    c.write_text("[etiquette]\nallow = ['300.1.2.0/24']\n")
    assert_usage_error(run_cli("--config", str(c), "targets", "list", dsn=db.dsn), "etiquette.allow")
    c.write_text("[databse]\n")
    assert_usage_error(run_cli("--config", str(c), "targets", "list", dsn=db.dsn), "databse")
    c.write_text("[database\n")
    assert_usage_error(run_cli("--config", str(c), "targets", "list", dsn=db.dsn), "not valid TOML")
    assert_usage_error(run_cli("--config", str(tmp_path / "missing.toml"), "targets", "list", dsn=db.dsn),
                       "config file not found")


def test_sample_config_is_valid_and_complete():
    from conftest import REPO
    from netsurvey.config import SurveyConfig, load_config

    cfg = load_config(REPO / "config" / "survey.toml")
    # the sample shows every default; the one setting it changes on purpose: the testbed's
    # servers are the researcher's own (per-destination limit off for them)
    assert cfg.etiquette.own_servers == ["198.18.0.0/15", "2001:2::/48"]
    assert cfg.model_copy(update={"etiquette": cfg.etiquette.model_copy(update={"own_servers": []})}) == SurveyConfig()


def test_external_server_unreachable_is_one_line(tmp_path):
    r = run_cli("db", "status", dsn="postgresql://nobody@/nodb?host=" + str(tmp_path))
    assert_usage_error(r, "cannot connect to database")


def test_db_status_json(db):
    r = run_cli("db", "status", "--json", dsn=db.dsn)
    st = json.loads(r.stdout)
    assert st["pending"] == [] and "target" in st["rows"]


def test_demo_on_embedded_database(server_reachable_dir):
    """`netsurvey demo` from a fresh working directory starts its own embedded database."""
    import shutil

    from conftest import REPO

    tmp_path = server_reachable_dir

    shutil.copytree(REPO / "config", tmp_path / "config")
    r = run_cli("demo", cwd=tmp_path, timeout=300)
    assert r.returncode == 0, r.stderr
    assert "22 targets" in r.stdout
    assert (tmp_path / ".netsurvey" / "pgdata").exists()
    assert run_cli("db", "down", cwd=tmp_path).returncode == 0


def test_version_prints_the_package_and_commit():
    p = run_cli("--version")
    assert p.returncode == 0 and p.stdout.startswith("netsurvey ") and "(code " in p.stdout, p


@pytest.mark.parametrize("args", [
    ("simulate", "oob-tokens", "--rtt", "10", "--rtt", "20"),
    ("simulate", "oob-tokens", "--rtt=10", "--rtt", "20"),
    ("--dsn", "host=/nonexistent", "--dsn", "host=/elsewhere", "db", "status"),
])
def test_an_option_taking_one_value_is_refused_when_repeated(args):
    """issue 22: `--failure-rate 0.393 --failure-rate 0.247` kept only the last, silently."""
    p = run_cli(*args)
    assert p.returncode == 2 and "given 2 times" in p.stderr and len(p.stderr.strip().splitlines()) == 1, p
    assert not p.stdout


def test_repeatable_options_still_accumulate():
    p = run_cli("simulate", "oob-tokens", "--rtt", "30")
    assert p.returncode == 0 and json.loads(p.stdout)["model"] == "oob-tokens", p


def test_units_in_help_texts_are_shown():
    """Rich markup swallowed "[ms]" and "[s]" in help texts."""
    p = run_cli("simulate", "oob-tokens", "--help", env={"COLUMNS": "200"})
    assert p.returncode == 0 and "Handshake processing time [ms]" in p.stdout, p.stdout


def test_plot_list_piped_is_tsv_with_whole_names():
    p = run_cli("plot", "--list")
    lines = p.stdout.strip().splitlines()
    assert p.returncode == 0 and lines[0] == "name\tthesis\tsource_tables\twhat", p
    names = [ln.split("\t")[0] for ln in lines[1:]]
    assert all(ln.count("\t") == 3 for ln in lines) and "atlas-resolver-rtt" in names
    assert not any("…" in n for n in names)


def test_shell_completion_completes_commands():
    """issue 22: shell completion (`netsurvey --install-completion` / `--show-completion bash`)."""
    p = run_cli(env={"_NETSURVEY_COMPLETE": "complete_bash", "COMP_WORDS": "netsurvey scan dns", "COMP_CWORD": "2"})
    assert p.returncode == 0 and set(p.stdout.split()) == {"dns-ttl", "dns-ecs", "dns-second-opinion"}, p


def test_targets_import_reads_stdin(db):
    """issue 22: `-` for stdin where a file is read (plain CSV; a zip needs seeking)."""
    import os
    import subprocess
    import sys

    from conftest import REPO

    env = {**os.environ, "NETSURVEY_DSN": db.dsn, "PYTHONPATH": str(REPO)}
    p = subprocess.run([sys.executable, "-m", "netsurvey.cli", "targets", "import", "-", "--list", "piped", "--json"],
                       input="1,a.test\n2,b.test\n3,a.test\n", env=env, cwd=REPO, capture_output=True, text=True,
                       timeout=120)
    assert p.returncode == 0, p.stderr
    r = json.loads(p.stdout)
    assert (r["name"], r["imported"], r["duplicates"]) == ("piped", 2, 1), r


def test_repeatable_options_also_take_comma_separated_values(db, routes_ns):
    """issue 22: one convention for list options - repeat the option, or give A,B,C once."""
    p = run_cli("scan", "dns-ttl", "--name", "a.test,b.test", "--name", "c.test", "--nameserver", "198.18.1.53",
                "--dry-run", dsn=db.dsn, netns=routes_ns)
    assert p.returncode == 0, p.stderr
    listed = [ln.split()[1] for ln in p.stdout.splitlines() if ln.strip().startswith("- ")]
    assert listed == ["a.test", "b.test", "c.test"], p.stdout


def test_options_whose_values_hold_commas_are_not_split():
    """A URL's query and Atlas's probes:1,2,3 keep their commas (repeated only)."""
    import typer.main

    import netsurvey.cli as cli

    cmd = typer.main.get_command(cli.app)
    cli._prepare_commands(cmd)
    probes = next(p for p in cmd.commands["atlas"].commands["run"].params if p.name == "probes")
    url = next(p for p in cmd.commands["browser"].commands["pageload"].params if p.name == "url")
    assert list(probes.process_value(None, ("probes:1,2,3",))) == ["probes:1,2,3"]
    assert list(url.process_value(None, ("https://a.test/?x=1,2",))) == ["https://a.test/?x=1,2"]


def _all_commands(cmd, path=()):
    yield path, cmd
    for name, sub in getattr(cmd, "commands", {}).items():
        yield from _all_commands(sub, (*path, name))


def test_every_repeatable_option_accepts_its_default_and_numbers():
    """The 2026-11-24 CI: --wait's default [6.0] (a list of floats) reached the comma splitter,
    which called .strip() on a float: every `browser track` ended in a traceback. Each
    repeatable option of every command must take its own default, and numeric ones 1,2."""
    import typer.main

    import netsurvey.cli as cli
    try:
        import typer._click as click
    except ImportError:  # older typer uses click itself
        import click

    cmd = typer.main.get_command(cli.app)
    cli._prepare_commands(cmd)
    checked = 0
    for path, c in _all_commands(cmd):
        for p in c.params:
            if not getattr(p, "multiple", False):
                continue
            ctx = click.Context(c, info_name=" ".join(path))
            default = p.get_default(ctx, call=True)
            if getattr(p, "required", False) and not default:
                continue
            p.process_value(ctx, tuple(default or ()))
            if default and isinstance(list(default)[0], (int, float)):
                assert list(p.process_value(ctx, ("1,2", "3"))) == [1, 2, 3], (path, p.name)
            checked += 1
    assert checked >= 10, checked


def test_an_internal_error_is_one_line_without_secrets(tmp_path):
    """A bug of ours reaches the user as one line (exit 1), with a DSN's password masked; the
    traceback only with NETSURVEY_TRACEBACK=1."""
    import subprocess
    import sys

    code = ("import sys, netsurvey.cli as c\n"
            "def boom(): raise RuntimeError('postgresql://u:hunter2@h/db broke')\n"
            "c.typer.main.get_command = lambda app: boom()\n"
            "sys.argv = ['netsurvey', 'db', 'status']\n"
            "c.main()\n")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert p.returncode == 1, p
    assert len(p.stderr.strip().splitlines()) == 1 and "internal error" in p.stderr, p.stderr
    assert "hunter2" not in p.stderr and "Traceback" not in p.stderr, p.stderr
    import os
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                       env={**os.environ, "NETSURVEY_TRACEBACK": "1"})
    assert "Traceback" in p.stderr, p.stderr


def test_dry_run_applies_the_block_list_to_addresses_given_as_targets(db, tmp_path, routes_ns):
    """`scan tls --target 198.18.2.21 --dry-run` with that address blocked said "1 targets
    would be probed, 0 blocked by policy" (the plan looked only at resolved addresses, and a
    literal target is the target's name); the real scan does skip it (review attack, issue 20)."""
    import psycopg

    cfg = tmp_path / "block.toml"
    cfg.write_text('[etiquette]\nblock = ["198.18.2.21/32"]\n')
    # (with --no-ipv6 the run would take ::ffff:198.18.2.21 for an IPv6 address it does not
    # probe - resolution-failed - and so does the plan)
    r = run_cli("--config", str(cfg), "scan", "tls", "--target", "198.18.2.21", "--target", "::ffff:198.18.2.21",
                "--target", "198.18.2.20", "--no-verify", "--dry-run", dsn=db.dsn, netns=routes_ns)
    assert r.returncode == 0, r.stderr
    assert "1 targets would be probed, 2 blocked by policy" in r.stdout, r.stdout
    probed = [ln for ln in r.stdout.splitlines()[1:] if not ln.lstrip().startswith("blocked")]
    assert "198.18.2.21" not in "\n".join(probed) and "198.18.2.20" in "\n".join(probed), r.stdout
    with psycopg.connect(db.dsn) as c:
        status, counts = c.execute("SELECT status, counts FROM scan_run ORDER BY id DESC LIMIT 1").fetchone()
    assert status == "cancelled" and counts.get("blocked") == 2, counts


def test_dry_run_of_a_streamed_list_is_counted_in_sql(db, tmp_path, routes_ns):
    """Issue 26: `scan dns-ttl --list` streams its names; the dry-run plan counts them in
    SQL and lists the first 20 from the cursor (nothing resolved or contacted). A name
    spelling a blocked address is asked about, not contacted: blocked by nothing, as in the
    run (the plan used to count it blocked)."""
    import psycopg

    from netsurvey.targets import import_list

    f = tmp_path / "l.csv"
    f.write_text("".join(f"{i},n{i}.example.test\n" for i in range(1, 31)) + "31,198.18.2.21\n")
    import_list(db, f, "l")
    cfg = tmp_path / "block.toml"
    cfg.write_text('[etiquette]\nallow = ["198.18.0.0/15"]\nblock = ["198.18.2.21/32"]\n')
    r = run_cli("--config", str(cfg), "scan", "dns-ttl", "--list", "l", "--name", "extra.example.test",
                "--nameserver", "198.18.1.53", "--dry-run", dsn=db.dsn, netns=routes_ns)
    assert r.returncode == 0, r.stderr
    assert "32 targets would be probed, 0 blocked by policy" in r.stdout, r.stdout
    lines = r.stdout.splitlines()
    assert "n1.example.test" in lines[1] and "... and 12 more" in lines[-1], r.stdout
    with psycopg.connect(db.dsn) as c:
        status, counts = c.execute("SELECT status, counts FROM scan_run ORDER BY id DESC LIMIT 1").fetchone()
    assert status == "cancelled" and counts == {"dry-run-targets": 32, "blocked": 0, "blocked-not-allowed": 0,
                                                "blocked-reserved": 0, "blocked-blocklist": 0,
                                                "blocked-off-machine-route": 0}, counts
