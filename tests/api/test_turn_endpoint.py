"""``POST /api/sessions/{key}/messages``: a turn through a real ``agentplug serve``.

The served gateway runs the scripted model of its config; the tool the model calls is a
custom ``code`` action named ``web_search``, which the installed ``tool-preflight`` plugin
puts behind an approval, so one turn shows the whole path: the inbound hooks, the model,
the pipeline, an approval answered through the API, delivery.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("starlette")
pytest.importorskip("uvicorn")

from tests.api.served import WAIT_S, Served, start_serve

SEARCH = {
    "id": "web-search",
    "name": "web_search",
    "description": "Search the web",
    "parameters": [{"name": "query", "description": "what to look for", "required": True}],
    "handler": {"type": "code", "language": "python", "code": "return 'found ' + params['query']"},
    "enabled": True,
    "sideEffects": False,
    "createdAt": "2026-01-01T00:00:00Z",
    "updatedAt": "2026-01-01T00:00:00Z",
}


def _config(responses: list[Any]) -> dict[str, Any]:
    return {
        "plugins": {"allow": ["tool-preflight"]},
        "agent": {
            "model": "scripted/turns",
            "providers": {"scripted": {"responses": responses}},
        },
        "customActions": [SEARCH],
    }


SEARCH_THEN_REPLY = [
    {"text": "", "tool_calls": [{"id": "c1", "name": "web_search", "arguments": {"query": "x"}}]},
    "here is what I found",
]


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Served]:
    server = start_serve(tmp_path, _config(["hello from the model"]))
    try:
        yield server
    finally:
        server.stop()


def test_a_message_posted_to_a_session_runs_one_turn_through_the_inbound_path(
    served: Served,
) -> None:
    answer = served.client.post("/api/sessions/web:alice/messages", json={"content": "hi"})
    assert answer.status_code == 200, answer.text
    turn = answer.json()
    assert turn["status"] == "replied" and turn["reply"] == "hello from the model"
    assert turn["session_key"] == "web:alice"
    hooks = [entry["name"] for entry in turn["trace"] if entry["kind"] == "hook"]
    assert hooks[:2] == ["inbound_claim", "message_received"]
    assert "transcript" not in turn


def test_the_transcript_comes_back_only_when_asked(served: Served) -> None:
    answer = served.client.post(
        "/api/sessions/s1/messages", params={"transcript": "1"}, json={"content": "hi"}
    )
    assert [m["role"] for m in answer.json()["transcript"]] == ["user", "assistant"]


def test_a_message_needs_the_token(served: Served) -> None:
    import httpx

    answer = httpx.post(f"{served.url}/api/sessions/s1/messages", json={"content": "hi"})
    assert answer.status_code == 401


def test_a_message_body_over_the_limit_is_refused_with_413(served: Served) -> None:
    from agentplug.api.routes.sessions import MAX_MESSAGE_BODY_BYTES

    big = {"content": "x" * (MAX_MESSAGE_BODY_BYTES + 10)}
    assert served.client.post("/api/sessions/s1/messages", json=big).status_code == 413


def test_a_message_field_of_the_wrong_shape_is_named_in_a_400(served: Served) -> None:
    answer = served.client.post("/api/sessions/s1/messages", json={"content": "hi", "sent": 1})
    assert answer.status_code == 400
    assert "'sent'" in answer.json()["error"]
    answer = served.client.post("/api/sessions/s1/messages", json={"content": 3})
    assert answer.status_code == 400 and "'content'" in answer.json()["error"]


def test_the_session_comes_from_the_url_only(served: Served) -> None:
    body = {"content": "hi", "session_key": "someone-else"}
    answer = served.client.post("/api/sessions/s1/messages", json=body)
    assert answer.status_code == 400 and "session_key" in answer.json()["error"]


def test_an_approval_a_turn_asks_is_answered_through_the_api_and_the_turn_goes_on(
    tmp_path: Path,
) -> None:
    server = start_serve(tmp_path, _config(SEARCH_THEN_REPLY))
    try:
        done: list[Any] = []

        def post() -> None:
            done.append(server.client.post("/api/sessions/s1/messages", json={"content": "go"}))

        turn = threading.Thread(target=post, daemon=True)
        turn.start()
        pending = _wait_for_pending(server)
        assert pending["tool_name"] == "web_search" and pending["plugin_id"] == "tool-preflight"
        decided = server.client.post(
            f"/api/approvals/{pending['id']}", json={"decision": "allow-once"}
        )
        assert decided.status_code == 200, decided.text
        turn.join(WAIT_S)
        result = done[0].json()
        assert result["status"] == "replied" and result["reply"] == "here is what I found"
        tool = next(e for e in result["trace"] if e["kind"] == "tool")
        assert tool["decision"]["approval"] == "allow-once"
        assert tool["decision"]["approval_by"] == "api"
    finally:
        server.stop()


def _wait_for_pending(server: Served) -> dict[str, Any]:
    import time

    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        pending = server.client.get("/api/approvals").json()["pending"]
        if pending:
            item: dict[str, Any] = pending[0]
            return item
        time.sleep(0.02)
    raise AssertionError("no approval became pending")
