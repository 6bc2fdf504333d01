"""The documentation agrees with the command line: docs/cli.md is generated from the parser,
and every `agentplug ...` command line in README.md and docs/ names commands and options
that exist, while the README's command table leaves none out."""

from __future__ import annotations

import argparse
import re
import shlex
from pathlib import Path

from agentplug.cli.common import walk_parsers
from agentplug.cli.docs import render_cli_reference
from agentplug.cli.main import build_parser

ROOT = Path(__file__).resolve().parents[1]
GENERATED = {"docs/cli.md", "docs/hooks.md"}
INLINE = re.compile(r"(?<!`)`(?:\S*/)?agentplug ([^`]+)`(?!`)")
FENCE = re.compile(r"^```[a-z]*(?: [^\n]*)?\n(.*?)^```", re.S | re.M)  # title="..."
SHELL_LINE = re.compile(r"^\s*(?:\$ )?(?:\S*/)?agentplug (.*)$", re.M)
WORD = re.compile(r"[a-z][a-z-]*")


def _docs() -> list[Path]:
    files = [ROOT / "README.md", ROOT / "CONTRIBUTING.md", *sorted((ROOT / "docs").glob("*.md"))]
    files += sorted((ROOT / "example_plugins").glob("*/README.md"))
    return [f for f in files if str(f.relative_to(ROOT)) not in GENERATED]


def _command_lines(text: str) -> list[str]:
    """The argument part of every ``agentplug ...`` command line of a Markdown text."""
    found = [m.group(1) for m in INLINE.finditer(text)]
    for block in FENCE.finditer(text):
        found += [m.group(1) for m in SHELL_LINE.finditer(block.group(1))]
    lines = []
    for line in found:
        line = re.split(r"\s#", line)[0]
        for index, part in enumerate(re.split(r"&&|\|\|?|;", line)):
            part = part.strip()
            if part.startswith("agentplug "):
                part = part[len("agentplug ") :]
            elif index:
                continue  # another program after && or |
            lines.append(part)
    return lines


def _tokens(line: str) -> list[str]:
    try:
        return shlex.split(line)
    except ValueError:
        return line.split()


def _subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def _options(parser: argparse.ArgumentParser) -> set[str]:
    return {o for a in parser._actions for o in a.option_strings}


def _problems(line: str, top: argparse.ArgumentParser) -> tuple[list[str], list[tuple[str, ...]]]:
    """What is wrong with one command line, and the command paths it names."""
    problems: list[str] = []
    stack: list[tuple[str, argparse.ArgumentParser]] = [("", top)]
    named: list[tuple[str, ...]] = []
    alternative = positional = False
    for raw in _tokens(line):
        token = raw.strip("[]()")
        current = stack[-1][1]
        if raw == "/":
            alternative = True
            continue
        if token.startswith("-"):
            flag = token.split("=")[0]
            if flag not in _options(current) and flag != "--":
                where = " ".join(name for name, _ in stack).strip() or "agentplug"
                problems.append(f"`agentplug {line}`: {flag} is not an option of `{where}`")
            continue
        if alternative and len(stack) > 1:
            stack.pop()
            current = stack[-1][1]
        alternative = False
        children = _subcommands(current)
        if children and not positional and token in children:
            stack.append((token, children[token]))
            named.append(tuple(name for name, _ in stack[1:]))
            continue
        if children and not positional and WORD.fullmatch(token):
            where = " ".join(name for name, _ in stack).strip()
            problems.append(f"`agentplug {line}`: no command {token!r} in `agentplug {where}`")
            break
        positional = True
    return problems, named


def test_cli_reference_is_generated_from_the_parser_and_up_to_date() -> None:
    current = (ROOT / "docs" / "cli.md").read_text(encoding="utf-8")
    assert current == render_cli_reference(build_parser()), (
        "docs/cli.md is stale: run `agentplug docs cli --write docs/cli.md`"
    )


def test_docs_name_only_commands_and_options_that_exist() -> None:
    top = build_parser()
    problems = []
    checked = 0
    for path in _docs():
        for line in _command_lines(path.read_text(encoding="utf-8")):
            found, _ = _problems(line, top)
            problems += [f"{path.relative_to(ROOT)}: {p}" for p in found]
            checked += 1
    assert checked > 20  # the scanner does find the docs' command lines
    assert problems == []


def test_readme_command_table_lists_every_command_and_subcommand() -> None:
    top = build_parser()
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    rows = [line for line in readme.splitlines() if line.startswith("| `agentplug ")]
    named: set[tuple[str, ...]] = set()
    for row in rows:
        _, paths = _problems(INLINE.search(row).group(1), top)  # type: ignore[union-attr]
        named |= set(paths)
    wanted = {path for path, _ in walk_parsers(top) if 1 <= len(path) <= 2}
    assert sorted(wanted - named) == []


def test_the_scanner_catches_a_wrong_command_and_a_wrong_option() -> None:
    top = build_parser()
    assert _problems("plugins --bogus", top)[0] == [
        "`agentplug plugins --bogus`: --bogus is not an option of `plugins`"
    ]
    assert _problems("actions lst", top)[0] == [
        "`agentplug actions lst`: no command 'lst' in `agentplug actions`"
    ]
    assert _problems("run scenario.json --json", top) == ([], [("run",)])
