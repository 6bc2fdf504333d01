"""Structured output: ``output_type=`` makes a turn's final answer a validated value,
asks the model again (at most ``output_retries`` times) when it does not validate, and
tells the server the schema (agentplug.agent.structured)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from agentplug.core.errors import AgentplugError
from pydantic import BaseModel

from tests.agent.chat_server import ChatServer, chat_server
from tests.agent.conftest import make_runner, run, tool_call


class Invoice(BaseModel):
    """An invoice the model reads from the conversation."""

    customer: str
    total: float


SCHEMA = {
    "title": "City weather",
    "type": "object",
    "properties": {"city": {"type": "string"}, "celsius": {"type": "integer"}},
    "required": ["city", "celsius"],
    "additionalProperties": False,
}


@pytest.fixture
def server() -> Iterator[ChatServer]:
    with chat_server() as srv:
        yield srv


def test_a_pydantic_output_type_makes_the_final_answer_a_validated_model() -> None:
    runner, _ = make_runner(['{"customer": "ACME", "total": 12.5}'])
    result = run(runner.run_turn("bill ACME", session_key="s1", output_type=Invoice))
    assert result.status == "replied" and result.output == Invoice(customer="ACME", total=12.5)
    assert result.reply == '{"customer": "ACME", "total": 12.5}'


def test_a_json_schema_output_type_is_validated_with_the_schema() -> None:
    runner, _ = make_runner(['```json\n{"city": "Paris", "celsius": 21}\n```'])
    result = run(runner.run_turn("weather?", session_key="s1", output_type=SCHEMA))
    assert result.output == {"city": "Paris", "celsius": 21}


def test_an_answer_that_does_not_validate_is_asked_again_with_the_error() -> None:
    runner, provider = make_runner(
        ['{"customer": "ACME"}', "not json at all", '{"customer": "ACME", "total": 3}']
    )
    result = run(runner.run_turn("bill", session_key="s1", output_type=Invoice))
    assert result.output == Invoice(customer="ACME", total=3) and provider.calls == 3
    asks = [m["content"] for m in provider.requests[1].messages if m["role"] == "user"]
    assert "total: Field required" in asks[-1] and "Answer again" in asks[-1]
    last = [m["content"] for m in provider.requests[2].messages if m["role"] == "user"][-1]
    assert "Invalid JSON" in last


def test_the_model_is_asked_again_at_most_output_retries_times() -> None:
    runner, provider = make_runner(['{"city": 1}'] * 5)
    result = run(
        runner.run_turn("weather?", session_key="s1", output_type=SCHEMA, output_retries=1)
    )
    assert result.status == "failed" and provider.calls == 2 and result.output is None
    assert result.error is not None and "output type City_weather after 1 re-ask" in result.error
    assert "city: 1 is not of type 'string'" in result.error and result.reply is None


def test_every_model_call_of_the_turn_is_told_the_schema() -> None:
    runner, provider = make_runner(
        [tool_call("echo", {"x": 1}), '{"customer": "A", "total": 1}'],
        agent={"system_prompt": "You bill."},
    )
    runner.tools.add_python(lambda x: "ok", name="echo", description="E.")
    run(runner.run_turn("bill", session_key="s1", output_type=Invoice))
    for request in provider.requests:
        assert request.output_schema is not None and request.output_name == "Invoice"
        system = request.messages[0]["content"]
        assert system.startswith("You bill.") and '"total"' in system


def test_the_openai_provider_sends_the_schema_as_response_format(server: ChatServer) -> None:
    server.reply('{"customer": "ACME", "total": 1}')
    settings = {"model": "openai/m", "providers": {"openai": {"base_url": server.base_url}}}
    runner, _ = make_runner(agent=settings)
    result = run(runner.run_turn("bill", session_key="s1", output_type=Invoice))
    assert result.output == Invoice(customer="ACME", total=1)
    sent = server.requests[0]["body"]["response_format"]
    assert sent["type"] == "json_schema" and sent["json_schema"]["name"] == "Invoice"
    assert sent["json_schema"]["schema"]["required"] == ["customer", "total"]


def test_response_format_can_be_turned_off_for_servers_that_refuse_it(server: ChatServer) -> None:
    server.reply('{"city": "Oslo", "celsius": -3}')
    options = {"base_url": server.base_url, "response_format": False}
    runner, _ = make_runner(agent={"model": "openai/m", "providers": {"openai": options}})
    result = run(runner.run_turn("weather?", session_key="s1", output_type=SCHEMA))
    assert result.output == {"city": "Oslo", "celsius": -3}
    assert "response_format" not in server.requests[0]["body"]


def test_a_streamed_structured_answer_is_validated_whole(server: ChatServer) -> None:
    server.stream_reply('{"customer": "Streamed Ltd", "total": 99}', size=5)
    settings = {"model": "openai/m", "providers": {"openai": {"base_url": server.base_url}}}
    runner, _ = make_runner(agent=settings)

    async def go() -> Any:
        return [e async for e in runner.stream("bill", session_key="s1", output_type=Invoice)]

    final = run(go())[-1]
    assert final.result.output == Invoice(customer="Streamed Ltd", total=99)


@pytest.mark.parametrize(
    ("output_type", "message"),
    [
        ({"type": "no-such-type"}, "not a valid JSON schema"),
        (object(), "has no JSON schema"),
    ],
)
def test_a_bad_output_type_is_an_error_before_the_turn_starts(
    output_type: Any, message: str
) -> None:
    runner, provider = make_runner(["{}"])
    with pytest.raises(AgentplugError, match=message):
        run(runner.run_turn("hi", session_key="s1", output_type=output_type))
    assert provider.calls == 0


def test_an_answer_nested_past_the_parsers_depth_is_refused_not_crashed() -> None:
    deep = "[" * 100_000 + "]" * 100_000
    runner, _ = make_runner([deep, deep, deep])
    result = run(runner.run_turn("hi", session_key="s1", output_type=list[Any]))
    assert result.status == "failed" and "\n" not in (result.error or "")
