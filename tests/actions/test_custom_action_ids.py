"""Custom-action ids are checked by the config loader and the CLI too (issue 18 item 3)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from agentplug.actions.custom import (
    ACTION_ID_PATTERN,
    MAX_ACTION_ID_LENGTH,
    load_custom_actions,
    read_custom_action_defs,
)
from agentplug.cli.actions import run_actions_cli


def entry(entry_id: str, name: str) -> dict[str, object]:
    return {
        "id": entry_id,
        "name": name,
        "description": "Say hello",
        "parameters": [],
        "handler": {"type": "shell", "command": "echo hi"},
        "enabled": True,
        "createdAt": "2025-01-01T00:00:00Z",
        "updatedAt": "2025-01-01T00:00:00Z",
    }


def test_the_config_loader_reports_and_skips_an_entry_with_a_bad_id() -> None:
    config = {"customActions": [entry("../../evil", "EVIL"), entry("good", "GOOD")]}
    result = load_custom_actions(config)
    assert [a.name for a in result.actions] == ["GOOD"]
    (error,) = result.errors
    assert error.index == 0 and error.field == "id"
    assert "letters, digits" in error.message


def test_an_id_longer_than_the_limit_is_refused() -> None:
    longest = "a" * MAX_ACTION_ID_LENGTH
    definitions, errors = read_custom_action_defs(
        {"customActions": [entry(longest, "A"), entry(longest + "a", "B")]}
    )
    assert [d.id for d in definitions] == [longest]
    assert [e.index for e in errors] == [1]
    assert ACTION_ID_PATTERN.match(longest)


def test_the_cli_lists_a_bad_id_as_a_malformed_entry(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "agentplug.json"
    path.write_text(json.dumps({"customActions": [entry("a/b", "SLASHED")]}), "utf-8")
    assert run_actions_cli(["list", "--config", str(path), "--json"]) == 0
    captured = capsys.readouterr()
    listed = json.loads(captured.out)
    assert [a for a in listed["actions"] if a["source"] == "custom"] == []
    assert listed["errors"][0]["field"] == "id"
    assert run_actions_cli(["test", "SLASHED", "--config", str(path)]) == 2
    assert "unknown action 'SLASHED'" in capsys.readouterr().err
