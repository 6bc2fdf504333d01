"""Examples in every command's ``--help`` (and in docs/cli.md, which is rendered from the
same parser), kept in one table so that a new command without any fails a test."""

from __future__ import annotations

import argparse
import re

from agentplug.cli.common import walk_parsers

__all__ = ["EXAMPLES", "EXAMPLES_HEADING", "ExamplesHelpFormatter", "add_examples"]

EXAMPLES_HEADING = "examples:"

EXAMPLES: dict[str, tuple[str, ...]] = {
    "run": (
        "agentplug run demo/scenario.json",
        "agentplug run my_scenario.json --json    # the report as JSON",
    ),
    "hooks": ("agentplug hooks", "agentplug hooks --json | jq '.[].name'"),
    "plugins": ("agentplug plugins", "agentplug plugins --json", "agentplug -v plugins"),
    "doctor": ("agentplug doctor", "agentplug doctor --config prod.toml"),
    "config schema": ("agentplug config schema > agentplug.schema.json",),
    "docs hooks": ("agentplug docs hooks --write docs/hooks.md",),
    "docs cli": (
        "agentplug docs cli --write docs/cli.md",
        "agentplug docs cli --check docs/cli.md",
    ),
    "dev codegen": ("agentplug dev codegen", "agentplug dev codegen --check"),
    "new plugin": (
        "agentplug new plugin my-guard",
        "agentplug new plugin my-guard --hook before_tool_call",
    ),
    "actions list": ("agentplug actions list", "agentplug actions list --json"),
    "actions test": ("agentplug actions test weather-check --param city=Paris",),
    "actions run": (
        "agentplug actions run 'ROLL_DICE {\"sides\": 20}'",
        "agentplug actions run 'what is the weather in Paris'",
    ),
    "approvals list": ("agentplug approvals list", "agentplug approvals list --json"),
    "approvals revoke": ("agentplug approvals revoke grant-1a2b3c",),
    "approvals pending": (
        "agentplug approvals pending",
        "agentplug approvals pending --api http://127.0.0.1:8731",
    ),
    "approvals resolve": (
        "agentplug approvals resolve ap1-da639b allow-once",
        "agentplug approvals resolve ap1-da639b deny --state-url postgresql://db/agentplug",
    ),
    "state migrate": (
        "agentplug state migrate",
        "agentplug state migrate --url postgresql://user@db:5432/agentplug",
    ),
    "state check": ("agentplug state check", "agentplug state check --json"),
    "state export": ("agentplug state export -o state.jsonl",),
    "state import": (
        "agentplug state import state.jsonl --url postgresql://user@db:5432/agentplug",
    ),
    "chat": (
        "agentplug chat --demo",
        "agentplug chat --model ollama/llama3.2",
        "agentplug chat --trace",
    ),
    "sessions list": ("agentplug sessions list", "agentplug sessions list --json"),
    "sessions show": (
        "agentplug sessions show agent:main:chat:terminal",
        "agentplug sessions show agent:main:chat:terminal --last 10 --json",
    ),
    "sessions reset": ("agentplug sessions reset agent:main:chat:terminal",),
    "mcp-proxy": ("agentplug mcp-proxy --config agentplug.toml --api-port 8732",),
    "serve": ("agentplug serve", "agentplug serve --port 0 --state-dir /var/lib/agentplug"),
    "plugin install": ("agentplug plugin install agentplug-audit-log",),
    "plugin eject": ("agentplug plugin eject audit-log",),
    "plugin sync": ("agentplug plugin sync audit-log",),
    "plugin reinject": ("agentplug plugin reinject audit-log",),
    "plugin ejected": ("agentplug plugin ejected",),
    "plugin list": ("agentplug plugins    # the list this alias shows",),
    "plugin eject-core": ("agentplug plugin eject-core",),
    "plugin sync-core": ("agentplug plugin sync-core",),
    "plugin reinject-core": ("agentplug plugin reinject-core",),
    "plugin core-status": ("agentplug plugin core-status --json",),
    "supervise": ("agentplug supervise -- agentplug serve",),
    "completion": (
        "agentplug completion bash > ~/.local/share/bash-completion/completions/agentplug",
        "agentplug completion zsh > ~/.zfunc/_agentplug",
        "agentplug completion fish > ~/.config/fish/completions/agentplug.fish",
    ),
}
"""``"<command path>"``: example command lines."""


class ExamplesHelpFormatter(argparse.HelpFormatter):
    """Wraps descriptions as usual and keeps an ``examples:`` paragraph line by line."""

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        paragraphs = re.split(r"\n\s*\n", text)
        out = []
        for paragraph in paragraphs:
            if paragraph.startswith(EXAMPLES_HEADING):
                out.append("\n".join(indent + line for line in paragraph.splitlines()))
            else:
                out.append(super()._fill_text(paragraph, width, indent))
        return "\n\n".join(out)


def add_examples(parser: argparse.ArgumentParser) -> None:
    """Append each command's examples to its epilog (every parser of the tree)."""
    for path, each in walk_parsers(parser):
        lines = EXAMPLES.get(" ".join(path))
        if not lines or (each.epilog or "").find(EXAMPLES_HEADING) >= 0:
            continue
        block = EXAMPLES_HEADING + "\n" + "\n".join(f"  {line}" for line in lines)
        each.epilog = f"{each.epilog}\n\n{block}" if each.epilog else block
        each.formatter_class = ExamplesHelpFormatter
