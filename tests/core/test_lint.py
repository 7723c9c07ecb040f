"""Lint and types are part of `make test`: ruff over every Python file of the checkout and
mypy over the packages netsurvey and scanners (both configured in pyproject.toml), each with
no findings. Their caches (.ruff_cache, .mypy_cache, git-ignored) keep a second run at ~1-2 s."""
from __future__ import annotations

import importlib.util
import subprocess
import sys

import pytest

from conftest import REPO


def _run(module: str, *args: str) -> subprocess.CompletedProcess:
    if importlib.util.find_spec(module) is None:
        pytest.fail(f"{module} is not installed in {sys.executable}: `make install` (requirements-test.lock)")
    return subprocess.run([sys.executable, "-m", module, *args], cwd=REPO, capture_output=True, text=True)


def test_ruff_finds_nothing():
    r = _run("ruff", "check", "--output-format", "concise", ".")
    assert r.returncode == 0, f"ruff check . (exit {r.returncode}):\n{r.stdout}{r.stderr}"


def test_mypy_finds_nothing():
    r = _run("mypy")   # packages, options and cache_dir from [tool.mypy]
    assert r.returncode == 0, f"mypy (exit {r.returncode}):\n{r.stdout}{r.stderr}"
