"""Every ordering rule of a turn, driven through AgentRunner (issue 12)."""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest
from agentplug import PluginApi
from agentplug.agent import InboundMessage
from agentplug.agent.tools import ToolCallContext, ToolOutput
from agentplug.services.approvals import ApprovalBroker, ScriptedResolver

from tests.agent.conftest import Recorder, make_runner, on, run, tool_call

# Handlers of the deprecated before_agent_start are registered on purpose here.
pytestmark = pytest.mark.filterwarnings(
    "ignore:plugin .* uses deprecated hook 'before_agent_start'"
)


CANARY = "CANARY-9d2e-confidential-reason"


def _echo(text: str) -> str:
    """Echo the text back in capitals."""
    return text.upper()


def test_a_tool_turn_runs_every_hook_in_the_documented_order() -> None:
    recorder = Recorder()
    sent: list[dict[str, Any]] = []
    runner, _ = make_runner(
        [tool_call("echo", {"text": "hi"}), "Done."], recorder=recorder, channel=sent.append
    )
    runner.tools.add_python(_echo, name="echo")
    result = run(runner.handle_inbound({"content": "hello", "sender_id": "u1"}))
    assert result.status == "replied" and result.reply == "Done."
    assert recorder.order == [
        "inbound_claim",
        "message_received",
        "before_model_resolve",  # before the session is loaded
        "session_start",
        "agent_turn_prepare",
        "before_prompt_build",
        "before_agent_start",
        "before_agent_run",
        "before_agent_reply",
        "before_message_write",  # the user's message
        "llm_input",
        "model_call_started",
        "model_call_ended",
        "llm_output",
        "before_message_write",  # the assistant's tool call
        "before_tool_call",
        "after_tool_call",
        "tool_result_persist",
        "before_message_write",  # the tool result
        "llm_input",
        "model_call_started",
        "model_call_ended",
        "llm_output",
        "before_message_write",  # the final reply
        "before_agent_finalize",
        "message_sending",
        "reply_payload_sending",
        "before_dispatch",
        "reply_dispatch",
        "message_sent",
        "agent_end",
    ]
    assert sent == [{"text": "Done.", "media": []}]


def test_message_received_carries_body_for_agent_and_the_agent_reads_it() -> None:
    recorder = Recorder()
    runner, provider = make_runner(["ok"], recorder=recorder)
    run(runner.handle_inbound({"content": "[tg] Ana: hi there", "body_for_agent": "hi there"}))
    (event,) = recorder.events("message_received")
    assert event.body_for_agent == "hi there" and event.content == "[tg] Ana: hi there"
    assert provider.requests[0].messages[-1] == {"role": "user", "content": "hi there"}


def test_session_start_fires_only_for_a_new_session() -> None:
    recorder = Recorder()
    runner, _ = make_runner(["one", "two"], recorder=recorder)
    run(runner.run_turn("a", session_key="s1"))
    run(runner.run_turn("b", session_key="s1"))
    assert recorder.order.count("session_start") == 1
    assert recorder.events("session_start")[0].reason == "new"


def test_next_turn_injections_are_drained_before_the_prompt_hooks() -> None:
    seen: dict[str, Any] = {}
    holder: dict[str, PluginApi] = {}

    def register(api: PluginApi) -> None:
        holder["api"] = api

        def prepare(event: Any) -> dict[str, Any]:
            seen["prepare"] = [i["text"] for i in event.injections]
            return {"prepend_context": " ".join(seen["prepare"])}

        def build(event: Any) -> None:
            seen["pending_at_build"] = list(api.host.gateway.sessions.pending_injections("s1"))

        api.on("agent_turn_prepare", prepare)
        api.on("before_prompt_build", build)

    runner, provider = make_runner(["ok", "ok"], plugins={"injector": register})
    holder["api"].session.workflow.enqueue_next_turn_injection("s1", "Remember the invoice.")
    run(runner.run_turn("hello", session_key="s1"))
    assert seen["prepare"] == ["Remember the invoice."]
    assert seen["pending_at_build"] == []
    assert provider.requests[0].messages[-1]["content"] == "Remember the invoice.\n\nhello"
    run(runner.run_turn("again", session_key="s1"))
    assert seen["prepare"] == []  # delivered exactly once


def test_before_model_resolve_overrides_the_provider_and_model() -> None:
    from agentplug.agent import ScriptedProvider

    other = ScriptedProvider(["from the other provider"])
    other.name = "other"
    runner, default = make_runner(
        ["from the default"],
        plugins={
            "router": on(
                "before_model_resolve",
                lambda: {"provider_override": "other", "model_override": "big"},
            )
        },
    )
    runner.providers.register("other", other)
    result = run(runner.run_turn("hi", session_key="s1"))
    assert (result.provider, result.model, result.reply) == (
        "other",
        "big",
        "from the other provider",
    )
    assert other.requests[0].model == "big" and default.requests == []


def test_deprecated_before_agent_start_still_adds_its_context() -> None:
    runner, provider = make_runner(
        ["ok"],
        plugins={
            "legacy": on(
                "before_agent_start", lambda: {"prepend_context": "LEGACY", "system_prompt": "SYS"}
            )
        },
    )
    run(runner.run_turn("hi", session_key="s1"))
    messages = provider.requests[0].messages
    assert messages[0] == {"role": "system", "content": "SYS"}
    assert messages[-1]["content"] == "LEGACY\n\nhi"


def test_before_agent_run_block_keeps_only_the_replacement_and_the_reason_goes_nowhere(
    caplog: pytest.LogCaptureFixture,
) -> None:
    recorder = Recorder()
    blocker = on(
        "before_agent_run",
        lambda: {"outcome": "block", "reason": CANARY, "message": "This was blocked."},
    )
    runner, provider = make_runner(["never"], recorder=recorder, plugins={"guard": blocker})
    with caplog.at_level(logging.DEBUG):
        result = run(runner.run_turn("my secret user text", session_key="s1"))
    assert result.status == "blocked" and not result.success and result.blocked_by == "guard"
    assert provider.requests == []
    assert [m["content"] for m in result.transcript] == ["This was blocked."]
    assert result.transcript[0]["metadata"]["blocked_by"] == "guard"
    stored = runner.transcripts.load("s1")
    everything = json.dumps(
        [result.model_dump(mode="json"), stored.messages if stored else None], default=str
    )
    assert CANARY not in everything and "my secret user text" not in everything
    assert CANARY not in caplog.text
    assert "llm_input" not in recorder.order and recorder.order[-1] == "agent_end"
    assert recorder.events("agent_end")[0].success is False


def test_before_agent_reply_claim_answers_without_the_model() -> None:
    recorder = Recorder()
    runner, provider = make_runner(
        ["never"],
        recorder=recorder,
        plugins={"canned": on("before_agent_reply", lambda: {"handled": True, "reply": "canned"})},
    )
    result = run(runner.run_turn("hi", session_key="s1"))
    assert result.reply == "canned" and provider.requests == []
    assert "model_call_started" not in recorder.order
    assert "before_agent_finalize" not in recorder.order


def test_heartbeat_contribution_never_runs_on_a_user_turn() -> None:
    recorder = Recorder()
    runner, _provider = make_runner(["ok"], recorder=recorder)
    run(runner.run_turn("hi", session_key="s1"))
    assert "heartbeat_prompt_contribution" not in recorder.order


def test_heartbeat_contribution_runs_on_heartbeat_turns_and_adds_context() -> None:
    runner, provider = make_runner(
        ["ok"],
        plugins={
            "monitor": on("heartbeat_prompt_contribution", lambda: {"append_context": "disk 91%"})
        },
    )
    run(runner.run_turn("check in", session_key="s1", heartbeat=True))
    assert provider.requests[0].messages[-1]["content"] == "check in\n\ndisk 91%"


def test_no_llm_output_after_a_failed_attempt() -> None:
    recorder = Recorder()
    runner, _ = make_runner([{"error": "upstream exploded"}], recorder=recorder)
    result = run(runner.run_turn("hi", session_key="s1"))
    assert result.status == "failed" and "upstream exploded" in (result.error or "")
    assert "llm_output" not in recorder.order
    (ended,) = recorder.events("model_call_ended")
    assert ended.outcome == "error"
    (end,) = recorder.events("agent_end")
    assert end.success is False and "upstream exploded" in end.error


def test_model_call_hooks_carry_a_hashed_request_id_and_no_content() -> None:
    recorder = Recorder()
    runner, _ = make_runner(
        [{"text": "secret answer", "request_id": "req_RAW_1"}], recorder=recorder
    )
    run(runner.run_turn("secret question", session_key="s1"))
    (ended,) = recorder.events("model_call_ended")
    dumped = json.dumps(ended.model_dump(mode="json"))
    assert ended.upstream_request_id_hash and "req_RAW_1" not in dumped
    assert "secret" not in dumped and ended.outcome == "ok"


def test_a_tool_call_passes_trusted_policies_then_before_tool_call_then_approval() -> None:
    order: list[str] = []

    def plugin(api: PluginApi) -> None:
        def policy(event: Any, ctx: Any) -> None:
            order.append("policy")

        def hook(event: Any) -> dict[str, Any]:
            order.append("before_tool_call")
            return {"require_approval": {"title": "Echo", "description": "echo a text"}}

        api.register_trusted_tool_policy("audit", policy)
        api.on("before_tool_call", hook)

    resolver = ScriptedResolver(default="allow-once")
    runner, _ = make_runner(
        [tool_call("echo", {"text": "x"}), "done"],
        plugins={"gatekeeper": plugin},
        broker=ApprovalBroker(resolver),
    )
    runner.tools.add_python(_echo, name="echo")
    result = run(runner.run_turn("go", session_key="s1"))
    assert order == ["policy", "before_tool_call"]
    assert [p.tool_name for p in resolver.asked] == ["echo"]
    tool_result = next(m for m in result.transcript if m["role"] == "tool")
    assert tool_result["content"] == "X"


def test_a_blocked_tool_call_does_not_run_and_the_model_reads_the_block() -> None:
    ran: list[str] = []

    def danger(target: str) -> str:
        """Delete something."""
        ran.append(target)
        return "deleted"

    blocker = on("before_tool_call", lambda: {"block": True, "block_reason": "not allowed here"})
    runner, provider = make_runner(
        [tool_call("danger", {"target": "repo"}), "I could not do it."],
        plugins={"preflight": blocker},
    )
    runner.tools.add_python(danger)
    result = run(runner.run_turn("delete it", session_key="s1"))
    assert ran == [] and result.reply == "I could not do it."
    replay = provider.requests[1].messages
    assert replay[-1]["role"] == "tool" and "not allowed here" in replay[-1]["content"]


def test_an_exec_tool_gets_the_merged_filtered_environment() -> None:
    seen: dict[str, Any] = {}

    def shell(command: str, call: ToolCallContext) -> str:
        """Run a command."""
        seen["env"] = call.exec_env
        return "ran"

    env = on("resolve_exec_env", lambda: {"TZ": "UTC", "PATH": "/evil", "LD_PRELOAD": "x.so"})
    recorder = Recorder()
    runner, _ = make_runner(
        [tool_call("shell", {"command": "ls"}), "ok"], plugins={"env": env}, recorder=recorder
    )
    runner.tools.add_python(shell, kind="exec")
    run(runner.run_turn("list", session_key="s1"))
    assert seen["env"] == {"TZ": "UTC"}
    order = recorder.order
    assert (
        order.index("before_tool_call")
        < order.index("resolve_exec_env")
        < order.index("after_tool_call")
    )


def test_tool_result_details_are_stripped_before_provider_replay_but_persisted() -> None:
    def lookup() -> ToolOutput:
        """Look something up."""
        return ToolOutput("found it", details={"ui": {"card": "x" * 50}})

    runner, provider = make_runner([tool_call("lookup"), "ok"])
    runner.tools.add_python(lookup)
    result = run(runner.run_turn("find", session_key="s1"))
    replayed = provider.requests[1].messages[-1]
    assert replayed == {
        "role": "tool",
        "tool_call_id": "c1",
        "name": "lookup",
        "content": "found it",
    }
    stored = next(m for m in result.transcript if m["role"] == "tool")
    assert stored["details"] == {"ui": {"card": "x" * 50}}


def test_finalize_retries_are_counted_per_idempotency_key_at_most_three() -> None:
    reviser = on(
        "before_agent_finalize",
        lambda: {
            "action": "revise",
            "reason": "more",
            "retry": {"instruction": "again", "max_attempts": 10},
        },
    )
    runner, _provider = make_runner(["a", "b", "c", "d", "e", "f"], plugins={"critic": reviser})
    result = run(runner.run_turn("hi", session_key="s1"))
    assert result.steps == 4  # the natural reply plus three revisions
    assert result.reply == "d"
    revisions = [m for m in result.transcript if m.get("revision")]
    assert len(revisions) == 3


def test_before_agent_finalize_attempt_counts_revisions_of_the_turn_not_model_calls() -> None:
    attempts: list[int] = []

    def critic(event: Any) -> dict[str, Any] | None:
        attempts.append(event.attempt)
        return {"action": "revise", "reason": "shorter"} if event.attempt == 0 else None

    def lookup() -> str:
        """Look something up."""
        return "found"

    runner, _ = make_runner(
        [tool_call("lookup"), "a long answer", "short"],
        plugins={"critic": on("before_agent_finalize", critic)},
    )
    runner.tools.add_python(lookup)
    result = run(runner.run_turn("find", session_key="s1"))
    assert result.reply == "short" and result.steps == 3
    assert attempts == [0, 1]  # the first final reply, then the one revision


def test_delivery_runs_message_sending_then_reply_payload_then_stages_then_the_channel() -> None:
    order: list[str] = []
    sent: list[dict[str, Any]] = []

    def sending(event: Any) -> dict[str, Any]:
        order.append("message_sending")
        return {"content": event.content + " [checked]"}

    def payload(event: Any) -> dict[str, Any]:
        order.append("reply_payload_sending")
        return {"payload": {"text": event.payload.text, "presentation": {"style": "plain"}}}

    def plugin(api: PluginApi) -> None:
        api.on("message_sending", sending)
        api.on("reply_payload_sending", payload)
        api.on("message_sent", lambda event: order.append(f"message_sent:{event.success}"))

    def stage(p: dict[str, Any]) -> dict[str, Any]:
        order.append("stage")
        return {**p, "text": p["text"] + "!"}

    def channel(p: dict[str, Any]) -> str:
        order.append("channel")
        sent.append(p)
        return "receipt-1"

    runner, _ = make_runner(["Hello"], plugins={"shaper": plugin}, channel=channel)
    runner.append_before_deliver(stage)
    result = run(runner.run_turn("hi", session_key="s1"))
    assert order == [
        "message_sending",
        "reply_payload_sending",
        "stage",
        "channel",
        "message_sent:True",
    ]
    assert sent == [{"text": "Hello [checked]!", "presentation": {"style": "plain"}, "media": []}]
    assert result.reply == "Hello [checked]!" and result.delivery is not None
    assert result.delivery.receipt == "receipt-1"


def test_a_before_deliver_stage_that_outlives_its_budget_is_skipped() -> None:
    import asyncio

    release = asyncio.Event()

    async def slow(p: dict[str, Any]) -> dict[str, Any]:
        await release.wait()
        return {**p, "text": "late"}

    sent: list[dict[str, Any]] = []
    runner, _ = make_runner(["on time"], channel=sent.append)
    runner.append_before_deliver(slow, timeout_ms=20)

    async def go() -> Any:
        result = await runner.run_turn("hi", session_key="s1")
        release.set()
        await runner.host.aclose(5)
        return result

    result = run(go())
    assert sent == [{"text": "on time", "media": []}] and result.reply == "on time"


def test_the_default_before_deliver_budget_is_fifteen_seconds() -> None:
    from agentplug.services.replies import DEFAULT_STAGE_TIMEOUT_MS

    runner, _ = make_runner()
    assert DEFAULT_STAGE_TIMEOUT_MS == 15_000 == runner.replies.default_timeout_ms


def test_a_message_sending_cancel_suppresses_the_delivery() -> None:
    sent: list[Any] = []
    runner, _ = make_runner(
        ["leak: project nightingale"],
        plugins={
            "redactor": on(
                "message_sending", lambda: {"cancel": True, "cancel_reason": "forbidden"}
            )
        },
        channel=sent.append,
    )
    result = run(runner.run_turn("hi", session_key="s1"))
    assert sent == [] and result.status == "suppressed" and result.reply is None
    assert (
        result.delivery is not None
        and result.delivery.reason == "cancelled_by_message_sending_hook"
    )


def test_agent_end_fires_last_with_success_duration_and_run_id() -> None:
    recorder = Recorder()
    runner, _ = make_runner(["ok"], recorder=recorder)
    result = run(runner.run_turn("hi", session_key="s1", run_id="run-fixed"))
    assert recorder.order[-1] == "agent_end"
    (end,) = recorder.events("agent_end")
    assert end.success is True and end.run_id == "run-fixed" == result.run_id
    assert end.duration_ms is not None and end.duration_ms >= 0


def test_cancellation_resolves_pending_approvals_as_cancelled_and_agent_end_fails() -> None:
    from agentplug.services.signals import AbortController

    controller = AbortController()
    resolutions: list[str] = []

    class AbortWhenAsked:
        async def resolve(self, pending: Any) -> str:
            controller.abort("user pressed stop")
            import asyncio

            await asyncio.Event().wait()
            return "allow-once"

    def ask(event: Any) -> dict[str, Any]:
        return {
            "require_approval": {
                "title": "Echo",
                "description": "echo",
                "on_resolution": resolutions.append,
            }
        }

    recorder = Recorder()
    ran: list[str] = []

    def echo(text: str) -> str:
        """Echo."""
        ran.append(text)
        return text

    runner, provider = make_runner(
        [tool_call("echo", {"text": "x"}), "never"],
        plugins={"asker": on("before_tool_call", ask)},
        recorder=recorder,
        broker=ApprovalBroker(AbortWhenAsked()),
    )
    runner.tools.add_python(echo)
    result = run(runner.run_turn("go", session_key="s1", signal=controller.signal))
    assert result.status == "cancelled" and not result.success
    assert resolutions == ["cancelled"] and ran == []
    assert runner.broker.history[-1]["resolution"] == "cancelled"
    assert len(provider.requests) == 1
    (end,) = recorder.events("agent_end")
    assert end.success is False and recorder.order[-1] == "agent_end"


def test_cancellation_during_a_model_call_ends_the_turn() -> None:
    import asyncio

    from agentplug.services.signals import AbortController

    controller = AbortController()
    recorder = Recorder()
    runner, _ = make_runner([{"hang": True}], recorder=recorder)

    def abort_when_started(event: Any) -> None:
        asyncio.get_running_loop().call_soon(controller.abort, "stop")

    runner.host.register(on("model_call_started", abort_when_started), "stopper")
    result = run(runner.run_turn("hi", session_key="s1", signal=controller.signal))
    assert result.status == "cancelled"
    assert recorder.events("model_call_ended")[0].outcome == "cancelled"
    assert "llm_output" not in recorder.order
    assert recorder.events("agent_end")[0].success is False


def test_compaction_is_bracketed_when_the_transcript_passes_the_budget() -> None:
    recorder = Recorder()
    runner, provider = make_runner(
        ["first answer " * 20, "SUMMARY: talked about invoices", "second"],
        recorder=recorder,
        agent={"context_token_budget": 40, "compaction_keep_messages": 1},
    )
    run(runner.run_turn("tell me about invoices " * 5, session_key="s1"))
    recorder.calls.clear()
    result = run(runner.run_turn("and now?", session_key="s1"))
    order = recorder.order
    assert (
        order.index("before_compaction")
        < order.index("after_compaction")
        < order.index("llm_input")
    )
    (after,) = recorder.events("after_compaction")
    assert after.summary == "SUMMARY: talked about invoices"
    assert result.transcript[0]["content"].startswith("Summary of the earlier conversation")
    assert provider.requests[1].messages[0]["content"].startswith("Summarise the conversation")


def test_the_tool_loop_stops_at_the_step_limit() -> None:
    runner, _ = make_runner([tool_call("echo", {"text": "x"})] * 5, agent={"max_steps": 2})
    runner.tools.add_python(_echo, name="echo")
    result = run(runner.run_turn("loop", session_key="s1"))
    assert result.status == "step_limit" and result.steps == 2 and not result.success


def test_an_unknown_tool_is_an_error_result_the_model_reads() -> None:
    runner, provider = make_runner([tool_call("nope"), "sorry"])
    result = run(runner.run_turn("x", session_key="s1"))
    assert result.reply == "sorry"
    assert "unknown tool 'nope'" in provider.requests[1].messages[-1]["content"]


def test_the_sync_facade_runs_a_whole_turn() -> None:
    runner, _ = make_runner(["sync hello"])
    result = runner.sync.handle_inbound(InboundMessage(content="hi", sender_id="u9"))
    assert result.reply == "sync hello" and result.session_key == "agent:main:direct:u9"
    runner.host.sync.close()


def test_inbound_claim_takes_the_message_before_the_agent() -> None:
    recorder = Recorder()
    sent: list[Any] = []
    runner, provider = make_runner(
        ["never"],
        recorder=recorder,
        plugins={"pairing": on("inbound_claim", lambda: {"handled": True, "reply": "paired"})},
        channel=sent.append,
    )
    result = run(runner.handle_inbound({"content": "/pair 123"}))
    assert result.status == "claimed" and result.reply == "paired"
    assert provider.requests == [] and "message_received" not in recorder.order
    assert sent == [{"text": "paired", "media": []}]


def test_streamed_reply_text_reaches_on_delta_before_delivery() -> None:
    seen: list[str] = []
    runner, _ = make_runner(["streamed reply text"], on_delta=seen.append)
    result = run(runner.run_turn("hi", session_key="s1"))
    assert "".join(seen) == "streamed reply text" == result.reply
    assert len(seen) == 3


def test_a_failing_transcript_store_still_ends_the_turn_with_agent_end() -> None:
    class BrokenStore:
        def load(self, session_key: str) -> Any:
            raise OSError("disk gone")

        def save(self, record: Any) -> None:
            raise OSError("disk gone")

    recorder = Recorder()
    runner, _ = make_runner(["ok"], recorder=recorder, transcripts=BrokenStore())
    result = run(runner.run_turn("hi", session_key="s1"))
    assert result.status == "failed" and "could not be saved" in (result.error or "")
    assert recorder.order[-1] == "agent_end"
    assert recorder.events("agent_end")[0].success is False
