"""A generated sweep of hostile values over every option of every command, taken from the
command line's own tree (nothing listed by hand): each value of a class that no option
may take is refused while parsing — exit 2, one line, before anything runs, so nothing is
created. The classes: bytes that are not UTF-8, control characters (a newline), numbers
that are not finite (``nan``, ``inf``, ``1e309``), an empty path, a directory where a file
is written, ports outside 1..65535, counts below 1.

The parse runs in-process (``make_context``: every option's parser, bounds and callbacks,
no command body), ~ms per case, so the whole sweep fits in ``make test``.
"""
from __future__ import annotations

import typing
from pathlib import Path

import pytest

from netsurvey import cli
from netsurvey.clicompat import click_exceptions as click

pytestmark = pytest.mark.unit

NOT_UTF8 = b"list\xff\xfe".decode("utf-8", "surrogateescape")
#: C0 controls, C1 controls (NEL; the 8-bit CSI a terminal takes for ESC [) and the line
#: separator (str.splitlines breaks a stored value, a log line there)
CONTROL = ["a\nb", "a\rb", "x\x1b[31m", "a\x85b", "x\x9b31m", "a\u2028b"]
#: digits that look like (or are read by float() as) ASCII digits: no duration takes them
CONFUSABLE_DIGITS = ["\u0661\u0660", "\uff15s", "5\u2028"]
NOT_FINITE = ["nan", "inf", "-inf", "1e309", "NaN"]
#: options counting things that must be at least 1 wherever they appear
COUNTS = {"--concurrency", "--top", "--senders", "--repeat", "--rounds", "--shards", "--procs",
          "--hosts-in-flight", "--stop-after"}


def _tree():
    import typer

    cmd = typer.main.get_command(cli.app)
    cli._prepare_commands(cmd)
    out = []

    def walk(c, path):
        out.append((tuple(path), c))
        for name, sub in (getattr(c, "commands", None) or {}).items():
            walk(sub, [*path, name])
    walk(cmd, [])
    return cmd, out


ROOT, COMMANDS = _tree()


def _kind(p) -> typing.Any:
    return cli._annotation_kind(p)


def _ann(p):
    td = getattr(p, "type_descriptor", None)
    t = getattr(td, "annotation", None)
    args = [a for a in typing.get_args(t) if a is not type(None)]
    return args[0] if typing.get_origin(t) is typing.Union and len(args) == 1 else t


def _cases():
    for path, c in COMMANDS:
        for p in c.params:
            if getattr(p, "param_type_name", "") != "option" or getattr(p, "is_flag", False) \
                    or getattr(p, "hidden", False) or not p.opts:
                continue
            opt = p.opts[-1] if p.opts[-1].startswith("--") else p.opts[0]
            values = [NOT_UTF8, *CONTROL]
            ann = _ann(p)
            parser = getattr(getattr(getattr(p, "type_descriptor", None), "parameter_info", None), "parser", None)
            if _kind(p) is float or parser is not None and opt in ("--timeout", "--deadline", "--rate"):
                values += NOT_FINITE
            if parser is not None and getattr(parser, "__name__", "").startswith("parse_duration"):
                values += CONFUSABLE_DIGITS
            if _kind(p) is Path:
                values += [""]
                if getattr(getattr(p.type_descriptor, "parameter_info", None), "dir_okay", True) is False:
                    values += ["/tmp"]
            if opt == "--port":
                values += ["0", "70000", "-1"]
            if opt in COUNTS and ann is int:
                values += ["0", "-1"]
            for v in values:
                yield pytest.param(path, opt, v, id=f"{' '.join(path)} {opt} {v.encode('unicode_escape').decode()[:12]}")


def _context(path, argv):
    """Parse argv with the command (or group) at ``path`` as the real command line does -
    every option's parser, bounds and callbacks - without running anything."""
    c = ROOT
    for name in path:
        c = c.commands[name]
    subs = getattr(c, "commands", None)
    if subs:   # a group's own options stand before a subcommand's name
        argv = [*argv, next(iter(subs))]
    return c.make_context(path[-1] if path else "netsurvey", list(argv))


@pytest.mark.parametrize("path,opt,value", list(_cases()))
def test_hostile_value_refused_while_parsing(path, opt, value):
    with pytest.raises(click.UsageError) as ei:
        _context(path, [opt, value])
    line = cli._one_line(f"netsurvey: error: {ei.value.format_message()}")
    assert len(line.splitlines()) == 1 and not set(line) & set("\x1b\x85\x9b"), line


@pytest.mark.parametrize("path,argv", [
    (("sql",), ["SELECT 1\nFROM generate_series(1, 2)"]),
    (("testbed", "exec"), ["--", "python3", "-c", "import sys\nprint(sys.argv)"]),
])
def test_arguments_may_be_free_text_with_newlines(path, argv):
    """Control characters are refused in option values, not in arguments: a multi-line SQL
    query and the argv of a command run in the testbed pass through as given."""
    _context(path, argv)
