"""``agent.tools``: the model is offered only the actions an operator allowed.

By default only actions without side effects; an allowed side-effecting action is asked
for approval through the gate unless ``without_approval`` names it; disabled and excluded
actions are never offered, and a model that names one anyway is refused. Requests go to a
real OpenAI-compatible server on 127.0.0.1.
"""

from __future__ import annotations

import logging
import types
from collections.abc import Iterator
from typing import Any

import pytest
from agentplug import PluginHost
from agentplug.actions.builtins.lifecycle import RestartController
from agentplug.actions.model import Action, ActionExample, ActionResult
from agentplug.agent import AgentRunner, ScriptedProvider, TurnResult
from agentplug.agent.config import agent_config
from agentplug.core.errors import ConfigError

from tests.agent.chat_server import ChatServer, chat_server
from tests.agent.conftest import run

DANGEROUS = {"RESTART_AGENT", "INSTALL_PLUGIN", "EJECT_CORE", "SHELL_COMMAND"}


@pytest.fixture
def server() -> Iterator[ChatServer]:
    with chat_server() as srv:
        yield srv


def _host(config: dict[str, Any] | None = None) -> PluginHost:
    return PluginHost({"plugins": {"enabled": False}, **(config or {})})


def _runner(
    server: ChatServer, host: PluginHost, tools: dict[str, Any] | None = None
) -> AgentRunner:
    agent: dict[str, Any] = {
        "model": "openai/test-model",
        "providers": {"openai": {"base_url": server.base_url, "api_key_env": "AGENTPLUG_NO_KEY"}},
    }
    if tools is not None:
        agent["tools"] = tools
    return AgentRunner(host, config=agent)


def _offered(server: ChatServer, index: int = 0) -> dict[str, dict[str, Any]]:
    body = server.requests[index]["body"]
    return {t["function"]["name"]: t["function"] for t in body.get("tools") or []}


def _tool_message(result: TurnResult) -> dict[str, Any]:
    return next(m for m in result.transcript if m["role"] == "tool")


def _restart_controller(host: PluginHost) -> tuple[RestartController, list[int]]:
    codes: list[int] = []
    controller = RestartController("cli", delay_s=0, exit_fn=codes.append)
    host.gateway.actions.register_service("restart", controller)
    return controller, codes


def _recording_action(name: str, calls: list[str], **kwargs: Any) -> Action:
    def handler(rt: Any, msg: Any, st: Any, opts: Any) -> ActionResult:
        calls.append(name)
        return ActionResult(success=True, text=f"{name} ran")

    return Action(name=name, description=f"The {name} action.", handler=handler, **kwargs)


def test_a_default_runner_offers_no_side_effecting_builtin_to_the_model(
    server: ChatServer,
) -> None:
    server.reply("hello")
    run(_runner(server, _host()).run_turn("hello again", session_key="s1"))
    offered = set(_offered(server))
    assert not offered & DANGEROUS
    assert {"CORE_STATUS", "LIST_EJECTED_PLUGINS"} <= offered


def test_an_allowed_side_effecting_action_needs_an_approval_and_blocks_without_one(
    server: ChatServer,
) -> None:
    host = _host()
    controller, codes = _restart_controller(host)
    runner = _runner(server, host, {"allow": ["@safe", "RESTART_AGENT"]})
    server.tool_calls(("RESTART_AGENT", {"reason": "the model wants to"}))
    server.reply("I could not restart.")
    result = run(runner.run_turn("hello again", session_key="s1"))
    assert "RESTART_AGENT" in _offered(server)
    tool = _tool_message(result)
    assert tool["is_error"] and tool["content"].startswith("tool call blocked:")
    assert "RESTART_AGENT" in tool["content"]
    (decision,) = [e["decision"] for e in result.trace if e["kind"] == "tool"]
    assert decision["approval"] == "no-resolver"
    assert decision["approval_requested_by"] == "agentplug.tools"
    assert not controller.pending and codes == []


def test_an_action_named_in_without_approval_runs_without_asking(server: ChatServer) -> None:
    host = _host()
    controller, codes = _restart_controller(host)
    runner = _runner(
        server, host, {"allow": ["@safe", "RESTART_AGENT"], "without_approval": ["RESTART_*"]}
    )
    server.tool_calls(("RESTART_AGENT", {"reason": "asked"}))
    server.reply("Restarting.")

    async def go() -> TurnResult:
        result = await runner.run_turn("please restart", session_key="s1")
        await controller.wait(timeout_s=30)
        return result

    result = run(go())
    assert not _tool_message(result).get("is_error")
    assert codes == [75]


def test_an_action_the_operator_did_not_allow_is_refused_when_the_model_names_it(
    server: ChatServer,
) -> None:
    host = _host()
    controller, codes = _restart_controller(host)
    server.tool_calls(("RESTART_AGENT", {}))
    server.reply("ok")
    result = run(_runner(server, host).run_turn("hello again", session_key="s1"))
    tool = _tool_message(result)
    assert tool["is_error"] and "unknown tool 'RESTART_AGENT'" in tool["content"]
    assert "RESTART_AGENT" not in tool["content"].split("available tools:")[1]
    assert not controller.pending and codes == []


def test_an_excluded_tool_is_refused_when_the_model_names_it(server: ChatServer) -> None:
    host = _host()
    calls: list[str] = []
    host.gateway.actions.registry.register(_recording_action("LOOK_UP", calls, side_effects=False))
    server.tool_calls(("LOOK_UP", {}))
    server.reply("ok")
    result = run(_runner(server, host, {"exclude": ["LOOK_UP"]}).run_turn("x", session_key="s1"))
    assert "LOOK_UP" not in _offered(server)
    assert _tool_message(result)["is_error"] and calls == []


def test_allow_names_and_globs_offer_exactly_the_matching_actions(server: ChatServer) -> None:
    server.reply("ok")
    runner = _runner(server, _host(), {"allow": ["CORE_STATUS", "SYNC_*"]})
    run(runner.run_turn("x", session_key="s1"))
    assert set(_offered(server)) == {"CORE_STATUS", "SYNC_PLUGIN", "SYNC_CORE"}


def test_a_disabled_action_is_never_offered_even_when_allowed(server: ChatServer) -> None:
    host = _host({"actions": {"disabled": ["EJECT_CORE"]}})
    server.reply("ok")
    run(_runner(server, host, {"allow": ["*"]}).run_turn("x", session_key="s1"))
    offered = set(_offered(server))
    assert "RESTART_AGENT" in offered  # the allow-list works...
    assert "SHELL_COMMAND" not in offered  # ...but the shell is off (actions.shell.enabled)
    assert "EJECT_CORE" not in offered


def test_a_custom_shell_action_is_not_offered_while_the_shell_is_off(
    server: ChatServer,
) -> None:
    entry = {
        "id": "disk-usage",
        "name": "DISK_USAGE",
        "description": "Show the disk usage",
        "parameters": [],
        "handler": {"type": "shell", "command": "df -h"},
        "enabled": True,
        "createdAt": "2025-01-01T00:00:00Z",
        "updatedAt": "2025-01-01T00:00:00Z",
    }
    host = _host({"customActions": [entry]})
    server.reply("ok")
    run(_runner(server, host, {"allow": ["*"]}).run_turn("x", session_key="s1"))
    offered = set(_offered(server))
    assert "RESTART_AGENT" in offered and "DISK_USAGE" not in offered


def test_a_plugins_side_effect_free_action_is_offered_and_its_undeclared_one_is_not(
    server: ChatServer,
) -> None:
    calls: list[str] = []
    module = types.ModuleType("seed_style_pack")
    module.actions = [  # type: ignore[attr-defined]
        _recording_action("QUIET_LOOKUP", calls, side_effects=False),
        _recording_action("LOUD_CHANGE", calls),
    ]
    module.register = lambda api: None  # type: ignore[attr-defined]
    host = _host()
    host.register(module, "pack")
    server.reply("ok")
    run(_runner(server, host).run_turn("x", session_key="s1"))
    offered = set(_offered(server))
    assert "QUIET_LOOKUP" in offered and "LOUD_CHANGE" not in offered


def test_an_actions_examples_are_in_its_tool_description_compactly_and_bounded(
    server: ChatServer,
) -> None:
    host = _host()
    examples = [
        [
            ActionExample(name="user", text="what is the weather\nin Oslo?"),
            ActionExample(name="agent", text="Sunny.", actions=["WEATHER_NOW"]),
        ],
        [ActionExample(name="user", text="x" * 5_000)],
        *([[ActionExample(name="user", text="another example")]] * 20),
    ]
    host.gateway.actions.registry.register(
        _recording_action("WEATHER_NOW", [], side_effects=False, examples=examples)
    )
    server.reply("ok")
    run(_runner(server, host).run_turn("x", session_key="s1"))
    description = _offered(server)["WEATHER_NOW"]["description"]
    assert description.startswith("The WEATHER_NOW action.")
    assert 'user: "what is the weather in Oslo?" -> agent: "Sunny." (WEATHER_NOW)' in description
    assert "x" * 5_000 not in description and len(description) < 1_000
    assert description.count("another example") < 20


def test_an_allow_entry_that_names_no_action_is_warned_about(
    caplog: pytest.LogCaptureFixture,
) -> None:
    provider = ScriptedProvider(["ok"])
    runner = AgentRunner(_host(), provider, config={"tools": {"allow": ["@safe", "RESTART_AGNT"]}})
    with caplog.at_level(logging.WARNING, logger="agentplug.agent"):
        run(runner.run_turn("x", session_key="s1"))
    assert "agent.tools names 'RESTART_AGNT'" in caplog.text


@pytest.mark.parametrize(
    ("tools", "key", "problem"),
    [
        ({"allow": ["@everything"]}, "agent.tools.allow", "'@everything' is not an action name"),
        ({"without_approval": ["@safe"]}, "agent.tools.without_approval", "only in allow"),
        ({"allow": [" "]}, "agent.tools.allow", "an empty entry matches nothing"),
    ],
)
def test_a_malformed_allow_list_is_a_config_error_naming_the_key(
    tools: dict[str, Any], key: str, problem: str
) -> None:
    with pytest.raises(ConfigError) as info:
        agent_config({"tools": tools})
    assert key in str(info.value) and problem in str(info.value)


def test_exclude_matches_tool_names_case_insensitively_and_by_glob(server: ChatServer) -> None:
    server.tool_calls(("LOG_LEVEL", {"level": "debug"}))
    server.reply("done")
    tools = {"allow": ["*"], "without_approval": ["*"], "exclude": ["log_level", "restart_*"]}
    result = run(_runner(server, PluginHost(), tools).run_turn("go", session_key="s1"))
    offered = _offered(server)
    assert "CORE_STATUS" in offered
    assert "LOG_LEVEL" not in offered and "RESTART_AGENT" not in offered
    assert "unknown tool 'LOG_LEVEL'" in _tool_message(result)["content"]
    assert result.status == "replied"
