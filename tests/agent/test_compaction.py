"""Compaction (issue 27 item 8): the provider's token counts when it gives them, the current
user message never summarised away, a compaction only when the budget is crossed, and a
long conversation that stays within its budget."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from agentplug.agent import ModelRequest, ModelResponse
from agentplug.agent.compaction import SUMMARY_PROMPT

from tests.agent.chat_server import ChatServer, chat_server
from tests.agent.conftest import Recorder, make_runner, run, tool_call


@pytest.fixture
def server() -> Iterator[ChatServer]:
    with chat_server() as srv:
        yield srv


def _said(text: str, prompt_tokens: int, completion_tokens: int = 5) -> dict[str, Any]:
    return {
        "text": text,
        "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens},
    }


def _is_summary(request: ModelRequest) -> bool:
    return bool(request.messages) and request.messages[0].get("content") == SUMMARY_PROMPT


def test_the_providers_count_triggers_compaction_when_the_text_looks_small() -> None:
    recorder = Recorder(("before_compaction",))
    runner, provider = make_runner(
        [_said("short", prompt_tokens=5_000), "SUMMARY", "ok"],
        recorder=recorder,
        agent={"context_token_budget": 1_000, "compaction_keep_messages": 0},
    )
    run(runner.run_turn("hi", session_key="s1"))
    run(runner.run_turn("again", session_key="s1"))  # the count comes from the store
    (event,) = recorder.events("before_compaction")
    assert event.token_count == 5_005 + 1  # the provider's count plus "again" estimated
    assert _is_summary(provider.requests[1])


def test_a_small_provider_count_keeps_a_long_text_whole() -> None:
    recorder = Recorder(("before_compaction",))
    runner, provider = make_runner(
        [_said("x" * 8_000, prompt_tokens=100, completion_tokens=50), "ok"],
        recorder=recorder,
        agent={"context_token_budget": 1_000, "compaction_keep_messages": 0},
    )
    run(runner.run_turn("hi", session_key="s1"))
    run(runner.run_turn("again", session_key="s1"))
    assert recorder.events("before_compaction") == []  # 8000 chars would estimate 2000
    assert not any(_is_summary(r) for r in provider.requests)


def test_without_a_provider_count_the_transcript_is_estimated() -> None:
    recorder = Recorder(("before_compaction",))
    runner, _ = make_runner(
        [{"text": "y" * 8_000, "usage": {"note": "no counts"}}, "SUMMARY", "ok"],
        recorder=recorder,
        agent={"context_token_budget": 1_000, "compaction_keep_messages": 0},
    )
    run(runner.run_turn("hi", session_key="s1"))
    run(runner.run_turn("again", session_key="s1"))
    (event,) = recorder.events("before_compaction")
    assert event.token_count == (2 + 8_000 + 5) // 4


def test_the_current_user_message_is_never_summarised_away() -> None:
    runner, provider = make_runner(
        [_said("old answer", prompt_tokens=5_000), "SUMMARY", "fresh answer"],
        agent={"context_token_budget": 1_000, "compaction_keep_messages": 0},
    )
    run(runner.run_turn("old question", session_key="s1"))
    result = run(runner.run_turn("QUESTION-XYZ", session_key="s1"))
    summary_request, answer_request = provider.requests[1], provider.requests[2]
    assert "QUESTION-XYZ" not in str(summary_request.messages)
    assert answer_request.messages[-1] == {"role": "user", "content": "QUESTION-XYZ"}
    assert [m["role"] for m in result.transcript] == ["system", "user", "assistant"]


def test_the_current_user_message_stays_across_a_compaction_in_the_tool_loop() -> None:
    runner, provider = make_runner(
        [
            _said("old", prompt_tokens=10),
            {**tool_call("echo", {"text": "a"}), "usage": {"prompt_tokens": 5_000}},
            "SUMMARY",
            "done",
        ],
        agent={"context_token_budget": 1_000, "compaction_keep_messages": 0},
    )
    runner.tools.add_python(lambda text: text, name="echo", description="Echo.")
    run(runner.run_turn("first", session_key="s1"))
    result = run(runner.run_turn("THE-QUESTION", session_key="s1"))
    assert result.status == "replied"
    final = provider.requests[-1].messages
    assert {"role": "user", "content": "THE-QUESTION"} in final
    assert [m["role"] for m in final] == ["system", "user", "assistant", "tool"]


def test_no_compaction_runs_while_the_transcript_is_under_the_budget() -> None:
    recorder = Recorder(("before_compaction",))
    runner, _ = make_runner(
        [_said(f"answer {i}", prompt_tokens=100 * i) for i in range(1, 9)],
        recorder=recorder,
        agent={"context_token_budget": 1_000},
    )
    for i in range(8):
        run(runner.run_turn(f"question {i}", session_key="s1"))
    assert recorder.events("before_compaction") == []


def test_what_must_be_kept_is_not_summarised_again_on_every_call() -> None:
    recorder = Recorder(("before_compaction",))
    runner, _ = make_runner(
        [
            _said("old", prompt_tokens=10),
            {**tool_call("echo", {"text": "a"}), "usage": {"prompt_tokens": 5_000}},
            "SUMMARY",
            {**tool_call("echo", {"text": "b"}, "c2"), "usage": {"prompt_tokens": 5_000}},
            "done",
        ],
        recorder=recorder,
        agent={"context_token_budget": 1_000, "compaction_keep_messages": 0},
    )
    runner.tools.add_python(lambda text: text, name="echo", description="Echo.")
    run(runner.run_turn("first", session_key="s1"))
    result = run(runner.run_turn("second", session_key="s1"))
    assert result.status == "replied" and result.reply == "done"
    assert len(recorder.events("before_compaction")) == 1


@pytest.mark.parametrize(("counted", "compacts"), [(850, True), (750, False)])
def test_with_only_the_models_window_compaction_starts_at_eighty_percent(
    counted: int, compacts: bool
) -> None:
    recorder = Recorder(("before_compaction",))
    runner, _ = make_runner(
        [_said("a", prompt_tokens=counted, completion_tokens=0), "SUMMARY", "b"],
        recorder=recorder,
        agent={"context_window_tokens": 1_000, "compaction_keep_messages": 0},
    )
    run(runner.run_turn("hi", session_key="s1"))
    run(runner.run_turn("x", session_key="s1"))
    assert bool(recorder.events("before_compaction")) is compacts


class CountingModel:
    """Answers each turn and each summary request, counting tokens like a real server
    (four characters a token) so that compaction works from provider counts."""

    name = "scripted"

    def __init__(self) -> None:
        self.requests: list[ModelRequest] = []

    async def complete(self, request: ModelRequest) -> ModelResponse:
        self.requests.append(request)
        prompt = sum(len(str(m.get("content") or "")) for m in request.messages) // 4
        if _is_summary(request):
            text = "Summary: the user asked several questions about invoices."
        else:
            text = f"Answer to {request.messages[-1]['content'][:20]}: " + "detail " * 40
        return ModelResponse(
            text=text, usage={"prompt_tokens": prompt, "completion_tokens": len(text) // 4}
        )


def test_a_long_conversation_stays_within_its_budget_and_keeps_every_question() -> None:
    recorder = Recorder(("before_compaction", "after_compaction"))
    runner, _ = make_runner(
        recorder=recorder, agent={"context_token_budget": 600, "compaction_keep_messages": 4}
    )
    model = CountingModel()
    runner.providers.register("scripted", model)
    for turn in range(40):
        question = f"Q{turn:02d} " + "about the invoice rules " * 8
        result = run(runner.run_turn(question, session_key="long"))
        assert result.status == "replied", result.error
        asked = [r for r in model.requests if not _is_summary(r)][-1]
        assert asked.messages[-1] == {"role": "user", "content": question}
    compactions = len(recorder.events("before_compaction"))
    assert 3 <= compactions < 40
    assert all(e.token_count > 600 for e in recorder.events("before_compaction"))
    # Every answer request after the first compaction stayed near the budget.
    answers = [r for r in model.requests if not _is_summary(r)]
    sizes = [sum(len(str(m.get("content") or "")) for m in r.messages) // 4 for r in answers]
    assert max(sizes[10:]) < 600 + 400


def test_the_openai_servers_usage_drives_compaction(server: ChatServer) -> None:
    server.reply("first", usage={"prompt_tokens": 3_000, "completion_tokens": 4})
    server.reply("SUMMARY: earlier talk")
    server.reply("second")
    runner, scripted = make_runner(
        agent={
            "model": "openai/m",
            "context_token_budget": 1_000,
            "compaction_keep_messages": 0,
            "providers": {"openai": {"base_url": server.base_url}},
        }
    )
    run(runner.run_turn("hello", session_key="s1"))
    result = run(runner.run_turn("and now?", session_key="s1"))
    assert result.reply == "second" and scripted.requests == []
    summary, answer = server.requests[1]["body"], server.requests[2]["body"]
    assert summary["messages"][0] == {"role": "system", "content": SUMMARY_PROMPT}
    assert answer["messages"][-1] == {"role": "user", "content": "and now?"}
    assert "Summary of the earlier conversation: SUMMARY: earlier talk" in str(answer)
