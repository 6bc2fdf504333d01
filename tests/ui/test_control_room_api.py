"""The control room's endpoints and guard over real HTTP (no browser): login cookie rules,
the page's headers, the live feed, turns, transcripts, reset, plugins and hooks."""

from __future__ import annotations

import contextlib
import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.ui.plugins import CANARY, Gate, ResetWatcher, RunGuard, call, echo
from tests.ui.server import TOKEN, WAIT_S, UiServer

pytest.importorskip("starlette")
pytest.importorskip("uvicorn")


@pytest.fixture
def server(tmp_path: Path) -> Iterator[UiServer]:
    with UiServer(tmp_path, responses=["one", "two", "three"], plugins=[ResetWatcher()]) as s:
        yield s


@contextlib.contextmanager
def _login(server: UiServer) -> Iterator[httpx.Client]:
    """A client holding the login cookie (and no bearer token), as a browser would."""
    with httpx.Client(base_url=server.url, timeout=WAIT_S) as client:
        answer = client.post("/api/ui/login", json={"token": TOKEN}, headers={"Origin": server.url})
        assert answer.status_code == 200, answer.text
        yield client


def _events(
    server: UiServer, wanted: int, until: str | None = None, pending: bool = False
) -> list[tuple[str, Any]]:
    """Read ``GET /api/events`` until ``wanted`` events came, or one named ``until``, or
    (``pending``) an inbox with a pending approval."""
    found: list[tuple[str, Any]] = []
    with server.client() as client, client.stream("GET", "/api/events") as stream:
        assert stream.status_code == 200
        assert stream.headers["content-type"].startswith("text/event-stream")
        kind = None
        for line in stream.iter_lines():
            if line.startswith("event:"):
                kind = line[6:].strip()
            elif line.startswith("data:"):
                found.append((str(kind), json.loads(line[5:])))
                if len(found) >= wanted or kind == until:
                    break
                if pending and kind == "approvals" and found[-1][1]["pending"]:
                    break
    return found


# -- login and the guard ------------------------------------------------------------------


def test_a_login_sets_an_httponly_strict_cookie_that_is_not_the_token(server: UiServer) -> None:
    answer = httpx.post(
        f"{server.url}/api/ui/login", json={"token": TOKEN}, headers={"Origin": server.url}
    )
    cookie = answer.headers["set-cookie"]
    assert answer.status_code == 200
    assert cookie.startswith(f"agentplug_ui_{server.port}=")
    assert "HttpOnly" in cookie and "SameSite=strict" in cookie and "Path=/" in cookie
    assert TOKEN not in cookie


def test_a_wrong_token_gets_no_login(server: UiServer) -> None:
    answer = httpx.post(
        f"{server.url}/api/ui/login", json={"token": "x" * 40}, headers={"Origin": server.url}
    )
    assert answer.status_code == 401 and "set-cookie" not in answer.headers


def test_the_login_cookie_reads_the_api_from_the_page_s_own_origin(server: UiServer) -> None:
    with _login(server) as client:
        assert client.get("/api/ui/session").json() == {"ok": True, "via": "cookie"}
        headers = {"Origin": server.url, "Sec-Fetch-Site": "same-origin"}
        assert client.get("/api/sessions", headers=headers).status_code == 200


def test_a_cookie_request_from_another_loopback_port_is_refused(server: UiServer) -> None:
    with _login(server) as client:
        other = f"http://127.0.0.1:{server.port + 1}"
        answer = client.post("/api/sessions/s1/reset", json={}, headers={"Origin": other})
        assert answer.status_code == 403 and other in answer.json()["error"]


def test_a_cookie_request_the_browser_marks_same_site_is_refused(server: UiServer) -> None:
    with _login(server) as client:
        answer = client.get("/api/sessions", headers={"Sec-Fetch-Site": "same-site"})
        assert answer.status_code == 403


def test_a_state_changing_cookie_request_without_origin_is_refused(server: UiServer) -> None:
    with _login(server) as client:
        answer = client.post("/api/sessions/s1/reset", json={})
        assert answer.status_code == 403 and "Origin" in answer.json()["error"]
        ok = client.post("/api/sessions/s1/reset", json={}, headers={"Origin": server.url})
        assert ok.status_code == 200


def test_a_script_with_the_bearer_token_needs_no_origin(server: UiServer) -> None:
    with server.client() as client:
        assert client.post("/api/sessions/s1/reset", json={}).status_code == 200


def test_a_login_from_another_origin_is_refused(server: UiServer) -> None:
    answer = httpx.post(
        f"{server.url}/api/ui/login",
        json={"token": TOKEN},
        headers={"Origin": f"http://localhost:{server.port + 1}"},
    )
    assert answer.status_code == 403 and "set-cookie" not in answer.headers


def test_a_logout_ends_the_login(server: UiServer) -> None:
    with _login(server) as client:
        client.post("/api/ui/logout", json={}, headers={"Origin": server.url})
        assert client.get("/api/ui/session").status_code == 401


def test_the_api_refuses_a_request_without_token_or_login(server: UiServer) -> None:
    assert httpx.get(f"{server.url}/api/sessions").status_code == 401
    assert httpx.get(f"{server.url}/api/events").status_code == 401


# -- the page -------------------------------------------------------------------------------


def test_the_page_is_served_with_a_strict_content_security_policy(server: UiServer) -> None:
    answer = httpx.get(f"{server.url}/ui/")
    policy = answer.headers["content-security-policy"]
    assert answer.status_code == 200 and answer.headers["content-type"].startswith("text/html")
    assert "script-src 'self'" in policy and "'unsafe-inline'" not in policy
    assert "require-trusted-types-for 'script'" in policy
    assert "frame-ancestors 'none'" in policy
    assert answer.headers["x-content-type-options"] == "nosniff"
    assert httpx.get(f"{server.url}/ui").headers["location"] == "/ui/"


def test_a_file_that_is_not_part_of_the_page_is_not_served(server: UiServer) -> None:
    for name in ("%2e%2e%2fapp.py", "..%2f..%2fpyproject.toml", "nope.js", "static"):
        assert httpx.get(f"{server.url}/ui/{name}").status_code == 404


def test_api_answers_are_never_cached(server: UiServer) -> None:
    with server.client() as client:
        assert client.get("/api/sessions").headers["cache-control"] == "no-store"


# -- what the page shows -------------------------------------------------------------------


def test_the_feed_opens_with_the_inbox_and_tells_each_turn_s_start_and_end(
    server: UiServer,
) -> None:
    seen: list[tuple[str, Any]] = []
    reader = threading.Thread(target=lambda: seen.extend(_events(server, 9, until="turn_ended")))
    reader.start()
    with server.client() as client:
        while server.call(_streams(server)) == 0:
            pass
        turn = client.post("/api/sessions/s1/messages", json={"content": "hi"}).json()
    reader.join(WAIT_S)
    kinds = [kind for kind, _ in seen]
    assert kinds[0] == "approvals" and seen[0][1]["pending"] == []
    assert kinds[-2:] == ["turn_started", "turn_ended"]
    ended = seen[-1][1]
    assert ended["run_id"] == turn["run_id"] and ended["trace"] == turn["trace"]


def test_an_event_published_while_the_inbox_is_read_comes_after_the_inbox(
    server: UiServer,
) -> None:
    hub = server.app.state.api.events
    read_inbox = hub._snapshot

    async def slow_inbox() -> Any:
        hub.publish("turn_started", {"run_id": "run-early"})  # a turn starts meanwhile
        return await read_inbox()

    hub._snapshot = slow_inbox
    seen = _events(server, 2)
    assert [kind for kind, _ in seen] == ["approvals", "turn_started"]
    assert seen[1][1]["run_id"] == "run-early"


async def _streams(server: UiServer) -> int:
    return int(server.app.state.api.events.streams)


def test_the_latest_turns_carry_their_traces(server: UiServer) -> None:
    with server.client() as client:
        first = client.post("/api/sessions/s1/messages", json={"content": "a"}).json()
        second = client.post("/api/sessions/s2/messages", json={"content": "b"}).json()
        rows = client.get("/api/turns").json()["turns"]
        assert [r["run_id"] for r in rows] == [second["run_id"], first["run_id"]]
        assert rows[1]["trace"] == first["trace"]
        only = client.get("/api/turns", params={"session": "s1"}).json()["turns"]
        assert [r["run_id"] for r in only] == [first["run_id"]]
        assert client.get(f"/api/turns/{first['run_id']}").json()["status"] == "replied"
        assert client.get("/api/turns/run-unknown").status_code == 404
        assert client.get("/api/turns", params={"limit": "many"}).status_code == 400


def test_a_session_s_transcript_and_its_row_are_listed(server: UiServer) -> None:
    with server.client() as client:
        client.post("/api/sessions/web:ana/messages", json={"content": "hello"})
        rows = client.get("/api/sessions").json()["sessions"]
        row = next(r for r in rows if r["session_key"] == "web:ana")
        assert row["messages"] == 2
        assert row["plugin_extensions"] == {"reset-watcher": {"notes": {"count": 1}}}
        transcript = client.get("/api/sessions/web:ana/transcript").json()
        assert [m["role"] for m in transcript["messages"]] == ["user", "assistant"]
        assert client.get("/api/sessions/nobody/transcript").status_code == 404


def test_a_reset_through_the_api_fires_before_reset_and_forgets_the_session(
    server: UiServer,
) -> None:
    watcher = server.plugins[0]
    with server.client() as client:
        client.post("/api/sessions/s9/messages", json={"content": "hello"})
        answer = client.post("/api/sessions/s9/reset", json={})
        assert answer.json()["reset"] is True and answer.json()["transcript_deleted"] is True
        assert watcher.resets == [("s9", "api")]
        assert client.get("/api/sessions/s9/transcript").status_code == 404
        row = client.get("/api/sessions/s9").json()
        assert row["messages"] == 0 and row["plugin_extensions"]["reset-watcher"] == {
            "notes": {"count": 0}
        }


def test_plugins_show_each_handler_s_effective_priority_timeout_and_its_source(
    tmp_path: Path,
) -> None:
    config = {"plugins": {"entries": {"gate": {"hooks": {"timeouts": {"before_tool_call": 900}}}}}}
    with UiServer(tmp_path, plugins=[Gate()], config=config) as server, server.client() as c:
        (row,) = [p for p in c.get("/api/plugins").json()["plugins"] if p["plugin_id"] == "gate"]
    assert row["name"] == "Echo gate" and row["hooks"] == ["before_tool_call"]
    (handler,) = row["handlers"]
    assert (handler["hook"], handler["priority"], handler["timeout_ms"]) == (
        "before_tool_call",
        20,
        900,
    )
    assert handler["timeout_source"] not in (None, "", "hook default")


def test_the_hook_catalogue_gives_each_hook_s_kind_and_reduction(server: UiServer) -> None:
    with server.client() as client:
        hooks = {h["name"]: h for h in client.get("/api/hooks").json()["hooks"]}
    assert hooks["before_tool_call"]["kind"] == "decide"
    assert "block" in hooks["before_tool_call"]["reduction"]
    assert hooks["message_sending"]["kind"] == "pipeline"


def test_a_streamed_turn_says_its_run_id_first_and_its_result_last(server: UiServer) -> None:
    with (
        server.client() as client,
        client.stream("POST", "/api/sessions/s1/messages/stream", json={"content": "hi"}) as stream,
    ):
        frames = [line for line in stream.iter_lines() if line.startswith(("event:", "data:"))]
    kinds = [f[6:].strip() for f in frames if f.startswith("event:")]
    data = [json.loads(f[5:]) for f in frames if f.startswith("data:")]
    assert kinds[0] == "started" and kinds[-1] == "final" and "final" not in kinds[:-1]
    started, final = data[0], data[-1]
    assert final["run_id"] == started["run_id"] and final["reply"] == "one"
    assert "".join(d["text"] for k, d in zip(kinds, data, strict=True) if k == "delta") == "one"
    assert "transcript" not in final


# -- confidential reasons ----------------------------------------------------------------


def test_a_confidential_block_reason_reaches_no_endpoint_the_page_reads(tmp_path: Path) -> None:
    with UiServer(tmp_path, plugins=[RunGuard()]) as server, server.client() as client:
        answers = [
            client.post("/api/sessions/s1/messages", json={"content": "hi"}).text,
        ]
        with client.stream(
            "POST", "/api/sessions/s1/messages/stream", json={"content": "again"}
        ) as stream:
            answers.append("".join(stream.iter_text()))
        answers += [
            client.get("/api/turns").text,
            client.get("/api/sessions/s1/transcript").text,
            client.get("/api/sessions").text,
            client.get("/api/approvals/history").text,
        ]
        events = _events(server, 1)
    blocked = json.loads(answers[0])
    assert blocked["status"] == "blocked" and blocked["blocked_by"] == "run-guard"
    assert "[withheld by policy]" in answers[3]  # the public message is shown
    for text in [*answers, json.dumps(events)]:
        assert CANARY not in text


# -- approvals ----------------------------------------------------------------------------


def test_an_approval_appears_in_the_feed_and_its_decision_in_the_history(tmp_path: Path) -> None:
    with UiServer(
        tmp_path, responses=[call(text="hi"), "done"], plugins=[Gate()], tools=[echo]
    ) as server:
        seen: list[tuple[str, Any]] = []
        reader = threading.Thread(target=lambda: seen.extend(_events(server, 100, pending=True)))
        reader.start()
        while server.call(_streams(server)) == 0:
            pass
        thread, answers = server.post_turn_in_background("s1", "go")
        reader.join(WAIT_S)
        (pending,) = seen[-1][1]["pending"]
        assert (pending["title"], pending["severity"], pending["params"]) == (
            "Echo something",
            "warning",
            {"text": "hi"},
        )
        with server.client() as client:
            client.post(f"/api/approvals/{pending['id']}", json={"decision": "deny"})
            thread.join(WAIT_S)
            (row,) = client.get("/api/approvals/history").json()["history"]
    assert answers[0].json()["status"] == "replied"
    assert (row["id"], row["resolution"], row["by"]) == (pending["id"], "deny", "api")
