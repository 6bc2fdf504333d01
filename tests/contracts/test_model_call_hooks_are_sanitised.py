"""Issue 13.4: ``model_call_started`` / ``model_call_ended`` carry sanitised metadata only."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from agentplug import PluginApi, PluginHost
from agentplug.services.modelcalls import (
    MAX_REQUEST_ID_HASH_CHARS,
    upstream_request_id_hash,
)

RAW = {
    "prompt": "the user's secret prompt",
    "history": [{"role": "user", "content": "earlier secret"}],
    "response": "the model's secret answer",
    "headers": {"authorization": "Bearer sk-live-123"},
    "request_id": "req_abc123",
    "body": {"messages": []},
}


def _seen_by(hook: str) -> dict[str, Any]:
    seen: dict[str, Any] = {}

    def register(api: PluginApi) -> None:
        def handler(event: Any) -> None:
            seen.update(event.model_dump())
            seen["__extra__"] = dict(event.model_extra or {})

        api.on(hook, handler)

    host = PluginHost()
    host.register(register, "telemetry")
    event = {"run_id": "r1", "call_id": "c1", "provider": "openai", "model": "m", **RAW}
    asyncio.run(host.dispatch(hook, event, {"run_id": "r1"}))
    return seen


@pytest.mark.parametrize("hook", ["model_call_started", "model_call_ended"])
def test_model_call_hooks_drop_every_field_outside_the_documented_set(hook: str) -> None:
    seen = _seen_by(hook)
    assert seen["provider"] == "openai" and seen["call_id"] == "c1"
    assert seen["__extra__"] == {}
    for field in RAW:
        assert field not in seen, field
    assert "secret" not in repr(seen) and "sk-live" not in repr(seen)


def test_upstream_request_id_hash_is_bounded_stable_and_never_the_raw_id() -> None:
    raw = "req_" + "x" * 5000
    digest = upstream_request_id_hash(raw)
    assert digest == upstream_request_id_hash(raw)
    assert len(digest) <= MAX_REQUEST_ID_HASH_CHARS
    assert raw[:8] not in digest
    assert upstream_request_id_hash("req_1") != upstream_request_id_hash("req_2")


def test_upstream_request_id_hash_is_keyed() -> None:
    assert upstream_request_id_hash("req_1", key=b"a" * 32) != upstream_request_id_hash(
        "req_1", key=b"b" * 32
    )


def test_model_call_event_refuses_an_unbounded_request_id_hash() -> None:
    from agentplug_hookspecs.agent import ModelCallEvent

    with pytest.raises(ValueError, match="upstream_request_id_hash"):
        ModelCallEvent(upstream_request_id_hash="req_" + "raw-id-" * 40)
