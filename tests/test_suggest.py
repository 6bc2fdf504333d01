"""Did-you-mean: one helper (``agentplug.config.suggest``) behind every "unknown name"
message, so every message suggests the same way (issue 28 item 10)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from agentplug.config.suggest import closest, did_you_mean

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize(
    ("typed", "choices", "meant"),
    [
        ("max_step", ["model", "max_steps", "system_prompt"], "max_steps"),
        ("base_ur", ["base_url", "api_key_env"], "base_url"),
        ("runtim", ["plugins", "runtime", "state"], "runtime"),
        ("olama", ["ollama", "openai", "scripted"], "ollama"),
        ("befor_tool_call", ["before_tool_call", "after_tool_call"], "before_tool_call"),
        ("aprovals", ["approvals", "actions", "state"], "approvals"),
    ],
)
def test_a_near_miss_suggests_the_name_meant(typed: str, choices: list[str], meant: str) -> None:
    assert closest(typed, choices) == [meant]


@pytest.mark.parametrize(
    ("typed", "choices", "meant"),
    [
        ("Before_Tool_Call", ["before_tool_call", "after_tool_call"], "before_tool_call"),
        ("BASE-URL", ["base_url", "timeout_s"], "base_url"),
        ("baseURL", ["base_url", "timeout_s"], "base_url"),
    ],
)
def test_a_name_written_in_another_case_or_separator_style_is_always_suggested(
    typed: str, choices: list[str], meant: str
) -> None:
    assert closest(typed, choices, cutoff=0.99) == [meant]


def test_a_field_and_its_alias_are_suggested_in_the_style_of_what_was_typed() -> None:
    choices = ["max_steps", "maxSteps"]
    assert closest("max_step", choices) == ["max_steps"]
    assert closest("maxStep", choices) == ["maxSteps"]


def test_nothing_is_suggested_when_nothing_is_close() -> None:
    assert closest("zzz", ["plugins", "runtime"]) == []
    assert did_you_mean("zzz", ["plugins"], otherwise=" (see the list)") == " (see the list)"


def test_the_name_typed_is_never_suggested_to_itself() -> None:
    assert closest("plugins", ["plugins"]) == []


def test_the_phrase_reads_did_you_mean_with_the_name_quoted() -> None:
    assert did_you_mean("shel", ["shell", "media"]) == "; did you mean 'shell'?"
    assert did_you_mean("shel", ["shell"], lead=" ") == " did you mean 'shell'?"


def test_no_module_of_the_runtime_calls_difflib_for_a_suggestion_of_its_own() -> None:
    # The emote search ranks names by similarity: a search, not a did-you-mean.
    allowed = {"config/suggest.py", "actions/builtins/media/emotes.py"}
    package = ROOT / "framework" / "agentplug"
    users = set()
    for path in package.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import) and any(a.name == "difflib" for a in node.names):
                users.add(path.relative_to(package).as_posix())
    assert users <= allowed, sorted(users - allowed)
