"""The install path (issue 23): a virtual environment made by the Makefile, pinned by the
lock files, Go tools found on PATH first; and, marked slow, a fresh install from Debian's
own EXTERNALLY-MANAGED /usr/bin/python3 (`make test-install`)."""
from __future__ import annotations

import os
import re
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import REPO as ROOT

LOCKS = {n: ROOT / n for n in ("requirements.lock", "requirements-test.lock", "requirements-fuzz.lock")}
SYSTEM_PYTHON = Path("/usr/bin/python3")


def pins(path: Path) -> dict[str, list[str]]:
    """name -> ['version ; marker', ...] for every pinned line of a lock file."""
    out: dict[str, list[str]] = {}
    for line in path.read_text().splitlines():
        if line.strip() and not line.lstrip().startswith("#"):
            name, _, rest = line.partition("==")
            out.setdefault(name.strip().lower().replace("_", "-").replace(".", "-"), []).append(rest.strip())
    return out


def test_lock_files_pin_one_resolution():
    """runtime <= test <= fuzz with identical pins; atheris only in the fuzz lock; every
    direct dependency of pyproject.toml is pinned exactly."""
    run, test, fuzz = (pins(LOCKS[n]) for n in LOCKS)
    assert run and set(run) <= set(test) <= set(fuzz)

    def versions(p: dict) -> dict:   # the markers may differ (tzdata: win32 vs win32 or emscripten,
        return {k: sorted(v.split(";")[0].strip() for v in vs) for k, vs in p.items()}   # via pandas)
    run, test, fuzz = versions(run), versions(test), versions(fuzz)
    assert all(test[k] == fuzz[k] for k in test) and all(run[k] == test[k] for k in run)
    assert "atheris" in fuzz and "atheris" not in test
    assert {"pytest", "pytest-timeout", "hypothesis"} <= set(test) - set(run)
    import tomllib

    meta = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    for dep in meta["dependencies"]:
        name = re.split(r"[\[<>=!~ ;]", dep, maxsplit=1)[0].lower().replace("_", "-").replace(".", "-")
        assert name in run, f"{name} is not in requirements.lock (run `make lock`)"
    typer = next(d for d in meta["dependencies"] if d.startswith("typer"))
    assert "<" in typer, "typer is pre-1.0: keep an upper bound"


def test_make_targets_use_the_venv_python():
    """`make -n` of every Python target runs .venv/bin/python, never a bare python3/netsurvey."""
    for target in ("test", "demo", "bench", "fuzz", "clean-db", "test-install"):
        # as a top-level make: under `make test` (CI) MAKELEVEL/MAKEFLAGS would add
        # "make[1]: Entering directory" lines and the outer PYTHON=...
        env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MAKELEVEL", "MFLAGS")}
        p = subprocess.run(["make", "--no-print-directory", "-n", target, "PYTHON=/nonexistent/python3"], cwd=ROOT,
                           capture_output=True, text=True, timeout=30, env=env)
        assert p.returncode == 0, p.stderr
        cmds = [ln for ln in p.stdout.splitlines() if ln.strip()]
        assert any('PYTHON="/nonexistent/python3"' in ln and "scripts/install.sh" in ln
                   for ln in cmds) or target == "clean-db", cmds
        runs = [ln for ln in cmds if "scripts/install.sh" not in ln and not ln.startswith("rm ")]
        assert runs and all(ln.lstrip("-").startswith(".venv/bin/python ") for ln in runs), (target, runs)


def test_nothing_spawns_a_bare_python3_or_netsurvey():
    """Subprocesses use sys.executable (the venv's python), so nothing needs PATH."""
    bad = re.compile(r"""[\[(]\s*["'](python3?|netsurvey)["']\s*,""")
    hits = []
    for d in ("netsurvey", "testbed", "tests", "scanners", "analysis", "atlas", "browser_probes", "fuzz", "bench"):
        for f in (ROOT / d).rglob("*.py"):
            if f == Path(__file__).resolve():
                continue
            for i, line in enumerate(f.read_text().splitlines(), 1):
                if bad.search(line) and "sys.argv" not in line:
                    hits.append(f"{f.relative_to(ROOT)}:{i}: {line.strip()}")
    assert not hits, hits


def _fake_tool(d: Path, name: str, says: str) -> Path:
    f = d / name
    f.write_text(f"#!/bin/sh\necho '{says}'\n")
    f.chmod(f.stat().st_mode | stat.S_IXUSR)
    return f


def test_go_tools_found_on_path_first(tmp_path, monkeypatch):
    from netsurvey import gotools
    from netsurvey.errors import UsageError

    monkeypatch.setenv("PATH", str(tmp_path))
    local = gotools.REPO_BIN / "zdns"
    if local.exists():   # built by make install: the fallback, with the go.mod pin as version
        assert gotools.find_tool("zdns") == local
        assert gotools.tool_version("zdns") == "v2.0.5"
    fake = _fake_tool(tmp_path, "zdns", "zdns version 9.9.9")
    assert gotools.find_tool("zdns") == fake
    assert gotools.tool_version("zdns") == f"{fake} (zdns version 9.9.9)"
    monkeypatch.setattr(gotools, "REPO_BIN", tmp_path / "nowhere")
    assert gotools.find_tool("zgrab2") is None
    with pytest.raises(UsageError) as exc:
        gotools.require_tool("zgrab2")
    assert "\n" not in str(exc.value) and "build_go_tools.sh zgrab2" in str(exc.value)


def test_zgrab_and_zdns_backends_use_the_lookup(tmp_path, monkeypatch):
    from pathlib import Path as P

    from scanners.dns.zdns_backend import zdns_binary
    from scanners.tls.zgrab import zgrab_argv

    monkeypatch.setenv("PATH", str(tmp_path))
    z = _fake_tool(tmp_path, "zgrab2", "x")
    d = _fake_tool(tmp_path, "zdns", "x")
    assert zgrab_argv(10, P("/dev/null"))[0] == str(z)
    assert zdns_binary() == d


def test_install_is_a_fast_no_op_when_installed():
    """Run from `make test`: the second install of the same venv does nothing, quickly."""
    venv = Path(sys.prefix)
    marker = venv / ".netsurvey-python"
    if venv != ROOT / ".venv" or not marker.exists():
        pytest.skip("not running from the Makefile's .venv")
    interpreter = marker.read_text().split()[0]
    t0 = time.monotonic()
    p = subprocess.run(["bash", "scripts/install.sh"], cwd=ROOT, capture_output=True, text=True, timeout=120,
                       env={**os.environ, "PYTHON": interpreter, "VENV": str(venv)})
    took_s = time.monotonic() - t0
    assert p.returncode == 0, p.stderr
    assert "install:" not in p.stdout, p.stdout
    assert took_s < 20, took_s   # ~0.3 s idle; generous for a loaded CI machine


@pytest.mark.slow
@pytest.mark.skipif(not SYSTEM_PYTHON.exists(), reason="no /usr/bin/python3")
def test_fresh_install_from_debians_python(tmp_path):
    """Debian's python3 refuses pip installs (PEP 668); install.sh puts everything in a
    venv made from it, and netsurvey then runs from that venv alone."""
    externally = subprocess.run([str(SYSTEM_PYTHON), "-c", "import sysconfig; print(sysconfig.get_path('stdlib'))"],
                                capture_output=True, text=True, check=True).stdout.strip()
    assert (Path(externally) / "EXTERNALLY-MANAGED").exists(), "not a PEP 668 system python"
    venv = tmp_path / "venv"
    env = {**os.environ, "PYTHON": str(SYSTEM_PYTHON), "VENV": str(venv)}
    t0 = time.monotonic()
    p = subprocess.run(["bash", "scripts/install.sh"], cwd=ROOT, capture_output=True, text=True, timeout=900, env=env)
    assert p.returncode == 0, p.stdout + p.stderr
    cold_s = time.monotonic() - t0
    assert (venv / ".netsurvey-python").read_text().startswith(f"{SYSTEM_PYTHON} 3.")
    py = venv / "bin" / "python"
    check = subprocess.run([str(py), "-m", "pip", "check"], capture_output=True, text=True)
    assert check.returncode == 0, check.stdout
    clean_env = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "HOME": os.environ.get("HOME", "/root")}
    cli = subprocess.run([str(venv / "bin" / "netsurvey"), "targets", "--help"], capture_output=True, text=True,
                         env=clean_env, cwd=tmp_path)
    assert cli.returncode == 0 and "Usage" in cli.stdout, cli.stderr
    imp = subprocess.run([str(py), "-c", "import pyasn, netsurvey.cli, scanners.tls.zgrab, sys; print(sys.base_prefix)"],
                         capture_output=True, text=True, env=clean_env, cwd=tmp_path)
    assert imp.returncode == 0 and imp.stdout.strip() == "/usr", imp.stderr
    t0 = time.monotonic()
    again = subprocess.run(["bash", "scripts/install.sh"], cwd=ROOT, capture_output=True, text=True, timeout=120, env=env)
    assert again.returncode == 0 and "install:" not in again.stdout, again.stdout
    assert time.monotonic() - t0 < 20
    print(f"fresh install from {SYSTEM_PYTHON}: {cold_s:.0f} s")


@pytest.mark.parametrize("version", ["3.13", "3.10"])
def test_install_refuses_an_unsupported_python_in_one_line(tmp_path, version):
    """pgserver (the embedded PostgreSQL) has no wheel for 3.13: say so before making anything."""
    import glob

    found = sorted(glob.glob(f"/root/.pyenv/versions/{version}.*/bin/python3")) or \
        [p for p in (f"/usr/bin/python{version}",) if Path(p).exists()]
    if not found:
        pytest.skip(f"no Python {version} on this machine")
    venv = tmp_path / "venv"
    p = subprocess.run(["bash", "scripts/install.sh"], cwd=ROOT, capture_output=True, text=True, timeout=120,
                       env={**os.environ, "PYTHON": found[0], "VENV": str(venv), "NETSURVEY_SKIP_APT": "1"})
    assert p.returncode == 2, p.stdout + p.stderr
    assert len(p.stderr.strip().splitlines()) == 1 and "3.11 or 3.12" in p.stderr, p.stderr
    assert not venv.exists()
