"""HOOKS.md §3: how each hook kind reduces its handlers' results, one test per rule."""

from __future__ import annotations

import asyncio
import hashlib
import logging
import warnings
from typing import Any

import pytest
from agentplug import HandlerStatus, hookimpl
from agentplug_hookspecs import thaw
from agentplug_hookspecs.messages import MAX_CANCEL_REASON_CHARS, ReplyPayload

from .conftest import (
    SHORT_MS,
    ApiPlugin,
    dispatch,
    make_host,
    module_plugin,
    on,
    run,
    status_of,
    statuses,
)

TOOL_EVENT = {"tool_name": "exec", "params": {"command": "ls"}}


def _approval(title: str = "Run it?", **extra: Any) -> dict[str, Any]:
    return {"require_approval": {"title": title, "description": "needs a human", **extra}}


def _raise(*args: Any) -> None:
    raise RuntimeError("handler failure")


def _drained(host: Any, hook: str, event: Any) -> Any:
    """Dispatch, then wait for abandoned handlers so nothing outlives the loop."""

    async def main() -> Any:
        result = await host.dispatch(hook, event)
        await host.aclose(5)
        return result

    return run(main())


async def _hang(event: Any) -> None:
    await asyncio.sleep(0.25)


# -- before_tool_call ----------------------------------------------------------------


def test_tool_call_params_rewrite_is_seen_by_the_next_handler() -> None:
    host = make_host()
    seen: list[dict[str, Any]] = []

    class Rewriter:
        @hookimpl(priority=10)
        def before_tool_call(self, event: Any) -> dict[str, Any]:
            return {"params": {**event.params, "timeout": 5}}

    def second(event: Any) -> dict[str, Any]:
        seen.append(dict(event.params))
        return {"params": {**event.params, "cwd": "/tmp"}}

    host.register(Rewriter(), "rewriter")
    host.register(on("before_tool_call", second, priority=5), "second")
    host.register(on("before_tool_call", lambda event: seen.append(dict(event.params))), "third")

    result = dispatch(host, "before_tool_call", TOOL_EVENT)

    assert seen == [
        {"command": "ls", "timeout": 5},
        {"command": "ls", "timeout": 5, "cwd": "/tmp"},
    ]
    assert result.outcome.params == {"command": "ls", "timeout": 5, "cwd": "/tmp"}
    assert result.outcome.blocked is False
    assert result.outcome.approval is None


def test_tool_call_outcome_is_what_the_next_handler_saw() -> None:
    # A plugin keeping a reference to the params it returned cannot change them later:
    # the outcome is built from the same frozen snapshot later handlers inspected.
    host = make_host()
    kept: dict[str, Any] = {}
    seen: list[Any] = []

    def rewriter(event: Any) -> dict[str, Any]:
        kept["params"] = {"argv": ["ls"], "env": {"A": "1"}}
        return {"params": kept["params"], **_approval()}

    def inspector(event: Any) -> None:
        seen.append(thaw(event.params))
        kept["params"]["argv"].append("--evil")  # e.g. the rewriter's background task
        kept["params"]["env"]["A"] = "2"

    host.register(on("before_tool_call", rewriter, priority=1), "rewriter")
    host.register(on("before_tool_call", inspector), "inspector")

    result = dispatch(host, "before_tool_call", TOOL_EVENT)

    assert seen == [{"argv": ["ls"], "env": {"A": "1"}}]
    assert result.outcome.params == {"argv": ["ls"], "env": {"A": "1"}}


def test_tool_call_block_is_terminal_and_skips_lower_handlers() -> None:
    host = make_host()
    ran: list[str] = []
    host.register(on("before_tool_call", lambda: {"params": {"command": "pwd"}}, priority=9), "a")
    host.register(
        on("before_tool_call", lambda: {"block": True, "block_reason": "no shell"}, priority=5),
        "guard",
    )
    host.register(on("before_tool_call", lambda: ran.append("lower")), "lower")

    result = dispatch(host, "before_tool_call", TOOL_EVENT)

    assert ran == []
    assert statuses(result) == [
        ("a", HandlerStatus.OK),
        ("guard", HandlerStatus.OK),
        ("lower", HandlerStatus.SKIPPED),
    ]
    assert result.outcome.blocked is True
    assert result.outcome.block_reason == "no shell"
    assert result.outcome.blocked_by == "guard"


def test_tool_call_first_approval_wins_and_plugin_id_is_stamped_by_the_runtime() -> None:
    host = make_host()
    ran: list[str] = []

    def on_resolution(decision: str) -> None:
        pass

    host.register(
        on(
            "before_tool_call",
            lambda: _approval(
                "first", plugin_id="someone-else", severity="critical", on_resolution=on_resolution
            ),
            priority=10,
        ),
        "asker",
    )

    def second(event: Any) -> dict[str, Any]:
        ran.append("second")
        return _approval("second")

    host.register(on("before_tool_call", second), "late-asker")

    result = dispatch(host, "before_tool_call", TOOL_EVENT)

    approval = result.outcome.approval
    assert ran == ["second"]  # an approval request is not terminal
    assert approval is not None
    assert approval.title == "first"
    assert approval.plugin_id == "asker"
    assert approval.severity == "critical"
    assert approval.on_resolution is on_resolution
    assert approval.allowed_decisions == ["allow-once", "allow-always", "deny"]
    assert result.outcome.blocked is False
    assert result.outcome.needs_approval is True


def test_tool_call_params_frozen_after_approval_request() -> None:
    host = make_host()
    seen: list[dict[str, Any]] = []
    host.register(
        on(
            "before_tool_call", lambda: {"params": {"command": "ls -l"}, **_approval()}, priority=10
        ),
        "asker",
    )

    def late(event: Any) -> dict[str, Any]:
        seen.append(dict(event.params))
        return {"params": {"command": "rm -rf /"}}

    host.register(on("before_tool_call", late), "late")

    result = dispatch(host, "before_tool_call", TOOL_EVENT)

    assert seen == [{"command": "ls -l"}]
    assert result.outcome.params == {"command": "ls -l"}
    assert status_of(result, "late") is HandlerStatus.OK


def test_tool_call_lower_block_still_blocks_after_an_approval_request() -> None:
    host = make_host()
    host.register(on("before_tool_call", lambda: _approval(), priority=10), "asker")
    host.register(
        on("before_tool_call", lambda: {"block": True, "block_reason": "policy"}), "blocker"
    )

    result = dispatch(host, "before_tool_call", TOOL_EVENT)

    assert result.outcome.blocked is True
    assert result.outcome.blocked_by == "blocker"
    assert result.outcome.needs_approval is False


@pytest.mark.parametrize("mode", ["raise", "timeout", "wrong_shape", "bad_approval"])
def test_tool_call_failing_handler_blocks(mode: str) -> None:
    host = make_host()
    handler = {
        "raise": _raise,
        "timeout": _hang,
        "wrong_shape": lambda: {"allow": True},
        # An approval timeout above 600 000 ms is not a valid request.
        "bad_approval": lambda: _approval(timeout_ms=600_001),
    }[mode]
    host.register(on("before_tool_call", lambda: _approval(), priority=10), "asker")
    host.register(on("before_tool_call", handler, priority=5, timeout_ms=SHORT_MS), "broken")
    host.register(on("before_tool_call", lambda: None), "lower")

    result = _drained(host, "before_tool_call", TOOL_EVENT)

    assert result.outcome.blocked is True
    assert result.outcome.blocked_by == "broken"
    assert "broken" in (result.outcome.block_reason or "")
    assert "handler failure" not in (result.outcome.block_reason or "")
    assert result.outcome.needs_approval is False
    assert status_of(result, "lower") is HandlerStatus.SKIPPED


# -- message_sending -----------------------------------------------------------------


def test_message_sending_rewrites_flow_to_lower_handlers() -> None:
    host = make_host()
    seen: list[str] = []

    def upper(event: Any) -> dict[str, str]:
        seen.append(event.content)
        return {"content": event.content.upper()}

    def exclaim(event: Any) -> dict[str, str]:
        seen.append(event.content)
        return {"content": event.content + "!"}

    host.register(on("message_sending", upper, priority=2), "upper")
    host.register(on("message_sending", exclaim, priority=1), "exclaim")
    host.register(on("message_sending", lambda event: seen.append(event.content)), "reader")

    result = dispatch(host, "message_sending", {"content": "hi"})

    assert seen == ["hi", "HI", "HI!"]
    assert result.outcome.content == "HI!"
    assert result.outcome.changed_by == ["upper", "exclaim"]
    assert result.outcome.cancelled is False


def test_message_sending_cancel_is_terminal() -> None:
    host = make_host()
    ran: list[str] = []
    host.register(on("message_sending", lambda: {"content": "edited"}, priority=3), "editor")
    host.register(
        on(
            "message_sending",
            lambda: {"cancel": True, "cancel_reason": "spam", "metadata": {"rule": "r1"}},
            priority=2,
        ),
        "filter",
    )
    host.register(on("message_sending", lambda: ran.append("lower")), "lower")

    result = dispatch(host, "message_sending", {"content": "orig"})

    assert ran == []
    assert status_of(result, "lower") is HandlerStatus.SKIPPED
    assert result.outcome.cancelled is True
    assert result.outcome.cancelled_by == "filter"
    assert result.outcome.cancel_reason == "spam"
    assert result.outcome.metadata == {"rule": "r1"}


def test_message_sending_cancel_false_is_no_decision() -> None:
    host = make_host()
    host.register(
        on("message_sending", lambda: {"cancel": False, "content": "kept going"}, priority=1), "a"
    )
    host.register(on("message_sending", lambda event: {"content": event.content + "."}), "b")

    result = dispatch(host, "message_sending", {"content": "orig"})

    assert result.outcome.cancelled is False
    assert result.outcome.cancelled_by is None
    assert result.outcome.content == "kept going."


@pytest.mark.parametrize("mode", ["raise", "timeout", "wrong_shape"])
def test_message_sending_failing_handler_is_skipped_and_latest_content_kept(mode: str) -> None:
    host = make_host()
    handler = {"raise": _raise, "timeout": _hang, "wrong_shape": lambda: {"cancel": "yes"}}[mode]
    host.register(on("message_sending", lambda: {"content": "first edit"}, priority=3), "a")
    host.register(on("message_sending", handler, priority=2, timeout_ms=SHORT_MS), "broken")

    result = _drained(host, "message_sending", {"content": "orig"})

    assert status_of(result, "broken") in {HandlerStatus.ERROR, HandlerStatus.TIMEOUT}
    assert result.outcome.content == "first edit"
    assert result.outcome.cancelled is False


def test_message_sending_cancel_reason_is_bounded() -> None:
    host = make_host()
    host.register(
        on("message_sending", lambda: {"cancel": True, "cancelReason": "x" * 10_000}), "long"
    )

    result = dispatch(host, "message_sending", {"content": "orig"})

    assert result.outcome.cancelled is True
    assert result.outcome.cancel_reason is not None
    assert 0 < len(result.outcome.cancel_reason) <= MAX_CANCEL_REASON_CHARS


# -- reply_payload_sending -----------------------------------------------------------


def test_reply_payload_each_handler_sees_the_latest_payload() -> None:
    host = make_host()
    seen: list[str | None] = []

    def shout(event: Any) -> dict[str, Any]:  # a bare payload
        seen.append(event.payload.text)
        return {"text": (event.payload.text or "").upper(), "media": list(event.payload.media)}

    def sign(event: Any) -> dict[str, Any]:  # the explicit form
        seen.append(event.payload.text)
        return {"payload": {"text": f"{event.payload.text} -- bot"}}

    host.register(on("reply_payload_sending", shout, priority=2), "shout")
    host.register(on("reply_payload_sending", sign, priority=1), "sign")
    host.register(on("reply_payload_sending", lambda event: seen.append(event.payload.text)), "r")

    result = dispatch(host, "reply_payload_sending", {"payload": {"text": "hi", "media": ["m1"]}})

    assert seen == ["hi", "HI", "HI -- bot"]
    assert result.outcome.payload.text == "HI -- bot"
    assert result.outcome.changed_by == ["shout", "sign"]
    assert result.outcome.cancelled is False


MARKERS = ("trusted_local_media", "trustedLocalMedia")


def _markers_in(payload: Any) -> set[str]:
    data = payload.model_dump() if isinstance(payload, ReplyPayload) else dict(payload)
    return {m for m in MARKERS if m in data}


def test_reply_payload_trust_markers_are_stripped_from_what_handlers_see() -> None:
    host = make_host()
    seen: list[set[str]] = []
    host.register(
        on("reply_payload_sending", lambda event: seen.append(_markers_in(event.payload))), "r"
    )

    result = dispatch(
        host,
        "reply_payload_sending",
        {"payload": {"text": "hi", "trusted_local_media": True, "trustedLocalMedia": True}},
    )

    assert seen == [set()]
    assert _markers_in(result.outcome.payload) == set()


@pytest.mark.parametrize(
    "grant",
    [
        lambda event: {"text": "x", "trusted_local_media": True},
        lambda event: {"payload": {"text": "x", "trustedLocalMedia": True}},
        lambda event: event.payload.model_copy(update={"trusted_local_media": True}),
        lambda event: {"payload": event.payload.model_copy(update={"trustedLocalMedia": True})},
        lambda event: ReplyPayload.model_construct(text="x", trusted_local_media=True),
    ],
    ids=["bare", "explicit-camel", "model-copy", "explicit-model-copy", "model-construct"],
)
def test_reply_payload_trust_markers_are_stripped_from_what_handlers_return(grant: Any) -> None:
    host = make_host()
    seen: list[set[str]] = []
    host.register(on("reply_payload_sending", grant, priority=1), "granter")
    host.register(
        on("reply_payload_sending", lambda event: seen.append(_markers_in(event.payload))), "r"
    )

    result = dispatch(host, "reply_payload_sending", {"payload": {"text": "hi"}})

    assert status_of(result, "granter") is HandlerStatus.OK
    assert result.outcome.changed_by == ["granter"]
    assert seen == [set()]
    assert _markers_in(result.outcome.payload) == set()


def test_reply_payload_cancel_is_terminal() -> None:
    host = make_host()
    ran: list[str] = []
    host.register(on("reply_payload_sending", lambda: {"text": "edited"}, priority=3), "editor")
    host.register(
        on("reply_payload_sending", lambda: {"cancel": True, "cancel_reason": "dup"}, priority=2),
        "dedupe",
    )
    host.register(on("reply_payload_sending", lambda: ran.append("lower")), "lower")

    result = dispatch(host, "reply_payload_sending", {"payload": {"text": "hi"}})

    assert ran == []
    assert result.outcome.cancelled is True
    assert result.outcome.cancelled_by == "dedupe"
    assert result.outcome.cancel_reason == "dup"


def test_reply_payload_failing_handler_is_skipped_with_the_latest_payload() -> None:
    host = make_host()
    host.register(on("reply_payload_sending", lambda: {"text": "edited"}, priority=3), "editor")
    host.register(on("reply_payload_sending", _raise, priority=2), "broken")
    host.register(on("reply_payload_sending", lambda: {"cancel": 3}, priority=1), "wrong")

    result = dispatch(host, "reply_payload_sending", {"payload": {"text": "hi"}})

    assert statuses(result)[1:] == [("broken", HandlerStatus.ERROR), ("wrong", HandlerStatus.ERROR)]
    assert result.outcome.payload.text == "edited"
    assert result.outcome.cancelled is False


# -- before_agent_run ----------------------------------------------------------------


def test_agent_run_first_block_wins() -> None:
    host = make_host()
    ran: list[str] = []
    host.register(on("before_agent_run", lambda: {"outcome": "pass"}, priority=9), "passer")
    host.register(
        on(
            "before_agent_run",
            lambda: {"outcome": "block", "reason": "first", "message": "Blocked."},
            priority=5,
        ),
        "first",
    )
    host.register(
        on("before_agent_run", lambda: ran.append("second") or {"outcome": "block"}), "second"
    )

    result = dispatch(host, "before_agent_run", {"prompt": "hi"})

    assert ran == []
    assert status_of(result, "second") is HandlerStatus.SKIPPED
    assert result.outcome.outcome == "block"
    assert result.outcome.blocked_by == "first"
    assert result.outcome.reason == "first"
    assert result.outcome.message == "Blocked."


@pytest.mark.parametrize(
    "returned",
    [
        {"outcome": "allow"},
        {"outcome": "BLOCK"},
        {"outcome": "pass", "extra": 1},
        {},
        {"block": True},
        "pass",
        True,
        ["pass"],
    ],
)
def test_agent_run_invalid_shape_blocks(returned: Any) -> None:
    host = make_host()
    ran: list[str] = []
    host.register(on("before_agent_run", lambda: returned, priority=1), "odd")
    host.register(on("before_agent_run", lambda: ran.append("lower")), "lower")

    result = dispatch(host, "before_agent_run", {"prompt": "hi"})

    assert ran == []
    assert status_of(result, "odd") is HandlerStatus.ERROR
    assert result.outcome.outcome == "block"
    assert result.outcome.blocked_by == "odd"


def test_agent_run_none_is_pass() -> None:
    host = make_host()
    ran: list[str] = []
    host.register(on("before_agent_run", lambda: None, priority=2), "silent")
    host.register(on("before_agent_run", lambda: {"outcome": "pass"}, priority=1), "explicit")
    host.register(on("before_agent_run", lambda: ran.append("lower")), "lower")

    result = dispatch(host, "before_agent_run", {"prompt": "hi"})

    assert ran == ["lower"]
    assert result.outcome.outcome == "pass"
    assert result.outcome.blocked_by is None
    assert all(r.status is HandlerStatus.OK for r in result.handlers)


@pytest.mark.parametrize("mode", ["raise", "timeout"])
def test_agent_run_exception_or_timeout_blocks(mode: str) -> None:
    host = make_host()
    handler = _raise if mode == "raise" else _hang
    host.register(on("before_agent_run", handler, timeout_ms=SHORT_MS), "broken")

    result = _drained(host, "before_agent_run", {"prompt": "hi"})

    assert result.outcome.outcome == "block"
    assert result.outcome.blocked_by == "broken"


def test_agent_run_reason_never_appears_in_logs(
    agentplug_logs: pytest.LogCaptureFixture,
) -> None:
    canary = "CONFIDENTIAL-canary-7f3a"
    host = make_host()
    host.register(
        on(
            "before_agent_run",
            lambda: {"outcome": "block", "reason": canary, "message": "Not allowed."},
        ),
        "guard",
    )

    def leaky(event: Any) -> None:
        raise PermissionError(canary)

    other = make_host()
    other.register(on("before_agent_run", leaky), "leaky")
    third = make_host()
    third.register(on("before_agent_run", lambda: {"outcome": "deny", "reason": canary}), "odd")

    results = [dispatch(h, "before_agent_run", {"prompt": "hi"}) for h in (host, other, third)]

    assert results[0].outcome.reason == canary  # the host itself may read it ...
    assert all(r.outcome.outcome == "block" for r in results)
    assert agentplug_logs.records  # ... failures were logged, at DEBUG and above,
    for record in agentplug_logs.records:  # but never the reason
        assert canary not in record.getMessage()
        assert canary not in str(record.args)
    for result in results:
        assert canary not in repr(result.outcome)
        assert all(canary not in (r.error or "") for r in result.handlers)


# -- before_agent_finalize -----------------------------------------------------------


def test_agent_finalize_any_finalize_wins() -> None:
    host = make_host()
    host.register(
        on(
            "before_agent_finalize",
            lambda: {"action": "revise", "reason": "too short", "retry": {"instruction": "more"}},
            priority=9,
        ),
        "reviser",
    )
    host.register(
        on("before_agent_finalize", lambda: {"action": "finalize", "reason": "ok"}), "finalizer"
    )

    result = dispatch(host, "before_agent_finalize", {"reply": "done"})

    assert result.outcome.action == "finalize"
    assert result.outcome.decided_by == ["finalizer"]
    assert result.outcome.retry is None


def test_agent_finalize_revise_reasons_are_concatenated_in_priority_order() -> None:
    host = make_host()

    def revise(name: str) -> Any:
        return lambda: {"action": "revise", "reason": f"reason {name}"}

    for name, priority in (("a", 3), ("b", 2), ("c", 1)):
        host.register(on("before_agent_finalize", revise(name), priority=priority), name)
    host.register(on("before_agent_finalize", lambda: None), "quiet")

    result = dispatch(host, "before_agent_finalize", {"reply": "done"})

    reason = result.outcome.reason or ""
    assert result.outcome.action == "revise"
    assert result.outcome.decided_by == ["a", "b", "c"]
    assert reason.index("reason a") < reason.index("reason b") < reason.index("reason c")


def test_agent_finalize_first_valid_retry_kept_with_defaults() -> None:
    host = make_host()
    host.register(
        on("before_agent_finalize", lambda: {"action": "revise", "reason": "no retry"}, priority=4),
        "plain",
    )
    host.register(
        on(
            "before_agent_finalize",
            lambda: {"action": "revise", "retry": {"instruction": "x", "max_attempts": 0}},
            priority=3,
        ),
        "invalid",
    )
    host.register(
        on(
            "before_agent_finalize",
            lambda: {"action": "revise", "retry": {"instruction": "Cite your sources."}},
            priority=2,
        ),
        "valid",
    )
    host.register(
        on(
            "before_agent_finalize",
            lambda: {
                "action": "revise",
                "retry": {"instruction": "other", "idempotency_key": "k", "max_attempts": 3},
            },
        ),
        "later",
    )

    result = dispatch(host, "before_agent_finalize", {"reply": "done"})

    retry = result.outcome.retry
    assert retry is not None
    assert retry.instruction == "Cite your sources."
    assert retry.max_attempts == 1
    assert retry.idempotency_key
    assert len(result.outcome.decided_by) == 4

    # The default key is a hash of the instruction: stable for it, distinct from others.
    again = dispatch(host, "before_agent_finalize", {"reply": "other reply"}).outcome.retry
    assert again is not None and again.idempotency_key == retry.idempotency_key
    digest = hashlib.sha256(b"Cite your sources.").hexdigest()
    assert digest.startswith(retry.idempotency_key)


def test_agent_finalize_explicit_retry_key_and_attempts_are_kept() -> None:
    host = make_host()
    host.register(
        on(
            "before_agent_finalize",
            lambda: {
                "action": "revise",
                "retry": {"instruction": "i", "idempotencyKey": "mine", "maxAttempts": 3},
            },
        ),
        "p",
    )
    retry = dispatch(host, "before_agent_finalize", {"reply": "r"}).outcome.retry
    assert retry is not None
    assert (retry.idempotency_key, retry.max_attempts) == ("mine", 3)


def test_agent_finalize_timeout_continues_with_the_original_reply() -> None:
    host = make_host()

    async def slow(event: Any) -> dict[str, str]:
        await asyncio.sleep(0.25)
        return {"action": "revise", "reason": "late"}

    host.register(on("before_agent_finalize", slow, timeout_ms=SHORT_MS), "slow")

    result = _drained(host, "before_agent_finalize", {"reply": "done"})

    assert status_of(result, "slow") is HandlerStatus.TIMEOUT
    assert result.outcome.action == "continue"
    assert result.outcome.decided_by == []


def test_agent_finalize_nothing_returned_continues() -> None:
    host = make_host()
    host.register(on("before_agent_finalize", lambda: None), "p")
    assert dispatch(host, "before_agent_finalize", {"reply": "r"}).outcome.action == "continue"


# -- before_install ------------------------------------------------------------------


def test_install_findings_accumulate_with_plugin_ids() -> None:
    host = make_host()
    host.register(
        on(
            "before_install",
            lambda: {
                "findings": [
                    {"message": "uses eval", "severity": "critical", "plugin_id": "forged"}
                ]
            },
            priority=2,
        ),
        "scanner-a",
    )
    host.register(on("before_install", lambda: None, priority=1), "quiet")
    host.register(
        on("before_install", lambda: {"findings": [{"message": "m1"}, {"message": "m2"}]}),
        "scanner-b",
    )

    result = dispatch(host, "before_install", {"name": "pkg"})

    assert result.outcome.blocked is False
    assert [(f.plugin_id, f.message) for f in result.outcome.findings] == [
        ("scanner-a", "uses eval"),
        ("scanner-b", "m1"),
        ("scanner-b", "m2"),
    ]
    assert result.outcome.findings[0].severity == "critical"


def test_install_block_is_terminal() -> None:
    host = make_host()
    ran: list[str] = []
    host.register(on("before_install", lambda: {"findings": [{"message": "f1"}]}, priority=3), "a")
    host.register(
        on(
            "before_install",
            lambda: {"block": True, "block_reason": "malware", "findings": [{"message": "f2"}]},
            priority=2,
        ),
        "blocker",
    )
    host.register(on("before_install", lambda: ran.append("lower")), "lower")

    result = dispatch(host, "before_install", {"name": "pkg"})

    assert ran == []
    assert result.outcome.blocked is True
    assert result.outcome.block_reason == "malware"
    assert result.outcome.blocked_by == "blocker"
    assert [f.message for f in result.outcome.findings] == ["f1", "f2"]


@pytest.mark.parametrize("mode", ["raise", "timeout", "wrong_shape"])
def test_install_failing_handler_blocks(mode: str) -> None:
    host = make_host()
    handler = {"raise": _raise, "timeout": _hang, "wrong_shape": lambda: {"verdict": "ok"}}[mode]
    host.register(on("before_install", lambda: {"findings": [{"message": "f1"}]}, priority=2), "a")
    host.register(on("before_install", handler, priority=1, timeout_ms=SHORT_MS), "broken")
    host.register(on("before_install", lambda: None), "lower")

    result = _drained(host, "before_install", {"name": "pkg"})

    assert result.outcome.blocked is True
    assert result.outcome.blocked_by == "broken"
    assert [f.message for f in result.outcome.findings] == ["f1"]
    assert status_of(result, "lower") is HandlerStatus.SKIPPED


def test_install_event_carries_an_empty_ok_builtin_scan() -> None:
    host = make_host()
    seen: list[Any] = []
    host.register(on("before_install", lambda event: seen.append(event.builtin_scan)), "p")
    dispatch(host, "before_install", {"name": "pkg"})
    assert seen[0].status == "ok"
    assert list(seen[0].findings) == []


# -- resolve_exec_env ----------------------------------------------------------------


def test_exec_env_later_handler_overrides_earlier() -> None:
    host = make_host()
    host.register(on("resolve_exec_env", lambda: {"A": "1", "B": "1"}, priority=5), "high")
    host.register(on("resolve_exec_env", lambda: {"env": {"B": "2", "C": "2"}}), "low")

    result = dispatch(host, "resolve_exec_env", {"session_key": "s", "host": "sandbox"})

    assert result.outcome.env == {"A": "1", "B": "2", "C": "2"}
    assert result.outcome.contributors == {"A": "high", "B": "low", "C": "low"}
    assert result.outcome.dropped == []


DANGEROUS = [
    "PATH",
    "Path",
    "LD_PRELOAD",
    "LD_LIBRARY_PATH",
    "DYLD_INSERT_LIBRARIES",
    "BASH_FUNC_ls",
    "NODE_OPTIONS",
    "PYTHONPATH",
    "PYTHONSTARTUP",
    "HTTP_PROXY",
    "https_proxy",
    "ALL_PROXY",
    "no_proxy",
    "NODE_TLS_REJECT_UNAUTHORIZED",
    "SSL_CERT_FILE",
    "SSL_CERT_DIR",
    "REQUESTS_CA_BUNDLE",
    "NODE_EXTRA_CA_CERTS",
    "1STARTS_WITH_DIGIT",
    "HAS-DASH",
    "HAS SPACE",
    "",
]


def test_exec_env_dangerous_and_invalid_keys_are_dropped_and_reported_without_values() -> None:
    host = make_host()
    env = {key: f"VALUE-canary-{i}" for i, key in enumerate(DANGEROUS)}
    host.register(on("resolve_exec_env", lambda: {"SAFE_VAR": "fine", **env}), "contrib")

    result = dispatch(host, "resolve_exec_env", {})

    assert result.outcome.env == {"SAFE_VAR": "fine"}
    assert sorted(d.key for d in result.outcome.dropped) == sorted(DANGEROUS)
    for dropped in result.outcome.dropped:
        assert dropped.plugin_id == "contrib"
        assert dropped.reason
    dump = result.outcome.model_dump_json()
    assert "VALUE-canary" not in dump


def test_exec_env_non_string_value_is_a_failed_handler() -> None:
    host = make_host()
    host.register(on("resolve_exec_env", lambda: {"PORT": 8080}, priority=1), "typed")
    host.register(on("resolve_exec_env", lambda: {"OK": "1"}), "fine")

    result = dispatch(host, "resolve_exec_env", {})

    assert status_of(result, "typed") is HandlerStatus.ERROR
    assert result.outcome.env == {"OK": "1"}


# -- merge hooks ---------------------------------------------------------------------


def test_model_resolve_first_defined_value_of_each_field_wins() -> None:
    host = make_host()
    host.register(on("before_model_resolve", lambda: None, priority=9), "quiet")
    host.register(on("before_model_resolve", lambda: {"provider_override": "p1"}, priority=3), "a")
    host.register(
        on(
            "before_model_resolve",
            lambda: {"providerOverride": "p2", "modelOverride": "m2"},
            priority=2,
        ),
        "b",
    )
    host.register(on("before_model_resolve", lambda: {"model_override": "m3"}), "c")

    result = dispatch(host, "before_model_resolve", {"prompt": "hi"})

    assert result.outcome.provider_override == "p1"
    assert result.outcome.model_override == "m2"


def test_prompt_build_system_prompt_first_wins_and_contexts_concatenate() -> None:
    host = make_host()
    host.register(
        on(
            "before_prompt_build",
            lambda: {
                "system_prompt": "S1",
                "prepend_context": "P1",
                "append_context": "A1",
                "prepend_system_context": "PS1",
            },
            priority=3,
        ),
        "a",
    )
    host.register(
        on(
            "before_prompt_build",
            lambda: {
                "system_prompt": "S2",
                "prepend_context": "P2",
                "append_system_context": "AS2",
            },
            priority=2,
        ),
        "b",
    )
    host.register(
        on(
            "before_prompt_build", lambda: {"append_context": "A3", "prepend_system_context": "PS3"}
        ),
        "c",
    )

    outcome = dispatch(host, "before_prompt_build", {"prompt": "hi"}).outcome

    assert outcome.system_prompt == "S1"
    assert outcome.prepend_context == "P1\n\nP2"
    assert outcome.append_context == "A1\n\nA3"
    assert outcome.prepend_system_context == "PS1\n\nPS3"
    assert outcome.append_system_context == "AS2"


@pytest.mark.parametrize("hook", ["agent_turn_prepare", "heartbeat_prompt_contribution"])
def test_context_contributions_concatenate_in_priority_order_with_a_blank_line(
    hook: str,
) -> None:
    host = make_host()
    host.register(on(hook, lambda: {"prepend_context": "low", "append_context": "z"}), "low")
    host.register(on(hook, lambda: {"prepend_context": "high"}, priority=5), "high")
    host.register(on(hook, lambda: {"append_context": "y"}, priority=1), "mid")

    outcome = dispatch(host, hook, {"prompt": "hi"}).outcome

    assert outcome.prepend_context == "high\n\nlow"
    assert outcome.append_context == "y\n\nz"


def test_agent_turn_prepare_sees_drained_injections() -> None:
    host = make_host()
    seen: list[Any] = []
    host.register(on("agent_turn_prepare", lambda event: seen.append(list(event.injections))), "p")
    dispatch(host, "agent_turn_prepare", {"prompt": "hi", "injections": [{"text": "note"}]})
    assert seen == [[{"text": "note"}]]


def test_legacy_agent_start_reduces_like_model_resolve_and_prompt_build() -> None:
    host = make_host()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        host.register(
            on(
                "before_agent_start",
                lambda: {"model_override": "m1", "system_prompt": "S1", "prepend_context": "P1"},
                priority=2,
            ),
            "a",
        )
        host.register(
            on(
                "before_agent_start",
                lambda: {
                    "model_override": "m2",
                    "provider_override": "p2",
                    "system_prompt": "S2",
                    "prepend_context": "P2",
                },
            ),
            "b",
        )

    outcome = dispatch(host, "before_agent_start", {"prompt": "hi"}).outcome

    assert (outcome.model_override, outcome.provider_override) == ("m1", "p2")
    assert outcome.system_prompt == "S1"
    assert outcome.prepend_context == "P1\n\nP2"


def test_provide_actions_collects_every_plugin_result_with_its_id() -> None:
    host = make_host()
    host.register(on("provide_actions", lambda: ["a1", "a2"], priority=1), "a")
    host.register(on("provide_actions", lambda: {"actions": ["b1"]}), "b")
    host.register(on("provide_actions", lambda: None), "quiet")

    outcome = dispatch(host, "provide_actions", {}).outcome

    assert outcome.by_plugin == {"a": ["a1", "a2"], "b": ["b1"]}


# -- claim hooks ---------------------------------------------------------------------

CLAIMS = {
    "inbound_claim": {"content": "hi"},
    "before_agent_reply": {"prompt": "hi"},
    "before_dispatch": {"content": "hi"},
    "reply_dispatch": {"content": "hi"},
    "subagent_delivery_target": {"target_session_key": "child"},
    "subagent_spawning": {"child_session_key": "child"},
}


@pytest.mark.parametrize("hook", list(CLAIMS))
def test_claim_first_handled_wins_and_lower_handlers_do_not_run(hook: str) -> None:
    host = make_host()
    ran: list[str] = []

    def claim(name: str) -> Any:
        def handler(event: Any) -> dict[str, Any]:
            ran.append(name)
            return {"handled": True, "reply": f"from {name}"}

        return handler

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        host.register(on(hook, lambda: {"handled": False}, priority=9), "declines")
        host.register(on(hook, claim("winner"), priority=5), "winner")
        host.register(on(hook, claim("loser")), "loser")

    result = dispatch(host, hook, CLAIMS[hook])

    assert ran == ["winner"]
    assert statuses(result) == [
        ("declines", HandlerStatus.OK),
        ("winner", HandlerStatus.OK),
        ("loser", HandlerStatus.SKIPPED),
    ]
    assert result.outcome.handled is True
    assert result.outcome.plugin_id == "winner"
    assert result.outcome.reply == "from winner"


@pytest.mark.parametrize("hook", list(CLAIMS))
def test_claim_unhandled_when_nobody_claims(hook: str) -> None:
    host = make_host()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        host.register(on(hook, lambda: {"handled": False}), "a")
        host.register(on(hook, lambda: None), "b")

    result = dispatch(host, hook, CLAIMS[hook])

    assert result.outcome.handled is False
    assert result.outcome.plugin_id is None


def test_claim_winner_carries_its_extra_fields() -> None:
    host = make_host()
    host.register(
        on("subagent_delivery_target", lambda: {"handled": True, "target": {"channel": "c1"}}),
        "router",
    )
    outcome = dispatch(host, "subagent_delivery_target", CLAIMS["subagent_delivery_target"]).outcome
    assert outcome.target == {"channel": "c1"}
    assert outcome.plugin_id == "router"


def test_before_dispatch_unhandled_result_rewrites_content_for_lower_handlers() -> None:
    host = make_host()
    seen: list[str] = []

    def rewrite(event: Any) -> dict[str, Any]:
        seen.append(event.content)
        return {"content": event.content + " (edited)"}

    def claim(event: Any) -> dict[str, Any]:
        seen.append(event.content)
        return {"handled": True}

    host.register(on("before_dispatch", rewrite, priority=2), "editor")
    host.register(on("before_dispatch", claim, priority=1), "sender")

    result = dispatch(host, "before_dispatch", {"content": "hi"})

    assert seen == ["hi", "hi (edited)"]
    assert result.outcome.handled is True
    assert result.outcome.plugin_id == "sender"
    assert result.outcome.content == "hi (edited)"


def test_before_dispatch_rewrite_without_claim_is_the_outcome_content() -> None:
    host = make_host()
    host.register(on("before_dispatch", lambda: {"content": "rewritten"}), "editor")
    result = dispatch(host, "before_dispatch", {"content": "hi"})
    assert result.outcome.handled is False
    assert result.outcome.content == "rewritten"


def test_claim_failing_handler_is_skipped() -> None:
    host = make_host()
    host.register(on("inbound_claim", _raise, priority=1), "broken")
    host.register(on("inbound_claim", lambda: {"handled": True}), "claimer")
    result = dispatch(host, "inbound_claim", {"content": "hi"})
    assert statuses(result) == [("broken", HandlerStatus.ERROR), ("claimer", HandlerStatus.OK)]
    assert result.outcome.plugin_id == "claimer"


# -- sync hooks ----------------------------------------------------------------------


def test_tool_result_persist_each_handler_sees_the_latest_message() -> None:
    host = make_host()
    seen: list[Any] = []

    def redact(event: Any) -> dict[str, Any]:
        seen.append(dict(event.message))
        return {"message": {**event.message, "text": "[redacted]"}}

    def tag(event: Any) -> dict[str, Any]:
        seen.append(dict(event.message))
        return {"message": {**event.message, "tagged": True}}

    host.register(on("tool_result_persist", redact, priority=2), "redact")
    host.register(
        module_plugin(
            "tagger", register=lambda api: api.on("tool_result_persist", tag, priority=1)
        ),
        "tag",
    )
    host.register(on("tool_result_persist", _raise), "broken")

    result = host.call_sync("tool_result_persist", {"message": {"text": "secret"}})

    assert seen == [{"text": "secret"}, {"text": "[redacted]"}]
    assert result.outcome.message == {"text": "[redacted]", "tagged": True}
    assert result.outcome.changed_by == ["redact", "tag"]
    assert status_of(result, "broken") is HandlerStatus.ERROR


def test_tool_result_persist_outcome_is_what_the_last_handler_saw() -> None:
    host = make_host()
    kept: dict[str, Any] = {}
    seen: list[Any] = []

    def rewriter(event: Any) -> dict[str, Any]:
        kept["message"] = {"content": [{"text": "clean"}]}
        return {"message": kept["message"]}

    def inspector(event: Any) -> None:
        seen.append(thaw(event.message))
        kept["message"]["content"].append({"text": "smuggled"})

    host.register(on("tool_result_persist", rewriter, priority=1), "rewriter")
    host.register(on("tool_result_persist", inspector), "inspector")

    result = host.call_sync("tool_result_persist", {"message": {"content": []}})

    assert seen == [{"content": [{"text": "clean"}]}]
    assert result.outcome.message == {"content": [{"text": "clean"}]}


def test_before_message_write_block_is_terminal() -> None:
    host = make_host()
    ran: list[str] = []
    host.register(on("before_message_write", lambda: {"message": {"text": "b"}}, priority=3), "e")
    host.register(
        on("before_message_write", lambda: {"block": True, "block_reason": "pii"}, priority=2),
        "blocker",
    )
    host.register(on("before_message_write", lambda: ran.append("lower")), "lower")

    result = host.call_sync("before_message_write", {"message": {"text": "a"}})

    assert ran == []
    assert status_of(result, "lower") is HandlerStatus.SKIPPED
    assert result.outcome.blocked is True
    assert result.outcome.blocked_by == "blocker"
    assert result.outcome.block_reason == "pii"


def test_sync_hooks_run_through_every_entry_point_alike() -> None:
    host = make_host()
    host.register(on("tool_result_persist", lambda: {"message": {"text": "x"}}), "p")
    event = {"message": {"text": "orig"}}
    outcomes = [
        host.call_sync("tool_result_persist", event).outcome,
        host.hooks.tool_result_persist(event).outcome,
        host.sync.dispatch("tool_result_persist", event).outcome,
        run(host.dispatch("tool_result_persist", event)).outcome,
    ]
    host.sync.close()
    assert all(o == outcomes[0] for o in outcomes)
    assert outcomes[0].message == {"text": "x"}


# -- observation hooks ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("hook", "event"),
    [
        ("after_tool_call", {"tool_name": "exec"}),
        ("message_sent", {"content": "hi", "success": True}),
        ("agent_end", {"success": True}),
        ("session_start", {"session_key": "s", "reason": "new"}),
        ("gateway_start", {}),
    ],
)
def test_observation_results_are_ignored_and_failures_never_change_the_outcome(
    hook: str, event: dict[str, Any]
) -> None:
    host = make_host()
    host.register(on(hook, lambda: {"block": True, "cancel": True}, priority=2), "returns")
    host.register(on(hook, _raise, priority=1), "raises")
    host.register(on(hook, lambda: "anything"), "odd")

    result = dispatch(host, hook, event)

    assert result.outcome.kind == "observe"
    assert statuses(result) == [
        ("returns", HandlerStatus.OK),
        ("raises", HandlerStatus.ERROR),
        ("odd", HandlerStatus.OK),
    ]


def test_observation_async_failure_is_reported_per_handler() -> None:
    host = make_host()

    async def fails_later(event: Any) -> None:
        await asyncio.sleep(0)
        raise RuntimeError("late")

    async def fine(event: Any) -> None:
        await asyncio.sleep(0)

    host.register(on("message_received", fails_later), "late")
    host.register(on("message_received", fine), "fine")

    result = dispatch(host, "message_received", {"content": "hi"})

    assert statuses(result) == [("late", HandlerStatus.ERROR), ("fine", HandlerStatus.OK)]


# -- facades -------------------------------------------------------------------------


def _facade_host() -> Any:
    host = make_host()
    host.register(
        ApiPlugin(
            ("before_tool_call", lambda: {"params": {"command": "pwd"}, **_approval()}, {}),
            ("message_sending", lambda: {"content": "rewritten"}, {}),
            ("before_agent_run", lambda: {"outcome": "block", "reason": "r"}, {}),
            ("before_prompt_build", lambda: {"prepend_context": "ctx"}, {}),
            ("inbound_claim", lambda: {"handled": True, "reply": "r"}, {}),
            ("resolve_exec_env", lambda: {"X": "1", "PATH": "/evil"}, {}),
            ("before_install", lambda: {"findings": [{"message": "m"}]}, {}),
            ("message_received", lambda: None, {}),
            ("before_message_write", lambda: {"block": True}, {}),
        ),
        "p",
    )
    return host


FACADE_EVENTS = {
    "before_tool_call": TOOL_EVENT,
    "message_sending": {"content": "hi"},
    "before_agent_run": {"prompt": "hi"},
    "before_prompt_build": {"prompt": "hi"},
    "inbound_claim": {"content": "hi"},
    "resolve_exec_env": {},
    "before_install": {"name": "pkg"},
    "message_received": {"content": "hi"},
    "before_message_write": {"message": {"text": "hi"}},
}


@pytest.mark.parametrize("hook", list(FACADE_EVENTS))
def test_sync_facade_and_typed_facade_give_the_same_outcomes(hook: str) -> None:
    host = _facade_host()
    event = FACADE_EVENTS[hook]

    async def typed() -> Any:
        result = getattr(host.hooks, hook)(event)
        return await result if asyncio.iscoroutine(result) else result

    try:
        results = [
            run(host.dispatch(hook, event)),
            run(typed()),
            host.sync.dispatch(hook, event),
            getattr(host.sync.hooks, hook)(event),
        ]
    finally:
        host.sync.close()

    dumps = [r.outcome.model_dump() for r in results]
    assert all(d == dumps[0] for d in dumps), dumps
    assert {type(r.outcome) for r in results} == {host.declarations[hook].outcome}
    assert all(
        [(h.plugin_id, h.status) for h in r.handlers] == statuses(results[0]) for r in results
    )


def test_sync_facade_keeps_abandoned_handlers_running_between_calls() -> None:
    host = make_host()
    state: dict[str, Any] = {"finished": False}

    async def slow(event: Any) -> None:
        await asyncio.sleep(0.2)
        state["finished"] = True

    host.register(on("before_tool_call", slow, timeout_ms=SHORT_MS), "slow")
    result = host.sync.hooks.before_tool_call(TOOL_EVENT)
    leftover = host.sync.close(5)

    assert status_of(result, "slow") is HandlerStatus.TIMEOUT
    assert result.outcome.blocked is True  # fail closed
    assert leftover == []
    assert state["finished"] is True


# -- logging sanity ------------------------------------------------------------------


def test_reductions_do_not_log_on_success(agentplug_logs: pytest.LogCaptureFixture) -> None:
    host = _facade_host()
    for hook, event in FACADE_EVENTS.items():
        if hook == "before_message_write":
            host.call_sync(hook, event)
        else:
            dispatch(host, hook, event)
    assert [r for r in agentplug_logs.records if r.levelno >= logging.WARNING] == []
