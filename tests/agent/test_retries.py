"""Retries and fallback models (agentplug.agent.calls, agentplug.agent.retries): which
failures are retried, how long the runner waits, when it gives up, and that every
attempt is its own ``model_call_started`` / ``model_call_ended``.

Offline with the scripted provider (``{"error": ..., "status": 503}`` fails as an HTTP
error would) and against the OpenAI-compatible protocol server on 127.0.0.1.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from agentplug.agent import ScriptedProvider
from agentplug.agent.providers.openai import retry_after_s
from agentplug.agent.retries import RetryConfig, backoff_s
from agentplug.agent.streaming import ModelRetry
from agentplug.services.signals import AbortController

from tests.agent.chat_server import ChatServer, chat_server
from tests.agent.conftest import Recorder, make_runner, run

FAST = {"initial_backoff_s": 0, "max_backoff_s": 0}
"""No wait between attempts (the waits themselves are checked by the unit tests)."""


@pytest.fixture
def server() -> Iterator[ChatServer]:
    with chat_server() as srv:
        yield srv


def _openai(server: ChatServer, recorder: Recorder | None = None, **agent: Any) -> Any:
    settings = {
        "model": "openai/test-model",
        "providers": {"openai": {"base_url": server.base_url}},
        "retry": {"attempts": 3, **FAST},
        **agent,
    }
    runner, _ = make_runner(agent=settings, recorder=recorder)
    return runner


def _outcomes(recorder: Recorder) -> list[tuple[str, str | None]]:
    return [(e.model, e.outcome) for e in recorder.events("model_call_ended")]


# -- what is retried ---------------------------------------------------------------------


def test_a_429_is_retried_and_the_turn_replies(server: ChatServer) -> None:
    server.rate_limit(retry_after="0")
    server.reply("after the limit")
    recorder = Recorder()
    result = run(_openai(server, recorder).run_turn("hi", session_key="s1"))
    assert result.status == "replied" and result.reply == "after the limit"
    assert _outcomes(recorder) == [("test-model", "error"), ("test-model", "ok")]
    assert len(server.requests) == 2


def test_each_attempt_is_its_own_model_call_pair_with_its_own_call_id(server: ChatServer) -> None:
    server.fail(503)
    server.fail(502)
    server.reply("third time")
    recorder = Recorder()
    result = run(_openai(server, recorder).run_turn("hi", session_key="s1"))
    started = recorder.events("model_call_started")
    ended = recorder.events("model_call_ended")
    assert len(started) == len(ended) == 3
    assert len({e.call_id for e in started}) == 3
    assert [e.call_id for e in started] == [e.call_id for e in ended]
    order = [h for h in recorder.order if h.startswith("model_call")]
    assert order == ["model_call_started", "model_call_ended"] * 3
    assert recorder.order.count("llm_output") == 1 and result.reply == "third time"
    models = [e for e in result.trace if e["kind"] == "model"]
    assert [e["decision"].get("attempt") for e in models] == [None, 2, 3]


def test_a_5xx_from_the_scripted_provider_is_retried_offline() -> None:
    recorder = Recorder()
    runner, provider = make_runner(
        [{"error": "overloaded", "status": 503}, "fine"],
        recorder=recorder,
        agent={"retry": FAST},
    )
    result = run(runner.run_turn("hi", session_key="s1"))
    assert result.reply == "fine" and provider.calls == 2
    assert [e.outcome for e in recorder.events("model_call_ended")] == ["error", "ok"]


@pytest.mark.parametrize("status", [400, 401, 404])
def test_a_client_error_is_not_retried(server: ChatServer, status: int) -> None:
    server.fail(status, "no")
    result = run(_openai(server).run_turn("hi", session_key="s1"))
    assert result.status == "failed" and len(server.requests) == 1
    assert f"HTTP {status}" in (result.error or "")


def test_a_scripted_failure_without_a_status_is_not_retried() -> None:
    runner, provider = make_runner([{"error": "broken"}, "never"], agent={"retry": FAST})
    result = run(runner.run_turn("hi", session_key="s1"))
    assert result.status == "failed" and provider.calls == 1


def test_a_connection_failure_is_retried_up_to_the_attempts() -> None:
    recorder = Recorder()
    settings = {
        "model": "openai/m",
        "providers": {"openai": {"base_url": "http://127.0.0.1:9/v1"}},
        "retry": {"attempts": 3, **FAST},
    }
    runner, _ = make_runner(agent=settings, recorder=recorder)
    result = run(runner.run_turn("hi", session_key="s1"))
    assert result.status == "failed" and "cannot reach" in (result.error or "")
    assert "3 attempts failed" in (result.error or "")
    assert [e.outcome for e in recorder.events("model_call_ended")] == ["error"] * 3


def test_the_last_error_names_the_attempts_and_the_keys(server: ChatServer) -> None:
    for _ in range(3):
        server.fail(500, "still down")
    result = run(_openai(server).run_turn("hi", session_key="s1"))
    error = result.error or ""
    assert "still down" in error and "3 attempts failed" in error
    assert "agent.retry" in error and "\n" not in error


# -- Retry-After, backoff, deadline ------------------------------------------------------


def test_a_retry_after_is_waited_for_as_the_server_asked(server: ChatServer) -> None:
    server.rate_limit(retry_after="0.2")
    server.reply("ok")
    events: list[Any] = []
    runner = _openai(server)
    run(runner.run_turn("hi", session_key="s1", on_event=events.append))
    (retry,) = [e for e in events if isinstance(e, ModelRetry)]
    assert retry.delay_s == pytest.approx(0.2)
    assert "rate limited" in retry.error and retry.next_model == "test-model"


def test_a_retry_after_longer_than_allowed_is_not_waited_for(server: ChatServer) -> None:
    server.rate_limit(retry_after="3600")
    server.reply("from the fallback")
    recorder = Recorder()
    runner = _openai(server, recorder, fallback_models=["openai/backup-model"])
    result = run(runner.run_turn("hi", session_key="s1"))
    assert result.reply == "from the fallback"
    assert _outcomes(recorder) == [("test-model", "error"), ("backup-model", "ok")]
    assert server.requests[1]["body"]["model"] == "backup-model"


def test_retries_never_wait_past_the_turns_deadline() -> None:
    recorder = Recorder()
    runner, provider = make_runner(
        [{"error": "busy", "status": 503, "retry_after": 20}, "too late"],
        recorder=recorder,
        agent={"limits": {"turn_timeout_s": 5}, "retry": {"max_retry_after_s": 60}},
    )
    result = run(runner.run_turn("hi", session_key="s1"))
    assert result.status == "failed" and provider.calls == 1
    assert "agent.limits.turn_timeout_s" in (result.error or "") and "busy" in (result.error or "")


def test_a_cancel_during_a_backoff_wait_ends_the_turn_cancelled() -> None:
    controller = AbortController()
    runner, provider = make_runner(
        [{"error": "busy", "status": 503, "retry_after": 30}, "never"],
        agent={"retry": {"max_retry_after_s": 60}},
    )

    async def go() -> Any:
        turn = asyncio.ensure_future(
            runner.run_turn("hi", session_key="s1", signal=controller.signal)
        )
        while provider.calls == 0:
            await asyncio.sleep(0.01)
        controller.abort("user left")
        return await asyncio.wait_for(turn, 10)  # a regression fails, never hangs

    result = run(go())
    assert result.status == "cancelled" and provider.calls == 1


def test_the_backoff_doubles_up_to_its_maximum_with_jitter() -> None:
    config = RetryConfig(initial_backoff_s=1, max_backoff_s=5)
    assert [backoff_s(config, n, lambda: 0.0) for n in (1, 2, 3, 4)] == [0.5, 1, 2, 2.5]
    assert [backoff_s(config, n, lambda: 1.0) for n in (1, 2, 3, 4)] == [1, 2, 4, 5]


def test_retry_after_is_read_in_seconds_milliseconds_and_http_dates() -> None:
    assert retry_after_s(httpx.Headers({"retry-after": "7"})) == 7
    assert retry_after_s(httpx.Headers({"retry-after-ms": "1500"})) == 1.5
    assert retry_after_s(httpx.Headers({"retry-after": "Wed, 21 Oct 2015 07:28:00 GMT"})) == 0
    assert retry_after_s(httpx.Headers({"retry-after": "-5"})) == 0
    assert retry_after_s(httpx.Headers({"retry-after": "soon"})) is None
    assert retry_after_s(httpx.Headers({"retry-after": "nan"})) is None
    assert retry_after_s(httpx.Headers({"retry-after": "1e308"})) == 86_400


def test_a_retry_config_whose_maximum_is_below_its_start_is_refused() -> None:
    from agentplug.core.errors import ConfigError

    with pytest.raises(ConfigError, match=r"agent\.retry"):
        make_runner(agent={"retry": {"initial_backoff_s": 5, "max_backoff_s": 1}})


# -- fallback models ---------------------------------------------------------------------


def test_fallback_models_are_tried_in_order_after_the_attempts(server: ChatServer) -> None:
    for _ in range(2):
        server.fail(500, "primary down")
    for _ in range(2):
        server.fail(500, "second down")
    server.reply("third model answers")
    recorder = Recorder()
    runner = _openai(
        server,
        recorder,
        retry={"attempts": 2, **FAST},
        fallback_models=["openai/second", "openai/third"],
    )
    result = run(runner.run_turn("hi", session_key="s1"))
    assert result.reply == "third model answers"
    expected = ["test-model", "test-model", "second", "second", "third"]
    assert [r["body"]["model"] for r in server.requests] == expected
    assert [m for m, _ in _outcomes(recorder)] == expected
    (output,) = recorder.events("llm_output")
    assert output.model == "third"


def test_a_fallback_of_another_provider_is_used_offline() -> None:
    recorder = Recorder()
    runner, _ = make_runner(
        [{"error": "down", "status": 500}],
        recorder=recorder,
        agent={"retry": {"attempts": 1}, "fallback_models": ["backup/small"]},
    )
    runner.providers.register("backup", ScriptedProvider(["backup speaking"]))
    result = run(runner.run_turn("hi", session_key="s1"))
    assert result.reply == "backup speaking"
    assert [(e.provider, e.model) for e in recorder.events("model_call_ended")] == [
        ("scripted", "default"),
        ("backup", "small"),
    ]


def test_an_unknown_fallback_provider_is_skipped_and_named_when_nothing_answers() -> None:
    runner, _ = make_runner(
        [{"error": "down", "status": 500}],
        agent={"retry": {"attempts": 1}, "fallback_models": ["nosuch/model"]},
    )
    result = run(runner.run_turn("hi", session_key="s1"))
    assert result.status == "failed" and "unknown model provider 'nosuch'" in (result.error or "")
