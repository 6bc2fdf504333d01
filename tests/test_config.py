"""Operator config validation: errors name the offending key."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from agentplug import AgentplugConfig, ConfigError, load_config


def _issue_keys(data: dict[str, object]) -> list[str]:
    with pytest.raises(ConfigError) as info:
        AgentplugConfig.parse(data)
    return [key for key, _ in info.value.issues]


def test_seed_camel_case_config_is_accepted() -> None:
    cfg = AgentplugConfig.parse(
        {
            "plugins": {
                "entries": {
                    "my-plugin": {
                        "hooks": {
                            "timeoutMs": 30000,
                            "timeouts": {"before_prompt_build": 90000},
                            "allowConversationAccess": True,
                            "allowPromptInjection": False,
                        },
                        "contracts": {"trustedToolPolicies": ["budget"]},
                    }
                }
            }
        }
    )
    hooks = cfg.entry("my-plugin").hooks
    assert hooks.timeout_ms == 30000 and hooks.timeouts == {"before_prompt_build": 90000}
    assert hooks.allow_conversation_access is True and hooks.allow_prompt_injection is False
    assert cfg.entry("my-plugin").contracts.trusted_tool_policies == ["budget"]


@pytest.mark.parametrize("bad", [0, -1, 600_001, 1.5, "30000", True])
def test_timeout_must_be_positive_int_up_to_600000(bad: object) -> None:
    keys = _issue_keys({"plugins": {"entries": {"p": {"hooks": {"timeoutMs": bad}}}}})
    assert keys == ["plugins.entries.p.hooks.timeoutMs"]


def test_per_hook_timeout_error_names_the_hook_key() -> None:
    keys = _issue_keys(
        {"plugins": {"entries": {"p": {"hooks": {"timeouts": {"agent_end": 700_000}}}}}}
    )
    assert keys == ["plugins.entries.p.hooks.timeouts.agent_end"]


def test_unknown_entry_setting_is_rejected_with_its_key() -> None:
    keys = _issue_keys({"plugins": {"entries": {"p": {"hookz": {}}}}})
    assert keys == ["plugins.entries.p.hookz"]


def test_unknown_top_level_keys_are_kept_for_shared_host_files() -> None:
    cfg = AgentplugConfig.parse({"agents": {"x": 1}, "customActions": []})
    assert cfg.custom_actions == []


def test_invalid_json_file_reports_line_and_column(tmp_path: Path) -> None:
    path = tmp_path / "cfg.json"
    path.write_text('{"plugins": ', encoding="utf-8")
    with pytest.raises(ConfigError) as info:
        load_config(path)
    assert str(path) in str(info.value) and "line 1" in str(info.value)


def test_config_file_round_trip(tmp_path: Path) -> None:
    path = tmp_path / "cfg.json"
    path.write_text(json.dumps({"runtime": {"defaultTimeoutMs": 1000}}), encoding="utf-8")
    assert load_config(path).runtime.default_timeout_ms == 1000
