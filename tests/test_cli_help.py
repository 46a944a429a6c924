"""Every command's ``--help`` is one docstring written for users (issue #30 part 4, #28 part 5):
it has an Examples section whose lines are commands, and no internal docstring text (``Raises:``,
``Args:``, reST roles or literals). Walks the real click command tree; no stack is imported."""

from __future__ import annotations

import click
import pytest

from compstack.cli import cli

INTERNAL = ("Raises:", "Args:", "Returns:", "``", ":class:", ":func:", ":mod:", ":data:", ":meth:")


def _commands() -> list[tuple[str, click.Command]]:
    ctx = click.Context(cli, info_name="compstack")
    out: list[tuple[str, click.Command]] = []

    def walk(cmd: click.Command, path: list[str]) -> None:
        out.append((" ".join(path), cmd))
        if isinstance(cmd, click.Group):
            for name in cmd.list_commands(ctx):
                sub = cmd.get_command(ctx, name)
                assert sub is not None
                walk(sub, [*path, name])

    walk(cli, ["compstack"])
    return out


def _help(path: str) -> str:
    from click.testing import CliRunner

    result = CliRunner().invoke(cli, [*path.split()[1:], "--help"], prog_name="compstack", terminal_width=100)
    assert result.exit_code == 0, result.output
    return result.output


COMMANDS = _commands()


def test_every_command_is_walked() -> None:
    names = {p for p, _ in COMMANDS}
    assert {"compstack compare", "compstack cache prune", "compstack cache clear", "compstack daemon stop",
            "compstack ops test", "compstack bisect", "compstack reduce"} <= names
    assert len(names) >= 30


@pytest.mark.parametrize("path", [p for p, _ in COMMANDS])
def test_help_has_examples_and_no_internal_text(path: str) -> None:
    text = _help(path)
    for word in INTERNAL:
        assert word not in text, f"{path} --help shows {word!r}"
    assert "Examples:" in text, f"{path} --help has no Examples section"
    assert "Exit status" in text.split("Examples:", 1)[0], f"{path} --help does not give its exit status"
    examples = text.split("Examples:", 1)[1].split("Options:", 1)[0]
    lines = [ln.strip() for ln in examples.splitlines() if ln.strip()]
    assert 2 <= len(lines) <= 3, (path, lines)
    head = path.split()[:2] if path != "compstack" else ["compstack"]
    for ln in lines:  # each example is a command of this program, kept on one line
        assert ln.split()[:len(head)] == head or path == "compstack" and ln.startswith("compstack "), (path, ln)


def test_explain_family_flags_say_what_they_do() -> None:
    assert "to bisect" in _help("compstack bisect") and "to explain" not in _help("compstack bisect")
    assert "to reduce" in _help("compstack reduce") and "to explain" not in _help("compstack reduce")
    bisect_budget = _help("compstack bisect").split("--time-budget", 1)[1].split("--timeout", 1)[0]
    assert "Not used by bisect" in " ".join(bisect_budget.split())
