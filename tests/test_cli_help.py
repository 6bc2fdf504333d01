"""The command line explains itself (issue 28 item 7): examples in every ``--help``, help
text on every argument, shell completion, and usage errors that name the word that was
wrong, a did-you-mean and the help of the command the mistake is in."""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from agentplug.cli.common import walk_parsers
from agentplug.cli.examples import EXAMPLES, EXAMPLES_HEADING
from agentplug.cli.main import build_parser


def agentplug(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "AGENTPLUG_CONFIG": "", "AGENTPLUG_DISABLE_PLUGINS": "1"}
    return subprocess.run(
        [sys.executable, "-m", "agentplug.cli", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=env,
        timeout=120,
    )


def _commands() -> list[tuple[str, argparse.ArgumentParser]]:
    """Every command that runs (not a group of commands), by path."""
    return [
        (" ".join(path), parser)
        for path, parser in walk_parsers(build_parser())
        if path and parser._subparsers is None
    ]


def test_every_command_has_examples_in_its_help() -> None:
    missing = [name for name, parser in _commands() if name not in EXAMPLES]
    assert missing == []
    for name, parser in _commands():
        help_text = parser.format_help()
        assert EXAMPLES_HEADING in help_text, name
        for example in EXAMPLES[name]:
            assert f"  {example}" in help_text.splitlines(), (name, example)


def test_every_argument_of_every_command_says_what_it_is() -> None:
    silent = [
        f"{' '.join(path)} {action.option_strings or action.dest}"
        for path, parser in walk_parsers(build_parser())
        for action in parser._actions
        if not isinstance(action, argparse._HelpAction | argparse._SubParsersAction)
        and not isinstance(action, argparse._VersionAction)
        and not action.help
    ]
    assert silent == []


def test_the_examples_name_real_commands() -> None:
    names = {name for name, _ in _commands()}
    assert set(EXAMPLES) <= names


def test_hooks_prints_a_header_over_its_columns() -> None:
    done = agentplug("hooks")
    assert done.stdout.splitlines()[0].split() == [
        "HOOK",
        "KIND",
        "TIMEOUT",
        "ON",
        "FAILURE",
        "GATES",
    ]


def test_the_top_level_help_points_to_each_commands_help_not_to_a_source_file() -> None:
    done = agentplug("--help")
    assert "docs/cli.md" not in done.stdout
    assert "agentplug COMMAND --help" in " ".join(done.stdout.split())


def test_an_option_typo_names_the_command_its_help_and_the_option_meant() -> None:
    done = agentplug("plugins", "--jsn")
    assert done.returncode == 2
    assert done.stderr.strip() == (
        "agentplug: error: unknown argument '--jsn' for `agentplug plugins`; did you mean "
        "'--json'? (see `agentplug plugins --help`)"
    )


def test_a_wrong_choice_names_the_word_and_what_is_accepted() -> None:
    done = agentplug("approvals", "resolve", "abc", "maybe")
    assert done.returncode == 2
    line = done.stderr.strip()
    assert "'maybe' is not one of allow-once, allow-always, deny" in line
    assert "store" not in line and "(see `agentplug approvals resolve --help`)" in line


def test_a_missing_scenario_file_is_named_without_a_placeholder(tmp_path: Path) -> None:
    done = agentplug("run", "nonexist.json", cwd=tmp_path)
    assert done.returncode == 2
    assert done.stderr.strip() == (
        "agentplug run: error: invalid scenario in nonexist.json: does not exist; check the path"
    )


# -- shell completion -----------------------------------------------------------------


@pytest.fixture(scope="module")
def scripts(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("completion")
    found = {}
    for shell in ("bash", "zsh", "fish"):
        done = agentplug("completion", shell)
        assert done.returncode == 0, done.stderr
        found[shell] = folder / f"agentplug.{shell}"
        found[shell].write_text(done.stdout, encoding="utf-8")
    return found


def _needs(shell: str) -> None:
    if shutil.which(shell) is None:
        pytest.skip(f"{shell} is not installed")


@pytest.mark.parametrize(
    ("words", "expected"),
    [
        (["agentplug", "pl"], {"plugin", "plugins"}),
        (["agentplug", "approvals", "res"], {"resolve"}),
        (["agentplug", "chat", "--de"], {"--demo"}),
        (["agentplug", "completion", ""], {"bash", "fish", "zsh"}),
    ],
)
def test_bash_completes_commands_subcommands_and_options(
    scripts: dict[str, Path], words: list[str], expected: set[str]
) -> None:
    _needs("bash")
    quoted = " ".join(f"'{w}'" for w in words)
    probe = (
        f"source {scripts['bash']}; COMP_WORDS=({quoted}); COMP_CWORD={len(words) - 1}; "
        '_agentplug; printf "%s\\n" "${COMPREPLY[@]}"'
    )
    done = subprocess.run(["bash", "-c", probe], capture_output=True, text=True, timeout=60)
    assert set(done.stdout.split()) == expected, done.stderr


def test_fish_completes_commands_subcommands_and_options(scripts: dict[str, Path]) -> None:
    _needs("fish")
    probe = (
        f"source {scripts['fish']}; complete -C 'agentplug pl'; echo ---; "
        "complete -C 'agentplug approvals '; echo ---; complete -C 'agentplug chat --de'"
    )
    done = subprocess.run(["fish", "-c", probe], capture_output=True, text=True, timeout=60)
    top, approvals, chat = done.stdout.split("---\n")
    assert set(top.split()) == {"plugin", "plugins"}
    assert set(approvals.split()) == {"list", "revoke", "pending", "resolve"}
    assert chat.split("\t")[0] == "--demo"


def test_zsh_registers_the_completion(scripts: dict[str, Path]) -> None:
    _needs("zsh")
    probe = f"autoload -U compinit; compinit -u; source {scripts['zsh']}; print $_comps[agentplug]"
    done = subprocess.run(["zsh", "-c", probe], capture_output=True, text=True, timeout=60)
    assert "_agentplug" in done.stdout, done.stderr
