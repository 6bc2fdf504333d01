"""The control room in a real headless Chromium (issue 31's acceptance, one rule per test).

Each test serves a gateway (:class:`~tests.ui.server.UiServer`), opens the page in a
fresh browser context (no cookie) and uses it as a person would: clicks and keys, no
reload. Waits are bounded by :data:`HANG_S`, a guard against a hang, never a timing
assertion; the one latency measured (an approval's appearance) is reported, not asserted.
"""

from __future__ import annotations

import http.server
import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.ui.plugins import CANARY, IMG, SCRIPT, Gate, Hostile, ResetWatcher, RunGuard, call, echo
from tests.ui.server import TOKEN, WAIT_S, UiServer

HANG_S = 30_000
"""Milliseconds any wait in the page may take before the test fails as hung."""


def _page(chromium: Any, server: UiServer, *, login: bool = True) -> Any:
    context = chromium.new_context()
    context.set_default_timeout(HANG_S)
    page = context.new_page()
    page.errors = []
    page.on("pageerror", lambda error: page.errors.append(str(error)))
    page.goto(f"{server.url}/ui/")
    if login:
        page.fill("#token", TOKEN)
        page.press("#token", "Enter")
        page.wait_for_selector("#nav:not([hidden])")
    return page


def _pending(server: UiServer) -> list[dict[str, Any]]:
    with server.client() as client:
        rows: list[dict[str, Any]] = client.get("/api/approvals").json()["pending"]
        return rows


def _mark_no_reload(page: Any) -> None:
    page.evaluate("window.__sameDocument = true")


def _still_same_document(page: Any) -> bool:
    return bool(page.evaluate("window.__sameDocument === true"))


def _watch_cards(page: Any) -> None:
    """Record, in the page, when each approval card is added to the inbox (Date.now())."""
    page.evaluate(
        """() => {
        window.__cardShownAt = {};
        new MutationObserver((records) => {
          for (const record of records) for (const node of record.addedNodes) {
            const id = node.dataset && node.dataset.approvalId;
            if (id && !window.__cardShownAt[id]) window.__cardShownAt[id] = Date.now();
          }
        }).observe(document.getElementById("inbox"), {childList: true});
      }"""
    )


@pytest.fixture
def gated(tmp_path: Path) -> Iterator[UiServer]:
    """A gateway whose model calls ``echo`` once, behind the Gate plugin's approval."""
    with UiServer(
        tmp_path, responses=[call(text="hi"), "done"], plugins=[Gate()], tools=[echo]
    ) as server:
        yield server


# -- log in -------------------------------------------------------------------------------


def test_logging_in_with_the_pasted_token_keeps_it_out_of_the_url_and_of_scripts(
    chromium: Any, gated: UiServer
) -> None:
    page = _page(chromium, gated, login=False)
    page.wait_for_selector("#login:not([hidden])")  # shown once the page knows it must ask
    assert not page.is_visible("#nav")
    page.fill("#token", "not-the-token-but-long-enough")
    page.click("#login-form button[type=submit]")
    page.wait_for_selector("#login-error:has-text('not this server')")
    page.fill("#token", TOKEN)
    page.click("#login-form button[type=submit]")
    page.wait_for_selector("#nav:not([hidden])")
    (cookie,) = page.context.cookies()
    assert (cookie["name"], cookie["httpOnly"], cookie["sameSite"]) == (
        f"agentplug_ui_{gated.port}",
        True,
        "Strict",
    )
    assert cookie["value"] != TOKEN and TOKEN not in page.url
    assert page.evaluate("document.cookie") == ""
    assert page.evaluate("localStorage.length + sessionStorage.length") == 0
    assert page.input_value("#token") == ""
    page.reload()
    page.wait_for_selector("#nav:not([hidden])")  # the cookie keeps the login
    page.click("#logout")
    page.wait_for_selector("#login:not([hidden])")
    assert page.evaluate("fetch('/api/sessions').then(r => r.status)") == 401


# -- approvals ----------------------------------------------------------------------------


def test_an_approval_asked_by_a_turn_appears_live_and_allowing_it_lets_the_turn_go_on(
    chromium: Any, gated: UiServer, record_property: Any
) -> None:
    page = _page(chromium, gated)
    _mark_no_reload(page)
    _watch_cards(page)
    thread, answers = gated.post_turn_in_background("s1", "please echo")
    card = page.wait_for_selector("#inbox article.approval")
    (pending,) = _pending(gated)
    shown_at = page.evaluate(f"window.__cardShownAt[{json.dumps(pending['id'])}]")
    latency_ms = shown_at - pending["created_at"] * 1000
    record_property("approval_latency_ms", round(latency_ms, 1))
    print(f"\napproval shown {latency_ms:.1f} ms after it was asked")
    assert _still_same_document(page)  # pushed, not reloaded
    assert card.get_attribute("data-approval-id") == pending["id"]
    assert card.query_selector(".title").text_content() == "Echo something"
    assert json.loads(card.query_selector("pre.params").text_content()) == {"text": "hi"}
    card.query_selector("button[data-decision=allow-once]").click()
    thread.join(WAIT_S)
    turn = answers[0].json()
    assert (turn["status"], turn["reply"]) == ("replied", "done")
    tool_results = [m for m in gated.provider.requests[1].messages if m["role"] == "tool"]
    assert tool_results[0]["content"] == "echoed hi"
    row = page.wait_for_selector(f"#history tr[data-approval-id='{pending['id']}']")
    assert "allow-once" in row.text_content() and "api" in row.text_content()
    assert page.query_selector("#inbox article.approval") is None
    assert page.errors == []


def test_a_denial_from_the_page_reaches_the_model_as_a_blocked_call(
    chromium: Any, gated: UiServer
) -> None:
    page = _page(chromium, gated)
    thread, answers = gated.post_turn_in_background("s1", "please echo")
    page.click("#inbox article.approval button[data-decision=deny]")
    thread.join(WAIT_S)
    assert answers[0].json()["reply"] == "done"
    (result,) = [m for m in gated.provider.requests[1].messages if m["role"] == "tool"]
    assert result["content"].startswith("tool call blocked:")
    assert "denied" in result["content"]


def test_an_approval_asked_on_another_gateway_sharing_the_store_is_decided_here(
    chromium: Any, tmp_path: Path
) -> None:
    state = tmp_path / "state"
    (tmp_path / "here").mkdir()
    (tmp_path / "there").mkdir()
    with (
        UiServer(tmp_path / "here", state_dir=state) as here,
        UiServer(
            tmp_path / "there",
            state_dir=state,
            responses=[call(text="hi"), "done there"],
            plugins=[Gate()],
            tools=[echo],
        ) as there,
    ):
        page = _page(chromium, here)
        _mark_no_reload(page)
        thread, answers = there.post_turn_in_background("s1", "please echo")
        card = page.wait_for_selector("#inbox article.approval")
        assert _still_same_document(page)
        card.query_selector("button[data-decision=allow-once]").click()
        thread.join(WAIT_S)
        assert answers[0].json()["reply"] == "done there"
        row = page.wait_for_selector("#history tr")
        assert "allow-once" in row.text_content() and "api" in row.text_content()


def test_the_inbox_can_be_worked_with_the_keyboard_alone(chromium: Any, tmp_path: Path) -> None:
    responses = [call(text="one"), call(text="two"), "first done", "second done"]
    with UiServer(tmp_path, responses=responses, plugins=[Gate()], tools=[echo]) as server:
        page = _page(chromium, server)
        first, first_answer = server.post_turn_in_background("s1", "echo one")
        page.wait_for_selector("#inbox article.approval")
        second, second_answer = server.post_turn_in_background("s2", "echo two")
        page.wait_for_function(
            "() => document.querySelectorAll('#inbox article.approval').length == 2"
        )
        page.evaluate("document.activeElement.blur()")
        for _ in range(40):  # Tab from the top of the page to the first request
            page.keyboard.press("Tab")
            if page.evaluate("document.activeElement.matches('article.approval')"):
                break
        cards = page.query_selector_all("#inbox article.approval")
        ids = [c.get_attribute("data-approval-id") for c in cards]
        assert page.evaluate("document.activeElement.dataset.approvalId") == ids[0]
        page.keyboard.press("j")
        assert page.evaluate("document.activeElement.dataset.approvalId") == ids[1]
        page.keyboard.press("d")  # deny the second
        page.wait_for_function(
            f"() => document.activeElement.dataset.approvalId === {json.dumps(ids[0])}"
        )
        page.keyboard.press("Tab")  # to its first button: "Allow once"
        assert page.evaluate("document.activeElement.dataset.decision") == "allow-once"
        page.keyboard.press("Enter")
        first.join(WAIT_S)
        second.join(WAIT_S)
        page.wait_for_function("() => document.querySelectorAll('#history tr').length == 2")
        rows = {
            r.get_attribute("data-approval-id"): r.text_content()
            for r in page.query_selector_all("#history tr")
        }
        assert "allow-once" in rows[ids[0]] and "deny" in rows[ids[1]]
        assert first_answer[0].json()["status"] == second_answer[0].json()["status"] == "replied"


# -- chat ---------------------------------------------------------------------------------


def test_chat_runs_a_turn_and_shows_its_approval_inline(chromium: Any, gated: UiServer) -> None:
    page = _page(chromium, gated)
    page.click("#nav a[data-view=chat]")
    page.fill("#chat-input", "please echo hi")
    page.press("#chat-input", "Enter")
    inline = page.wait_for_selector("#chat-log .inline-approvals article.approval")
    assert inline.query_selector(".title").text_content() == "Echo something"
    inline.query_selector("button[data-decision=allow-once]").click()
    page.wait_for_selector("#chat-log .message.assistant .turn-footer .chip.replied")
    replies = page.query_selector_all("#chat-log .message.assistant .content")
    assert replies[-1].text_content() == "done"
    assert page.query_selector("#chat-log .inline-approvals article") is None


# -- the timeline -------------------------------------------------------------------------


def test_the_timeline_lists_a_turn_s_hooks_in_the_order_they_ran(
    chromium: Any, gated: UiServer
) -> None:
    page = _page(chromium, gated)
    page.click("#nav a[data-view=timeline]")
    _mark_no_reload(page)
    thread, answers = gated.post_turn_in_background("s1", "please echo")
    (pending,) = [] or _wait_pending(gated)
    with gated.client() as client:
        client.post(f"/api/approvals/{pending['id']}", json={"decision": "allow-once"})
    thread.join(WAIT_S)
    turn = answers[0].json()
    link = page.wait_for_selector(f"#turns a[data-run-id='{turn['run_id']}'] .chip.replied")
    assert _still_same_document(page)  # the turn arrived through the live feed
    link.click()
    page.wait_for_selector("#turn-detail .entries li")
    shown = page.eval_on_selector_all(
        "#turn-detail .entries li[data-kind=hook]", "items => items.map(i => i.dataset.name)"
    )
    hooks = [e["name"] for e in turn["trace"] if e["kind"] == "hook"]
    assert shown == hooks and "before_tool_call" in shown
    gate_row = page.query_selector("#turn-detail li[data-name=before_tool_call] .handler")
    assert "gate" in gate_row.text_content() and "ok" in gate_row.text_content()
    tool = page.query_selector("#turn-detail li[data-kind=tool]").text_content()
    assert "approval asked by: gate" in tool and "approved by: api" in tool


def _wait_pending(server: UiServer) -> list[dict[str, Any]]:
    import time

    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        rows = _pending(server)
        if rows:
            return rows
        time.sleep(0.05)
    raise AssertionError("no approval became pending")


def test_a_confidential_block_reason_never_reaches_the_page(chromium: Any, tmp_path: Path) -> None:
    with UiServer(tmp_path, plugins=[RunGuard()]) as server:
        page = _page(chromium, server)
        bodies: list[str] = []
        page.on("response", lambda r: bodies.append(_text(r)))
        page.click("#nav a[data-view=chat]")
        page.fill("#chat-input", "hello")
        page.press("#chat-input", "Enter")
        page.wait_for_selector("#chat-log .turn-footer .chip.blocked")
        page.click("#chat-log .turn-footer a")
        page.wait_for_selector("#turn-detail .entries li[data-name=before_agent_run]")
        page.click("#nav a[data-view=sessions]")
        page.click("#sessions button[data-session-key='ui:operator']")
        page.wait_for_selector("#session-detail .transcript")
        assert "run-guard" in page.text_content("#view-timeline")
        assert "[withheld by policy]" in page.text_content("#session-detail")
        assert CANARY not in page.content()
        assert not any(CANARY in body for body in bodies)


def _text(response: Any) -> str:
    try:
        return str(response.text())
    except Exception:  # a stream still open, a redirect: nothing to read
        return ""


# -- hostile text -------------------------------------------------------------------------


def test_a_plugin_title_containing_script_renders_as_text(chromium: Any, tmp_path: Path) -> None:
    gate = Gate(title=f"Echo {SCRIPT}", description=f"Look {IMG}")
    reply = f"model says {SCRIPT}{IMG}"
    with UiServer(
        tmp_path,
        responses=[call(text=SCRIPT), reply],
        plugins=[Hostile(), gate],
        tools=[echo],
    ) as server:
        page = _page(chromium, server)
        page.click("#nav a[data-view=chat]")
        page.fill("#chat-input", "go")
        page.press("#chat-input", "Enter")
        card = page.wait_for_selector("#inbox article.approval", state="attached")
        assert card.query_selector(".title").text_content() == f"Echo {SCRIPT}"
        assert card.query_selector(".description").text_content() == f"Look {IMG}"
        page.click("#chat-log article.approval button[data-decision=allow-once]")
        page.wait_for_selector("#chat-log .turn-footer .chip.replied")
        page.click("#nav a[data-view=plugins]")
        title = page.wait_for_selector("#plugins article[data-plugin-id=hostile] .title")
        assert title.text_content() == f"Hostile {SCRIPT}{IMG}"
        assert page.query_selector_all("#main script, #main img") == []
        assert page.evaluate("window.__pwned") is None
        contents = page.eval_on_selector_all(
            "#chat-log .message.assistant .content", "items => items.map(i => i.textContent)"
        )
        assert contents[-1] == reply
        assert page.errors == []


# -- refused requests --------------------------------------------------------------------


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def other_site(tmp_path: Path) -> Iterator[int]:
    """A plain web server on another loopback port (the "other page")."""
    folder = tmp_path / "other"
    folder.mkdir()
    (folder / "index.html").write_text("<!doctype html><title>other</title>", encoding="utf-8")

    def handler(*args: Any) -> _Quiet:
        return _Quiet(*args, directory=str(folder))

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()


def _attack(page: Any, server: UiServer, approval_id: str) -> tuple[str, int]:
    """From ``page``'s origin, try to allow the approval with the browser's cookies (a
    no-cors request, which needs no permission from the API); what the page saw and
    what the server answered."""
    before = len(server.answered)
    seen = page.evaluate(
        """([url, id]) => fetch(`${url}/api/approvals/${id}`, {
          method: "POST", mode: "no-cors", credentials: "include",
          headers: {"Content-Type": "text/plain"}, body: JSON.stringify({decision: "allow-once"}),
        }).then((r) => `read: ${r.type}`, (e) => `failed: ${e}`)""",
        [server.url, approval_id],
    )
    answers = [a for a in server.answered[before:] if a["path"].startswith("/api/approvals/")]
    assert len(answers) == 1, answers
    return str(seen), int(answers[0]["status"])


def test_a_request_without_the_token_is_refused(chromium: Any, gated: UiServer) -> None:
    page = _page(chromium, gated, login=False)
    thread, _ = gated.post_turn_in_background("s1", "please echo")
    (pending,) = _wait_pending(gated)
    status = page.evaluate(
        """(id) => fetch(`/api/approvals/${id}`, {method: "POST",
          headers: {"Content-Type": "application/json"},
          body: JSON.stringify({decision: "allow-once"})}).then(r => r.status)""",
        pending["id"],
    )
    assert status == 401
    assert [p["id"] for p in _pending(gated)] == [pending["id"]]
    _deny(gated, pending["id"], thread)


def test_a_request_from_a_foreign_origin_is_refused_even_with_the_login_cookie(
    chromium: Any, gated: UiServer, other_site: int
) -> None:
    page = _page(chromium, gated)  # logged in: the browser holds the cookie
    thread, _ = gated.post_turn_in_background("s1", "please echo")
    (pending,) = _wait_pending(gated)
    attacker = page.context.new_page()
    for origin in (f"http://foreign.test:{other_site}", f"http://127.0.0.1:{other_site}"):
        attacker.goto(f"{origin}/index.html")
        seen, status = _attack(attacker, gated, pending["id"])
        assert status == 403, origin
        assert seen.startswith("failed"), seen  # nor can the page read the refusal
    assert [p["id"] for p in _pending(gated)] == [pending["id"]]
    _deny(gated, pending["id"], thread)


def _deny(server: UiServer, approval_id: str, thread: threading.Thread) -> None:
    with server.client() as client:
        client.post(f"/api/approvals/{approval_id}", json={"decision": "deny"})
    thread.join(WAIT_S)


# -- sessions, plugins, custom actions ------------------------------------------------------


def test_a_session_s_transcript_shows_and_a_reset_from_the_page_fires_before_reset(
    chromium: Any, tmp_path: Path
) -> None:
    watcher = ResetWatcher()
    with UiServer(tmp_path, responses=["hi there"], plugins=[watcher]) as server:
        with server.client() as client:
            client.post("/api/sessions/web:ana/messages", json={"content": "hello"})
        page = _page(chromium, server)
        page.click("#nav a[data-view=sessions]")
        page.click("#sessions button[data-session-key='web:ana']")
        page.wait_for_selector("#session-detail .transcript")
        texts = page.eval_on_selector_all(
            "#session-detail .transcript .content", "items => items.map(i => i.textContent)"
        )
        assert texts == ["hello", "hi there"]
        assert '"count": 1' in page.text_content("#session-detail .extensions")
        page.click("#session-detail button.deny")
        page.click("#session-detail button.deny")  # confirm
        page.wait_for_selector("#session-detail p:has-text('The session was reset.')")
        assert page.query_selector("#session-detail .transcript") is None
        assert watcher.resets == [("web:ana", "api")]


def test_the_plugins_view_shows_handlers_and_the_hook_catalogue(
    chromium: Any, gated: UiServer
) -> None:
    page = _page(chromium, gated)
    page.click("#nav a[data-view=plugins]")
    card = page.wait_for_selector("#plugins article[data-plugin-id=gate]")
    cells = card.eval_on_selector_all("tbody td", "cells => cells.map(c => c.textContent)")
    assert cells[:4] == ["before_tool_call", "20", "15000 ms", "hook default"]
    page.fill("#hook-filter", "before_tool_call")
    row = page.wait_for_selector("#hooks tr[data-hook=before_tool_call]")
    assert "decide" in row.text_content() and "block" in row.text_content()


@pytest.fixture
def my_action(chromium: Any, tmp_path: Path) -> Iterator[tuple[UiServer, Any]]:
    """A gateway with no custom action, and a page that just created ``my-action``."""
    with UiServer(tmp_path, custom_actions=[]) as server:
        page = _page(chromium, server)
        page.click("#nav a[data-view=actions]")
        page.click("#action-new")
        page.click("#action-detail button:has-text('Create')")
        page.wait_for_selector("#action-detail h2:has-text('my-action')")
        yield server, page


def test_a_custom_action_is_created_edited_and_tested_from_the_page(
    my_action: tuple[UiServer, Any],
) -> None:
    server, page = my_action
    edited = json.loads(page.input_value("#action-json"))
    edited["handler"]["code"] = "return params['text'].upper() + '!'"
    page.fill("#action-json", json.dumps(edited))
    page.click("#action-detail button:has-text('Save')")
    page.wait_for_selector("#action-detail p:has-text('Saved and registered.')")
    page.fill("#action-params", json.dumps({"text": "shout"}))
    page.click("#action-detail button:has-text('Test')")
    page.wait_for_selector("#action-detail pre.output:has-text('SHOUT!')")
    saved = json.loads(server.config_path.read_text(encoding="utf-8"))
    assert [a["id"] for a in saved["customActions"]] == ["my-action"]
    assert saved["customActions"][0]["handler"]["code"].endswith("+ '!'")


def test_an_action_s_test_cannot_be_run_while_its_save_is_in_flight(
    my_action: tuple[UiServer, Any],
) -> None:
    _, page = my_action
    held: list[Any] = []
    page.route("**/api/custom-actions/my-action", lambda route: held.append(route))
    page.click("#action-detail button:has-text('Save')")
    page.wait_for_selector("#action-detail button:has-text('Test'):disabled")
    assert page.is_disabled("#action-detail button:has-text('Save')")
    for _ in range(HANG_S // 10):  # the route handler runs when the request is made
        if held:
            break
        page.wait_for_timeout(10)
    assert len(held) == 1
    held[0].continue_()
    page.wait_for_selector("#action-detail p:has-text('Saved and registered.')")
    assert page.is_enabled("#action-detail button:has-text('Test')")


def test_a_late_answer_to_an_older_list_request_does_not_replace_a_newer_list(
    chromium: Any, tmp_path: Path
) -> None:
    with UiServer(tmp_path, custom_actions=[]) as server:
        page = _page(chromium, server)
        page.click("#nav a[data-view=actions]")
        page.wait_for_selector("#actions li.empty")
        stale: list[tuple[Any, Any]] = []

        def hold_first(route: Any) -> None:
            if stale or route.request.method != "GET":
                route.continue_()
                return
            stale.append((route, route.fetch()))  # answered now: no action yet

        page.route("**/api/custom-actions", hold_first)
        page.click("#action-new")
        page.click("#action-detail button:has-text('Create')")
        page.wait_for_selector("#actions button[data-action-id=my-action]")
        route, answer = stale[0]
        with page.expect_event("requestfinished"):
            route.fulfill(response=answer)
        page.evaluate("() => new Promise((done) => setTimeout(done, 50))")  # its handler ran
        assert page.locator("#actions button[data-action-id=my-action]").count() == 1
