"""audit-log, loaded from its installed entry point with agentplug's pytest fixtures."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from agentplug import PluginHost, PluginRecord
from agentplug.core.results import HandlerStatus
from agentplug.testing.pytest_plugin import Dispatcher, PluginLoader
from agentplug_audit_log import CONVERSATION_HOOKS, DECISION_HOOKS, LOW_PRIORITY, OBSERVATION_HOOKS
from agentplug_hookspecs import HookKind, builtin_declarations

PLUGIN_ID = "audit-log"
SECRET = "sk-live-do-not-log-me-0123456789"


def audit_entry(**entry: Any) -> pytest.MarkDecorator:
    """More of ``plugins.entries.audit-log`` (``config=...``, ``hooks=...``), merged deeply."""
    return pytest.mark.agentplug_config({"plugins": {"entries": {PLUGIN_ID: entry}}})


with_conversation_access = audit_entry(hooks={"allow_conversation_access": True})


@pytest.fixture
def audit_path(tmp_path: Path) -> Path:
    """The audit file the plugin is configured to write."""
    return tmp_path / "audit.jsonl"


@pytest.fixture
def agentplug_config(audit_path: Path) -> dict[str, Any]:
    """Operator config: write to ``audit_path``; no conversation access unless marked."""
    entry = {"config": {"path": str(audit_path)}, "hooks": {"allow_conversation_access": False}}
    return {"plugins": {"entries": {PLUGIN_ID: entry}}}


@pytest.fixture
def audit_log(agentplug_load: PluginLoader) -> PluginRecord:
    """The plugin, registered from its entry point like an installed plugin (not bundled)."""
    return agentplug_load(PLUGIN_ID)


def lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


@with_conversation_access
def test_it_observes_every_observation_hook_of_the_catalogue(
    audit_log: PluginRecord, agentplug_host: PluginHost
) -> None:
    catalogue = {
        name
        for name, decl in builtin_declarations().items()
        if decl.kind is HookKind.OBSERVE and decl.deprecation is None
    }
    assert set(OBSERVATION_HOOKS) == catalogue
    assert agentplug_host.plugins == [audit_log]
    assert (audit_log.plugin_id, audit_log.bundled) == (PLUGIN_ID, False)
    assert set(audit_log.hooks) == catalogue | set(DECISION_HOOKS)


def test_each_call_appends_one_json_line_with_time_hook_and_ids(
    audit_log: PluginRecord, agentplug_dispatch: Dispatcher, audit_path: Path
) -> None:
    for n in range(3):
        event = {"content": "hi", "message_id": f"m{n}"}
        agentplug_dispatch("message_received", event, {"run_id": "r1"})
    entries = lines(audit_path)
    assert [e["hook"] for e in entries] == ["message_received"] * 3
    assert [e["event"]["message_id"] for e in entries] == ["m0", "m1", "m2"]
    assert all(e["run_id"] == "r1" and e["ts"].endswith("+00:00") for e in entries)


def test_message_bodies_are_recorded_as_lengths_only(
    audit_log: PluginRecord, agentplug_dispatch: Dispatcher, audit_path: Path
) -> None:
    content = f"my key is {SECRET}"
    agentplug_dispatch("message_received", {"content": content, "sender_id": "u-7"})
    agentplug_dispatch("message_sent", {"content": content, "to": "ana@example.org"})
    text = audit_path.read_text(encoding="utf-8")
    assert SECRET not in text and "ana@example.org" not in text
    received, sent = lines(audit_path)
    assert received["event"]["content"] == {"chars": len(content)}
    assert received["event"]["sender_id"] == "u-7"
    assert sent["event"]["to"] == {"chars": len("ana@example.org")}


def test_metadata_and_params_are_counted_not_copied(
    audit_log: PluginRecord, agentplug_dispatch: Dispatcher, audit_path: Path
) -> None:
    agentplug_dispatch("after_tool_call", {"tool_name": "exec", "params": {"token": SECRET}})
    (entry,) = lines(audit_path)
    assert entry["event"]["tool_name"] == "exec"
    assert entry["event"]["params"] == {"keys": 1}
    assert SECRET not in audit_path.read_text(encoding="utf-8")


def test_a_pairing_code_is_never_written(
    audit_log: PluginRecord, agentplug_dispatch: Dispatcher, audit_path: Path
) -> None:
    event = {"channel": "sms", "sender_id": "s", "code": "93"}
    agentplug_dispatch("channel_pairing_requested", event)
    (entry,) = lines(audit_path)
    assert entry["event"]["code"] == {"chars": 2}


def test_typed_nested_models_are_summarized_field_by_field(
    audit_log: PluginRecord, agentplug_dispatch: Dispatcher, audit_path: Path
) -> None:
    error = "auth failed: " + SECRET
    job = {"id": "nightly", "state": {"last_run_status": "error", "last_error": error}}
    agentplug_dispatch("cron_changed", {"reason": "finished", "job": job})
    (entry,) = lines(audit_path)
    assert entry["event"]["job"]["id"] == "nightly"
    assert entry["event"]["job"]["state"]["last_run_status"] == "error"
    assert entry["event"]["job"]["state"]["last_error"] == {"chars": len(error)}


AGENT_END = {"messages": [{"role": "user", "content": SECRET}], "success": True, "run_id": "r9"}


def test_agent_end_is_not_recorded_without_conversation_access(
    audit_log: PluginRecord, agentplug_dispatch: Dispatcher, audit_path: Path
) -> None:
    result = agentplug_dispatch("agent_end", AGENT_END)
    assert HandlerStatus.OK not in [h.status for h in result.handlers]
    assert not audit_path.exists()


@with_conversation_access
def test_agent_end_is_recorded_with_conversation_access(
    audit_log: PluginRecord, agentplug_dispatch: Dispatcher, audit_path: Path
) -> None:
    agentplug_dispatch("agent_end", AGENT_END)
    (entry,) = lines(audit_path)
    assert entry["event"]["messages"] == {"items": 1}
    assert (entry["run_id"], entry["event"]["success"]) == ("r9", True)
    assert SECRET not in audit_path.read_text(encoding="utf-8")


def test_conversation_hooks_are_left_out_quietly_when_access_is_not_granted(
    audit_log: PluginRecord,
) -> None:
    assert CONVERSATION_HOOKS.isdisjoint(audit_log.hooks + audit_log.refused_hooks)
    assert audit_log.warnings == []


@audit_entry(config={"conversation_hooks": True})
def test_conversation_hooks_forced_on_without_access_are_refused_and_reported(
    audit_log: PluginRecord,
) -> None:
    assert set(audit_log.refused_hooks) >= CONVERSATION_HOOKS
    assert len(audit_log.warnings) == len(CONVERSATION_HOOKS)


@audit_entry(config={"conversation_hooks": False})
def test_conversation_hooks_can_be_left_out_without_gate_warnings(
    audit_log: PluginRecord,
) -> None:
    assert CONVERSATION_HOOKS.isdisjoint(audit_log.hooks)
    assert audit_log.warnings == []


def test_decision_hooks_are_recorded_last_without_deciding(
    audit_log: PluginRecord,
    agentplug_host: PluginHost,
    agentplug_dispatch: Dispatcher,
    audit_path: Path,
) -> None:
    assert [h.priority for h in agentplug_host.plan("before_tool_call")] == [LOW_PRIORITY]
    event = {"tool_name": "web_search", "params": {"q": "x"}}
    result = agentplug_dispatch("before_tool_call", event)
    assert (result.outcome.blocked, result.outcome.approval) == (False, None)
    assert result.outcome.params == {"q": "x"}
    (entry,) = lines(audit_path)
    assert (entry["hook"], entry["event"]["tool_name"]) == ("before_tool_call", "web_search")


@audit_entry(config={"decision_hooks": False})
def test_decision_hooks_can_be_left_out(
    audit_log: PluginRecord, agentplug_host: PluginHost
) -> None:
    assert agentplug_host.plan("before_tool_call") == ()


def test_an_unwritable_audit_file_never_blocks_a_tool_call(
    audit_log: PluginRecord, agentplug_dispatch: Dispatcher, audit_path: Path
) -> None:
    audit_path.mkdir()  # a directory where the file should be: every write fails
    result = agentplug_dispatch("before_tool_call", {"tool_name": "exec"})
    assert [h.status for h in result.handlers] == [HandlerStatus.OK]
    assert not result.outcome.blocked


class TestWithoutAConfiguredPath:
    @pytest.fixture
    def agentplug_config(self) -> dict[str, Any]:
        """Operator config without ``config.path``."""
        return {}

    def test_without_a_state_folder_nothing_is_written_and_the_plugin_says_so(
        self,
        agentplug_load: PluginLoader,
        agentplug_dispatch: Dispatcher,
        tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch,
    ) -> None:
        monkeypatch.chdir(tmp_path)
        record = agentplug_load(PLUGIN_ID)
        agentplug_dispatch("session_start", {"session_key": "agent:main", "reason": "new"})
        assert list(tmp_path.iterdir()) == []  # nothing dropped in the working directory
        assert record.notes == [
            f"writes nothing: no state folder and no plugins.entries.{PLUGIN_ID}.config.path"
        ]


class TestInTheStateFolder:
    @pytest.fixture
    def agentplug_config(self, tmp_path: Path) -> dict[str, Any]:
        """A gateway with a state folder, no ``config.path``."""
        return {"runtime": {"state_dir": str(tmp_path / "state")}}

    def test_the_default_file_is_in_the_state_folder_and_the_plugin_says_where(
        self,
        agentplug_load: PluginLoader,
        agentplug_dispatch: Dispatcher,
        tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch,
    ) -> None:
        monkeypatch.chdir(tmp_path)
        record = agentplug_load(PLUGIN_ID)
        path = (tmp_path / "state" / "audit-log.jsonl").absolute()
        assert record.notes == [f"writes one line per hook call to {path}"]
        agentplug_dispatch("session_start", {"session_key": "agent:main", "reason": "new"})
        (entry,) = lines(path)
        assert (entry["hook"], entry["session_key"], entry["event"]["reason"]) == (
            "session_start",
            "agent:main",
            "new",
        )
