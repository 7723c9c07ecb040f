"""Shared options mean the same thing in every measurement (netsurvey/options.py): walked
from the registry, each shared name has one annotation, one parser and one set of bounds,
and a duration option takes ``5``, ``5s`` and ``500ms`` wherever it exists."""
from __future__ import annotations

import typing

import pytest
import typer

from netsurvey import cli, options
from netsurvey.measure import _command_for, load_registry

pytestmark = pytest.mark.unit


def _measurement_commands():
    for name, m in sorted(load_registry().items()):
        app = typer.Typer()
        app.command(name)(_command_for(m))
        cmd = typer.main.get_command(app)
        cli._prepare_commands(cmd)
        yield name, cmd


COMMANDS = list(_measurement_commands())


def _opt(p) -> str:
    return next((o for o in p.opts if o.startswith("--")), p.opts[0])


def _info(p):
    return p.type_descriptor.parameter_info


def test_every_measurement_is_walked():
    assert len(COMMANDS) >= 21


@pytest.mark.parametrize("name,cmd", COMMANDS, ids=[n for n, _ in COMMANDS])
def test_shared_options_have_one_type_one_parser_one_range(name, cmd):
    wrong = []
    for p in cmd.params:
        spec = options.SHARED.get(_opt(p))
        if spec is None:
            continue
        ann = p.type_descriptor.annotation
        if "annotation" in spec and ann != spec["annotation"]:
            wrong.append(f"{_opt(p)}: annotation {ann}, shared {spec['annotation']}")
        if _info(p).parser is not spec["parser"]:
            wrong.append(f"{_opt(p)}: parser {_info(p).parser}, shared {spec['parser']}")
        for bound in ("min", "max"):
            if bound in spec and getattr(p, bound) != spec[bound]:
                wrong.append(f"{_opt(p)}: {bound} {getattr(p, bound)}, shared {spec[bound]}")
    assert not wrong, f"scan {name}: " + "; ".join(wrong)


DURATIONS = [(name, _opt(p)) for name, cmd in COMMANDS for p in cmd.params
             if _info(p).parser in (options.parse_duration, options.parse_duration_or_zero)]


def test_timeout_is_a_duration_in_every_measurement_that_has_one():
    having = {name for name, cmd in COMMANDS for p in cmd.params if _opt(p) == "--timeout"}
    as_duration = {name for name, o in DURATIONS if o == "--timeout"}
    assert having and having == as_duration


@pytest.mark.parametrize("name,opt", DURATIONS, ids=[f"{n} {o}" for n, o in DURATIONS])
@pytest.mark.parametrize("text,seconds", [("5", 5.0), ("5s", 5.0), ("500ms", 0.5), ("2m", 120.0)])
def test_durations_parse_alike_everywhere(name, opt, text, seconds):
    cmd = dict(COMMANDS)[name]
    params = cmd.make_context(name, [opt, text], resilient_parsing=True).params
    p = next(p for p in cmd.params if _opt(p) == opt)
    assert params[p.name] == seconds


def test_one_duration_parser():
    """The scanners keep no duration parser of their own."""
    import re
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    defs = [f"{f.relative_to(root)}" for pkg in ("scanners", "browser_probes", "atlas", "netsurvey")
            for f in (root / pkg).rglob("*.py")
            if re.search(r"^\s*def parse_duration\w*\(", f.read_text(), re.M)]
    assert sorted(defs) == ["netsurvey/durations.py", "netsurvey/options.py"], defs


def test_check_targets_rules():
    from netsurvey.errors import UsageError

    options.check_targets("top1k", 10, [])
    options.check_targets(None, None, ["a.test"])
    for args, msg in (((None, 5, ["a.test"]), "--top needs --list"), (("", None, []), "--list"),
                      (("  ", None, []), "--list"), ((None, None, []), "give --list")):
        with pytest.raises(UsageError, match=msg):
            options.check_targets(*args)


_ = typing  # annotations are compared as objects
