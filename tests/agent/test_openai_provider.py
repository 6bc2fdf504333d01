"""The ``openai`` provider against a real chat-completions server on 127.0.0.1."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from agentplug import PluginHost
from agentplug.agent import AgentRunner

from tests.agent.chat_server import ChatServer, chat_server
from tests.agent.conftest import Recorder, run

# Handlers of the deprecated before_agent_start are registered on purpose here.
pytestmark = pytest.mark.filterwarnings(
    "ignore:plugin .* uses deprecated hook 'before_agent_start'"
)


@pytest.fixture
def server() -> Iterator[ChatServer]:
    with chat_server() as srv:
        yield srv


def _runner(
    server: ChatServer, recorder: Recorder | None = None, attempts: int = 3, **options: Any
) -> AgentRunner:
    host = PluginHost()
    if recorder is not None:
        host.register(recorder, recorder.plugin_id)
    config = {
        "model": "openai/test-model",
        "tools": {"actions": False},
        "providers": {
            "openai": {"base_url": server.base_url, "api_key_env": "AGENTPLUG_TEST_KEY", **options}
        },
        "retry": {"attempts": attempts},
    }
    return AgentRunner(host, config=config)


def test_openai_plain_reply_with_usage_and_a_hashed_request_id(
    server: ChatServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AGENTPLUG_TEST_KEY", "sk-test-123")
    server.reply("Bonjour!", request_id="req_RAW_77")
    recorder = Recorder()
    result = run(_runner(server, recorder).run_turn("hello", session_key="s1"))
    assert result.status == "replied" and result.reply == "Bonjour!"
    (request,) = server.requests
    assert request["path"] == "/v1/chat/completions"
    assert request["headers"]["authorization"] == "Bearer sk-test-123"
    assert request["body"]["model"] == "test-model"
    assert request["body"]["messages"][-1] == {"role": "user", "content": "hello"}
    (output,) = recorder.events("llm_output")
    assert output.usage == {"prompt_tokens": 5, "completion_tokens": 2, "total_tokens": 7}
    (ended,) = recorder.events("model_call_ended")
    assert ended.upstream_request_id_hash and "req_RAW_77" not in str(ended.model_dump())
    assert ended.transport == "http" and ended.provider == "openai"


def test_openai_without_the_key_variable_sends_no_authorization(
    server: ChatServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("AGENTPLUG_TEST_KEY", raising=False)
    server.reply("local model answer")
    result = run(_runner(server).run_turn("hi", session_key="s1"))
    assert result.reply == "local model answer"
    assert "authorization" not in server.requests[0]["headers"]


def test_openai_tool_calls_round_trip_through_the_gate(server: ChatServer) -> None:
    server.tool_calls(("get_weather", {"city": "Paris"}))
    server.reply("It is sunny in Paris.")
    runner = _runner(server)

    def get_weather(city: str) -> str:
        """The current weather of a city."""
        return f"sunny, 21C in {city}"

    runner.tools.add_python(get_weather)
    result = run(runner.run_turn("weather in Paris?", session_key="s1"))
    assert result.reply == "It is sunny in Paris."
    first, second = (r["body"] for r in server.requests)
    assert first["tools"][0]["function"]["name"] == "get_weather"
    assert first["tools"][0]["function"]["parameters"]["required"] == ["city"]
    assistant, tool = second["messages"][-2:]
    assert assistant["tool_calls"][0]["function"]["name"] == "get_weather"
    assert tool == {
        "role": "tool",
        "tool_call_id": "call_a0",
        "name": "get_weather",
        "content": "sunny, 21C in Paris",
    }


def test_openai_tool_call_with_arguments_that_are_not_json_is_reported_to_the_model(
    server: ChatServer,
) -> None:
    server.tool_calls(("get_weather", "{city: Paris"))
    server.reply("Sorry.")
    runner = _runner(server)
    runner.tools.add_python(lambda city: city, name="get_weather", description="weather")
    result = run(runner.run_turn("weather?", session_key="s1"))
    assert result.reply == "Sorry."
    assert "not a JSON object" in server.requests[1]["body"]["messages"][-1]["content"]


@pytest.mark.parametrize(
    ("status", "body", "expected"),
    [
        (401, {"error": {"message": "Incorrect API key provided"}}, "HTTP 401"),
        (404, {"error": {"message": "model 'x' not found"}}, "model 'x' not found"),
        (500, b"upstream crashed", "upstream crashed"),
        (429, {"error": "slow down"}, "rate limited"),
    ],
)
def test_openai_http_errors_are_one_line_and_end_the_turn_unsuccessfully(
    server: ChatServer, status: int, body: Any, expected: str
) -> None:
    server.raw(status, body)
    recorder = Recorder()
    result = run(_runner(server, recorder, attempts=1).run_turn("hi", session_key="s1"))
    assert result.status == "failed" and not result.success
    assert result.error is not None and expected in result.error and "\n" not in result.error
    assert "openai provider" in result.error
    assert recorder.events("agent_end")[0].success is False
    assert "llm_output" not in recorder.order


def test_openai_401_names_the_api_key_variable(server: ChatServer) -> None:
    server.raw(401, {"error": {"message": "bad key"}})
    result = run(_runner(server).run_turn("hi", session_key="s1"))
    assert "$AGENTPLUG_TEST_KEY" in (result.error or "")


def test_openai_timeout_is_a_clear_error(server: ChatServer) -> None:
    server.raw(200, "hang")
    recorder = Recorder()
    runner = _runner(server, recorder, attempts=1, timeout_s=0.3)
    result = run(runner.run_turn("hi", session_key="s1"))
    assert result.status == "failed"
    assert "did not complete within 0.3 s" in (result.error or "")
    assert recorder.events("model_call_ended")[0].outcome == "timeout"
    assert recorder.events("agent_end")[0].success is False


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        (b"<html>not json</html>", "not JSON"),
        ({"object": "chat.completion"}, "no choices[0]"),
        ({"choices": [{"message": {"content": 5}}]}, "content is not text"),
        ({"choices": [{"message": {"tool_calls": [{"function": {}}]}}]}, "no function name"),
    ],
)
def test_openai_malformed_bodies_are_clear_errors(
    server: ChatServer, body: Any, expected: str
) -> None:
    server.raw(200, body)
    recorder = Recorder()
    result = run(_runner(server, recorder).run_turn("hi", session_key="s1"))
    assert result.status == "failed" and expected in (result.error or "")
    assert recorder.events("agent_end")[0].success is False


def test_openai_connection_refused_is_a_clear_error() -> None:
    with chat_server() as srv:
        url = srv.base_url
    host = PluginHost()
    config = {
        "model": "openai/m",
        "tools": {"actions": False},
        "providers": {"openai": {"base_url": url}},
    }
    result = run(AgentRunner(host, config=config).run_turn("hi", session_key="s1"))
    assert result.status == "failed" and "cannot reach" in (result.error or "")


def test_an_unknown_provider_name_is_a_clear_config_error() -> None:
    host = PluginHost()
    result = run(AgentRunner(host, config={"model": "opnai/m"}).run_turn("hi", session_key="s1"))
    assert result.status == "failed"
    assert "unknown model provider 'opnai'" in (result.error or "")
    assert "did you mean 'openai'" in (result.error or "")
