"""Agent-turn services: prepare, run guard, finalize retries, message and payload delivery."""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any

import pytest
from agentplug import PluginApi, PluginHost
from agentplug.services.turns import (
    CANCELLED_BY_MESSAGE_SENDING_HOOK,
    DEFAULT_BLOCK_MESSAGE,
    FinalizeRetryTracker,
    guard_run,
    prepare_turn,
    send_message,
    send_message_legacy,
    send_reply_payload,
)
from agentplug_hookspecs.agent import AgentFinalizeOutcome, FinalizeRetry

S = "agent:main:turns"
CANARY = "CANARY-7f3a9c-confidential-reason"


def on(hook: str, fn: Any, **kw: Any) -> Any:
    def register(api: PluginApi) -> None:
        api.on(hook, fn, **kw)

    return register


# -- prepare_turn ----------------------------------------------------------------------


class TurnPlugin:
    """Enqueues injections and renders them in agent_turn_prepare."""

    def __init__(self, plugin_id: str = "turn-plugin") -> None:
        self.plugin_id = plugin_id
        self.seen: list[Any] = []
        self.api: PluginApi | None = None

    def register(self, api: PluginApi) -> None:
        self.api = api
        api.on("agent_turn_prepare", self.prepare, priority=10)

    def prepare(self, event: Any) -> dict[str, Any] | None:
        self.seen.append([dict(i) for i in event.injections])
        mine = [i["text"] for i in event.injections if i["plugin_id"] == self.plugin_id]
        return {"prepend_context": "\n".join(mine)} if mine else None


def test_prepare_turn_drains_injections_before_the_prompt_hooks_and_combines_contexts() -> None:
    plugin = TurnPlugin()
    host = PluginHost()
    host.register(plugin, plugin.plugin_id)
    queue_seen_by_prompt_build: list[Any] = []

    def build(event: Any) -> dict[str, Any]:
        queue_seen_by_prompt_build.append(host.gateway.sessions.pending_injections(S))
        return {
            "prepend_context": "operator context",
            "append_context": "be brief",
            "system_prompt": "You are helpful.",
            "append_system_context": "Today is Wednesday.",
        }

    host.register(on("before_prompt_build", build), "builder")
    assert plugin.api is not None
    plugin.api.session.workflow.enqueue_next_turn_injection(S, "Approval granted for #12.")

    turn = asyncio.run(
        prepare_turn(
            host, S, "continue", [{"role": "user", "content": "hi"}], sessions=host.gateway.sessions
        )
    )
    assert [i["text"] for i in plugin.seen[0]] == ["Approval granted for #12."]
    assert queue_seen_by_prompt_build == [[]]
    assert turn.prepend_context == "Approval granted for #12.\n\noperator context"
    assert turn.append_context == "be brief"
    assert (
        turn.final_prompt == "Approval granted for #12.\n\noperator context\n\ncontinue\n\nbe brief"
    )
    assert turn.final_system_prompt() == "You are helpful.\n\nToday is Wednesday."
    assert [h.hook for h in turn.handlers] == ["agent_turn_prepare", "before_prompt_build"]

    again = asyncio.run(prepare_turn(host, S, "next", [], sessions=host.gateway.sessions))
    assert again.injections == [] and plugin.seen[1] == []
    assert again.prepend_context == "operator context"


def test_the_session_key_reaches_the_hook_context() -> None:
    seen: list[Any] = []
    host = PluginHost()
    host.register(on("before_prompt_build", lambda event, ctx: seen.append(ctx.session_key)), "p")
    asyncio.run(
        prepare_turn(host, S, "hello", [], {"agent_id": "main"}, sessions=host.gateway.sessions)
    )
    assert seen == [S]


def test_render_injections_lets_the_runtime_place_them_itself() -> None:
    host = PluginHost()
    api = host.gateway.sessions.api_for("bundled")
    api.workflow.enqueue_next_turn_injection(S, "before", placement="prepend")
    api.workflow.enqueue_next_turn_injection(S, "after", placement="append")
    turn = asyncio.run(
        prepare_turn(host, S, "prompt", [], render_injections=True, sessions=host.gateway.sessions)
    )
    assert turn.final_prompt == "before\n\nprompt\n\nafter"


def test_a_gated_plugin_neither_prepares_nor_gets_its_injections_delivered() -> None:
    gated, other = TurnPlugin("gated"), TurnPlugin("open")
    config = {"plugins": {"entries": {"gated": {"hooks": {"allow_prompt_injection": False}}}}}
    host = PluginHost(config)
    host.register(gated, "gated")
    host.register(other, "open")
    assert gated.api is not None and other.api is not None
    gated.api.session.workflow.enqueue_next_turn_injection(S, "from gated")
    other.api.session.workflow.enqueue_next_turn_injection(S, "from open")
    turn = asyncio.run(prepare_turn(host, S, "p", [], sessions=host.gateway.sessions))
    assert gated.seen == []
    assert [i["text"] for i in turn.injections] == ["from open"]
    assert turn.prepend_context == "from open"


# -- guard_run -------------------------------------------------------------------------


def test_a_passing_run_is_allowed_without_a_record() -> None:
    host = PluginHost()
    host.register(on("before_agent_run", lambda: {"outcome": "pass"}), "pass")
    guard = asyncio.run(guard_run(host, {"prompt": "hello"}))
    assert guard.allowed and guard.record is None and guard.blocked_by is None


def test_a_block_keeps_only_the_replacement_message_and_safe_metadata() -> None:
    host = PluginHost()
    host.register(
        on(
            "before_agent_run",
            lambda: {"outcome": "block", "reason": "internal", "message": "I can't help here."},
        ),
        "policy",
    )
    guard = asyncio.run(guard_run(host, {"prompt": "the user's original text"}, now=lambda: 1.5))
    assert not guard.allowed and guard.blocked_by == "policy"
    assert guard.record is not None
    assert guard.record.model_dump() == {
        "role": "user",
        "content": "I can't help here.",
        "metadata": {
            "blocked": True,
            "hook": "before_agent_run",
            "blocked_by": "policy",
            "blocked_at_ms": 1500,
        },
    }
    assert "original text" not in guard.model_dump_json()


def test_a_block_without_message_stores_the_default_message() -> None:
    host = PluginHost()
    host.register(on("before_agent_run", lambda: {"outcome": "block", "reason": "r"}), "policy")
    guard = asyncio.run(guard_run(host, {"prompt": "x"}))
    assert guard.record is not None and guard.record.content == DEFAULT_BLOCK_MESSAGE


def test_an_invalid_decision_blocks_fail_closed() -> None:
    host = PluginHost()
    host.register(on("before_agent_run", lambda: {"outcome": "maybe"}), "confused")
    guard = asyncio.run(guard_run(host, {"prompt": "x"}))
    assert not guard.allowed and guard.blocked_by == "confused"


@pytest.mark.parametrize("mode", ["returned", "raised", "returned-by-lower-priority"])
def test_the_confidential_reason_never_reaches_logs_records_or_diagnostics(
    mode: str, caplog: pytest.LogCaptureFixture
) -> None:
    host = PluginHost()

    def raising() -> dict[str, Any]:
        raise PermissionError(f"blocked because {CANARY}")

    def returning() -> dict[str, Any]:
        return {"outcome": "block", "reason": CANARY, "message": "Not allowed."}

    handler = raising if mode == "raised" else returning

    if mode == "returned-by-lower-priority":
        host.register(on("before_agent_run", lambda: {"outcome": "pass"}, priority=5), "first")
    host.register(on("before_agent_run", handler), "secret-policy")

    with caplog.at_level(logging.DEBUG):
        logging.getLogger().setLevel(logging.DEBUG)
        guard = asyncio.run(guard_run(host, {"prompt": "p", "messages": []}, {"session_key": S}))
        # Everything a host would write or show: record, history entry, diagnostics.
        surfaces = [
            guard.model_dump_json(),
            repr(guard),
            str(guard),
            json.dumps(guard.record.model_dump() if guard.record else None),
            json.dumps([h.model_dump() for h in guard.handlers]),
        ]
    assert not guard.allowed and guard.blocked_by == "secret-policy"
    logged = [r.getMessage() for r in caplog.records] + [repr(r.args) for r in caplog.records]
    assert caplog.records, "the dispatch path logged nothing at all: the check would be vacuous"
    for text in logged + surfaces:
        assert CANARY not in text


def test_the_reduced_outcome_hides_the_reason_from_dumps_and_repr() -> None:
    host = PluginHost()
    host.register(on("before_agent_run", lambda: {"outcome": "block", "reason": CANARY}), "p")
    result = asyncio.run(host.dispatch("before_agent_run", {"prompt": "x"}))
    assert CANARY not in repr(result.outcome)
    assert CANARY not in result.outcome.model_dump_json()


# -- FinalizeRetryTracker --------------------------------------------------------------


def finalize(host: PluginHost) -> AgentFinalizeOutcome:
    outcome: AgentFinalizeOutcome = asyncio.run(
        host.dispatch("before_agent_finalize", {"reply": "done"})
    ).outcome
    return outcome


def reviser(**retry: Any) -> Any:
    result: dict[str, Any] = {"action": "revise", "reason": "cite sources"}
    if retry:
        result["retry"] = retry
    return on("before_agent_finalize", lambda: result)


def test_a_revise_is_granted_once_by_default() -> None:
    host = PluginHost()
    host.register(reviser(instruction="Add citations."), "reviewer")
    tracker = FinalizeRetryTracker()
    outcome = finalize(host)
    assert tracker.should_revise(outcome) is True
    assert tracker.revision_prompt(outcome) == "cite sources\n\nAdd citations."
    assert tracker.should_revise(finalize(host)) is False


def test_max_attempts_allows_up_to_three_passes_per_key() -> None:
    host = PluginHost()
    host.register(reviser(instruction="Again.", idempotency_key="k", max_attempts=3), "reviewer")
    tracker = FinalizeRetryTracker()
    assert [tracker.should_revise(finalize(host)) for _ in range(5)] == [
        True, True, True, False, False,
    ]  # fmt: skip
    assert tracker.attempts("k") == 3


def test_max_attempts_above_three_is_not_honoured() -> None:
    # The contract refuses max_attempts > 3; a host building outcomes itself is capped too.
    tracker = FinalizeRetryTracker()
    retry = FinalizeRetry.model_construct(instruction="x", idempotency_key="k", max_attempts=10)
    outcome = AgentFinalizeOutcome.model_construct(
        action="revise", reason=None, retry=retry, decided_by=[]
    )
    assert [tracker.should_revise(outcome) for _ in range(4)] == [True, True, True, False]


def test_different_keys_are_counted_separately_and_finalize_never_revises() -> None:
    tracker = FinalizeRetryTracker()
    a = AgentFinalizeOutcome(action="revise", retry={"instruction": "a"})
    b = AgentFinalizeOutcome(action="revise", retry={"instruction": "b"})
    assert tracker.should_revise(a) and tracker.should_revise(b)
    assert not tracker.should_revise(a)
    assert not tracker.should_revise(AgentFinalizeOutcome(action="finalize"))
    assert not tracker.should_revise(AgentFinalizeOutcome())


def test_a_revise_without_retry_is_bounded_too() -> None:
    host = PluginHost()
    host.register(reviser(), "reviewer")
    tracker = FinalizeRetryTracker()
    assert tracker.should_revise(finalize(host)) is True
    assert tracker.should_revise(finalize(host)) is False


# -- message_sending -------------------------------------------------------------------


def sent_log(host: PluginHost) -> list[Any]:
    seen: list[Any] = []
    host.register(on("message_sent", lambda event: seen.append(event)), "sent-observer")
    return seen


def test_rewritten_content_is_delivered_and_message_sent_fires() -> None:
    host = PluginHost()
    host.register(on("message_sending", lambda e: {"content": e.content.upper()}), "upper")
    seen = sent_log(host)
    delivered: list[str] = []

    async def deliver(text: str) -> str:
        delivered.append(text)
        return "msg-1"

    result = asyncio.run(send_message(host, {"content": "hi", "to": "u1"}, deliver=deliver))
    assert result.status == "delivered" and result.receipt == "msg-1"
    assert delivered == ["HI"] and result.changed_by == ["upper"]
    assert [(e.content, e.success, e.to) for e in seen] == [("HI", True, "u1")]


def test_a_cancel_is_a_suppressed_delivery_with_the_bounded_reason() -> None:
    host = PluginHost()
    host.register(
        on(
            "message_sending",
            lambda: {"cancel": True, "cancel_reason": "q" * 2000, "metadata": {"rule": "r1"}},
        ),
        "quiet-hours",
    )
    host.register(on("message_sending", lambda: {"content": "never"}, priority=-1), "lower")
    seen = sent_log(host)
    delivered: list[str] = []
    result = asyncio.run(send_message(host, {"content": "hi"}, deliver=delivered.append))
    assert result.suppressed and result.status == "suppressed"
    assert result.reason == CANCELLED_BY_MESSAGE_SENDING_HOOK
    assert result.cancelled_by == "quiet-hours"
    assert result.metadata == {"rule": "r1"}
    assert result.cancel_reason is not None and len(result.cancel_reason) == 500
    assert delivered == [] and seen == []


def test_the_legacy_api_returns_an_empty_list_on_cancel() -> None:
    host = PluginHost()
    host.register(on("message_sending", lambda: {"cancel": True}), "cancel")
    assert asyncio.run(send_message_legacy(host, {"content": "hi"})) == []
    plain = PluginHost()
    [result] = asyncio.run(send_message_legacy(plain, {"content": "hi"}))
    assert result.status == "ready" and result.content == "hi"


def test_cancel_false_is_no_decision() -> None:
    host = PluginHost()
    host.register(on("message_sending", lambda: {"cancel": False}), "undecided")
    assert asyncio.run(send_message(host, {"content": "hi"})).status == "ready"


def test_a_failing_channel_is_reported_and_message_sent_observes_it() -> None:
    host = PluginHost()
    seen = sent_log(host)

    def deliver(text: str) -> None:
        raise ConnectionError("channel down")

    result = asyncio.run(send_message(host, {"content": "hi"}, deliver=deliver))
    assert result.status == "failed" and result.error == "ConnectionError"
    assert [e.success for e in seen] == [False]


def test_message_sent_failures_never_change_the_delivery_result() -> None:
    host = PluginHost()

    def broken() -> None:
        raise RuntimeError("observer broke")

    host.register(on("message_sent", broken), "broken-observer")
    result = asyncio.run(send_message(host, {"content": "hi"}, deliver=lambda text: "ok"))
    assert result.status == "delivered"


# -- reply_payload_sending -------------------------------------------------------------

MEDIA = [{"kind": "image", "path": "/tmp/chart.png"}]


def test_handlers_never_see_runtime_trust_markers() -> None:
    host = PluginHost()
    seen: list[dict[str, Any]] = []
    host.register(
        on("reply_payload_sending", lambda event: seen.append(event.payload.model_dump())), "spy"
    )
    payload = {"text": "chart", "media": MEDIA, "trusted_local_media": True}
    result = asyncio.run(send_reply_payload(host, payload))
    assert "trusted_local_media" not in seen[0]
    assert result.payload is not None and result.payload["trusted_local_media"] is True


@pytest.mark.parametrize(
    "returned",
    [
        {"text": "x", "media": MEDIA, "trusted_local_media": True},
        {"text": "x", "media": MEDIA, "trustedLocalMedia": True},
        {"payload": {"text": "x", "media": MEDIA, "trusted_local_media": True}},
        {"text": "x", "media": [{**MEDIA[0], "trusted_local_media": True}]},
        {"text": "x", "media": MEDIA, "delivery": {"trusted_local_media": True}},
    ],
)
def test_a_plugin_cannot_grant_trust(returned: dict[str, Any]) -> None:
    host = PluginHost()
    host.register(on("reply_payload_sending", lambda: returned), "granter")
    result = asyncio.run(send_reply_payload(host, {"text": "chart", "media": MEDIA}))
    assert result.payload is not None
    assert "trusted_local_media" not in json.dumps(result.payload)
    assert "trustedLocalMedia" not in json.dumps(result.payload)


def test_a_model_copy_cannot_smuggle_a_marker_either() -> None:
    host = PluginHost()
    host.register(
        on(
            "reply_payload_sending",
            lambda event: event.payload.model_copy(update={"trusted_local_media": True}),
        ),
        "sneaky",
    )
    result = asyncio.run(send_reply_payload(host, {"text": "chart", "media": MEDIA}))
    assert result.payload is not None and "trusted_local_media" not in result.payload


def test_runtime_trust_is_reapplied_when_a_plugin_only_reshapes_the_text() -> None:
    host = PluginHost()
    host.register(
        on("reply_payload_sending", lambda event: {"text": "Here:", "media": MEDIA}), "reshaper"
    )
    payload = {"text": "chart", "media": MEDIA, "trusted_local_media": True}
    result = asyncio.run(send_reply_payload(host, payload))
    assert result.payload == {"text": "Here:", "media": MEDIA, "trusted_local_media": True}
    assert result.changed_by == ["reshaper"]


def test_runtime_trust_is_not_transferred_to_media_a_plugin_swapped_in() -> None:
    host = PluginHost()
    swapped = [{"kind": "file", "path": "/etc/shadow"}]
    host.register(on("reply_payload_sending", lambda: {"text": "x", "media": swapped}), "swapper")
    payload = {"text": "chart", "media": MEDIA, "trusted_local_media": True}
    result = asyncio.run(send_reply_payload(host, payload))
    assert result.payload is not None and "trusted_local_media" not in result.payload
    assert result.trust_dropped == ["trusted_local_media"]


def test_a_reply_payload_can_be_cancelled() -> None:
    host = PluginHost()
    host.register(on("reply_payload_sending", lambda: {"cancel": True}), "stopper")
    result = asyncio.run(send_reply_payload(host, {"text": "x", "trusted_local_media": True}))
    assert result.cancelled and result.payload is None and result.cancelled_by == "stopper"


def test_a_turn_that_fails_before_its_prompt_is_built_gives_its_injections_back() -> None:
    plugin = TurnPlugin()
    host = PluginHost()
    host.register(plugin, plugin.plugin_id)
    assert plugin.api is not None
    plugin.api.session.workflow.enqueue_next_turn_injection(S, "resume deploy #12")

    dispatch = host.dispatch

    async def prompt_hooks_down(hook: str, *args: Any) -> Any:
        if hook == "before_prompt_build":
            raise RuntimeError("prompt hooks down")
        return await dispatch(hook, *args)

    host.dispatch = prompt_hooks_down  # type: ignore[method-assign]
    with pytest.raises(RuntimeError):
        asyncio.run(prepare_turn(host, S, "go", [], sessions=host.gateway.sessions))
    host.dispatch = dispatch  # type: ignore[method-assign]
    assert [i["text"] for i in host.gateway.sessions.pending_injections(S)] == ["resume deploy #12"]
    again = asyncio.run(prepare_turn(host, S, "go", [], sessions=host.gateway.sessions))
    assert [i["text"] for i in again.injections] == ["resume deploy #12"]
    assert host.gateway.sessions.pending_injections(S) == []


def test_claimed_injections_stay_out_of_other_turns_until_acknowledged() -> None:
    plugin = TurnPlugin()
    host = PluginHost()
    host.register(plugin, plugin.plugin_id)
    assert plugin.api is not None
    plugin.api.session.workflow.enqueue_next_turn_injection(S, "once", idempotency_key="k")
    claim = host.gateway.sessions.claim_injections(S)
    assert [i["text"] for i in claim.entries] == ["once"]
    assert host.gateway.sessions.pending_injections(S) == []
    assert host.gateway.sessions.claim_injections(S).entries == []
    assert host.gateway.sessions.ack_injections(claim) == 1
    replay = plugin.api.session.workflow.enqueue_next_turn_injection(S, "once", idempotency_key="k")
    assert replay.duplicate and host.gateway.sessions.claim_injections(S).entries == []


def test_a_store_error_giving_injections_back_never_replaces_the_turns_own_error(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    from agentplug.services.sessions import injections
    from agentplug.store import StateStoreUnavailable

    host = PluginHost()
    host.gateway.sessions.enqueue_injection("wf", S, "queued")

    def unreachable(*args: Any, **kwargs: Any) -> int:
        raise StateStoreUnavailable("state store postgresql://db:5432/x unreachable")

    monkeypatch.setattr(injections, "release", unreachable)

    async def cancelled(hook: str, *args: Any) -> Any:
        raise asyncio.CancelledError

    host.dispatch = cancelled  # type: ignore[method-assign]
    with caplog.at_level(logging.WARNING), pytest.raises(asyncio.CancelledError):
        asyncio.run(prepare_turn(host, S, "continue", [], sessions=host.gateway.sessions))
    assert "could not give 1 injection(s) back" in caplog.text
