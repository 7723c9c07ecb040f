"""User-facing text names no issue numbers: a user has no access to the issue tracker, so
"(issue 24)" tells them nothing. Checked here: README.md, docs/*.md, every other Markdown
page of the repository they link to (the components' READMEs), and the --help of every command of
`netsurvey` (the typer/click command tree with every plugin registered), both the raw help
strings and the help as rendered. Code comments and docstrings that are not help texts may
keep their issue numbers."""
from __future__ import annotations

import contextlib
import io
import re

import pytest
import typer

from conftest import REPO

#: "issue 24", "Issue #5", "issues 9, 27" (the first number is enough), "issue#12".
ISSUE_NUMBER = re.compile(r"\bissues?\s*#?\d+", re.IGNORECASE)


def issue_mentions(text: str) -> list[str]:
    """Each mention with a little context, for the failure message."""
    return [" ".join(text[max(0, m.start() - 60):m.end() + 20].split()) for m in ISSUE_NUMBER.finditer(text)]


def linked_pages(page) -> list:
    """Markdown files in the repository that ``page`` links to (relative links)."""
    out = []
    for target in re.findall(r"\]\(([^)#\s:]+\.md)(?:#[^)]*)?\)", page.read_text()):
        p = (page.parent / target).resolve()
        if p.is_file() and REPO in p.parents and p not in out:
            out.append(p)
    return out


def user_pages() -> list:
    """README.md, docs/*.md, and the pages they link to."""
    pages = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
    for page in list(pages):
        pages += [p for p in linked_pages(page) if p not in pages]
    return pages


@pytest.mark.parametrize("page", user_pages(), ids=lambda p: str(p.relative_to(REPO)))
def test_page_names_no_issue_number(page):
    found = issue_mentions(page.read_text())
    assert not found, f"{page.relative_to(REPO)} names issue numbers; say what they mean instead: {found}"


def test_pages_cover_readme_docs_and_components():
    names = {str(p.relative_to(REPO)) for p in user_pages()}
    assert {"README.md", "docs/campaign.md", "docs/schema.md", "docs/status.md"} <= names
    assert {"scanners/tls/README.md", "browser_probes/README.md", "testbed/README.md", "bench/README.md"} <= names


#: the command line's own name, as it prints it in --help
PROG = "netsurvey"


def _commands(cmd, path=(PROG,), parent=None):
    """(path, command, context) for the command and every subcommand below it."""
    ctx = cmd.context_class(cmd, info_name=path[-1], parent=parent)
    yield path, cmd, ctx
    for name, sub in sorted((getattr(cmd, "commands", None) or {}).items()):
        yield from _commands(sub, (*path, name), ctx)


def _help_texts(cmd, ctx) -> tuple[str, str]:
    """The raw help strings of a command and its parameters, and its --help as rendered
    (typer prints rich help to stdout; a plain click command returns it)."""
    raw = [cmd.help, cmd.short_help, cmd.epilog, *(getattr(p, "help", None) for p in cmd.params)]
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        returned = cmd.get_help(ctx)
    return "\n".join(t for t in raw if t), (returned or "") + buf.getvalue()


def command_tree():
    import netsurvey.cli as cli  # importing it registers every plugin's commands

    root = typer.main.get_command(cli.app)
    cli._prepare_commands(root)   # as `netsurvey` itself does before it runs
    return list(_commands(root))


def offending_help(tree) -> dict[str, list[str]]:
    bad = {}
    for path, cmd, ctx in tree:
        raw, rendered = _help_texts(cmd, ctx)
        assert "Usage" in rendered, f"{' '.join(path)} --help rendered nothing: the check would see nothing"
        found = issue_mentions(raw) + issue_mentions(rendered)
        if found:
            bad[" ".join(path)] = found
    return bad


def test_help_of_every_command_names_no_issue_number(monkeypatch):
    monkeypatch.setenv("COLUMNS", "400")   # no wrapping inside a mention in the rendered help
    tree = command_tree()
    paths = {" ".join(p) for p, _, _ in tree}
    # the walk reaches the core's commands and every plugin's (scanners, testbed, browsers, Atlas, analysis)
    assert {"netsurvey db up", "netsurvey scan tls", "netsurvey scan quic-second-opinion", "netsurvey testbed zoo-dns",
            "netsurvey browser track", "netsurvey atlas run", "netsurvey plot"} <= paths, sorted(paths)
    bad = offending_help(tree)
    assert not bad, f"--help texts name issue numbers; say what they mean instead: {bad}"


def test_the_help_check_sees_a_planted_issue_number(monkeypatch):
    """Control: an issue number in a command's help, or in an option's, is found."""
    monkeypatch.setenv("COLUMNS", "400")
    app = typer.Typer()

    @app.command("quiet")
    def quiet(x: int = typer.Option(1, "--x", help="A plain option.")) -> None:
        """Nothing to see."""

    @app.command("loud")
    def loud(x: int = typer.Option(1, "--x", help="Fixed in issue #12.")) -> None:
        """The zoo (Issue 24)."""

    bad = offending_help(list(_commands(typer.main.get_command(app))))
    assert set(bad) == {"netsurvey", "netsurvey loud"}   # the group lists its commands' short help too
    assert any("issue #12" in m for m in bad["netsurvey loud"]) and any("Issue 24" in m for m in bad["netsurvey loud"])
