"""Take the screenshots docs/ui.md shows: ``make ui-screenshots`` (or
``python -m tests.ui.screenshots [FOLDER]``, default ``docs/img``).

A gateway is served with a few real plugins, a scripted model and a Python tool; turns
run so that every view has something to show (an approval waiting, decided ones, a turn
with a tool call, a session with plugin state, a custom action); then a headless
Chromium logs in and photographs each view at 1280x800.
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from tests.ui.browser import CHROMIUM_ARGS, browser_problem, chromium_path
from tests.ui.plugins import Gate, ResetWatcher, call, echo
from tests.ui.server import TOKEN, WAIT_S, UiServer

SHOTS = (
    "ui-login.png",
    "ui-approvals.png",
    "ui-chat.png",
    "ui-timeline.png",
    "ui-plugins.png",
    "ui-sessions.png",
    "ui-actions.png",
)
"""The files written (docs/ui.md shows each)."""

ACTION = {
    "id": "word-count",
    "name": "WORD_COUNT",
    "description": "Count the words of a text",
    "parameters": [{"name": "text", "description": "the text", "required": True}],
    "handler": {"type": "code", "language": "python", "code": "return len(params['text'].split())"},
    "enabled": True,
    "sideEffects": False,
    "createdAt": "2026-01-01T00:00:00Z",
    "updatedAt": "2026-01-01T00:00:00Z",
}


class Preflight:
    """A policy plugin for the pictures: rewrites nothing, blocks ``delete_all``."""

    plugin_id = "tool-preflight"
    name = "Tool preflight"
    description = "Blocks destructive tools before they run."

    def register(self, api: Any) -> None:
        api.on("before_tool_call", self.check, priority=50)

    def check(self, event: Any) -> dict[str, Any] | None:
        if event.tool_name == "delete_all":
            return {"block": True, "block_reason": "delete_all is never allowed"}
        return None


def _wait_pending(server: UiServer, count: int) -> list[dict[str, Any]]:
    deadline = time.monotonic() + WAIT_S
    with server.client() as client:
        while time.monotonic() < deadline:
            rows: list[dict[str, Any]] = client.get("/api/approvals").json()["pending"]
            if len(rows) >= count:
                return rows
            time.sleep(0.05)
    raise RuntimeError("the approval the screenshots need never became pending")


def take(folder: Path) -> list[Path]:
    """Write every screenshot of :data:`SHOTS` into ``folder``; return their paths."""
    problem = browser_problem()
    if problem is not None:
        raise RuntimeError(problem)
    from playwright.sync_api import sync_playwright

    folder.mkdir(parents=True, exist_ok=True)
    responses = [
        call(text="status report"),
        "I echoed the status report.",
        call(text="quarterly numbers", call_id="c2"),
        "Here are the quarterly numbers.",
        call(text="release notes", call_id="c3"),
        "Done.",
        call(text="weekly summary", call_id="c4"),
        "Sent.",
    ]
    gate = Gate(title="Echo text back to the user")
    with (
        tempfile.TemporaryDirectory() as root,
        UiServer(
            Path(root),
            responses=responses,
            plugins=[gate, Preflight(), ResetWatcher()],
            tools=[echo],
            custom_actions=[ACTION],
        ) as server,
        sync_playwright() as playwright,
    ):
        browser = playwright.chromium.launch(executable_path=chromium_path(), args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1280, "height": 800})
        page.set_default_timeout(WAIT_S * 1000)
        page.goto(f"{server.url}/ui/")
        page.wait_for_selector("#login:not([hidden])")
        page.screenshot(path=folder / "ui-login.png")
        page.fill("#token", TOKEN)
        page.press("#token", "Enter")
        page.wait_for_selector("#nav:not([hidden])")

        # Two decided approvals for the history, one left waiting for the inbox.
        with server.client() as client:
            for session, decision in (("web:ana", "allow-once"), ("web:ben", "deny")):
                thread, _ = server.post_turn_in_background(session, "please echo")
                (row,) = _wait_pending(server, 1)
                client.post(f"/api/approvals/{row['id']}", json={"decision": decision})
                thread.join(WAIT_S)
        waiting, _ = server.post_turn_in_background("web:ana", "and once more")
        page.wait_for_selector("#inbox article.approval")
        page.wait_for_function("() => document.querySelectorAll('#history tr').length >= 2")
        page.screenshot(path=folder / "ui-approvals.png")

        page.click("#inbox article.approval button[data-decision=allow-always]")
        waiting.join(WAIT_S)

        gate.title = "Echo a weekly summary"  # a new request: the standing grant does not cover it
        page.click("#nav a[data-view=chat]")
        page.fill("#chat-key", "web:ana")
        page.click("#chat-session button")
        page.wait_for_selector("#chat-log .message.assistant")
        page.fill("#chat-input", "Echo the weekly summary, please.")
        page.press("#chat-input", "Enter")
        page.wait_for_selector("#chat-log .inline-approvals article.approval")
        page.screenshot(path=folder / "ui-chat.png")
        page.click("#chat-log .inline-approvals button[data-decision=allow-once]")
        page.wait_for_selector("#chat-log .turn-footer .chip.replied")

        page.click("#nav a[data-view=timeline]")
        page.click("#turns li:nth-child(2) a")
        page.wait_for_selector("#turn-detail .entries li")
        page.check("#only-active")
        page.screenshot(path=folder / "ui-timeline.png")

        page.click("#nav a[data-view=plugins]")
        page.wait_for_selector("#plugins article")
        page.screenshot(path=folder / "ui-plugins.png")

        page.click("#nav a[data-view=sessions]")
        page.click("#sessions button[data-session-key='web:ana']")
        page.wait_for_selector("#session-detail .transcript")
        page.screenshot(path=folder / "ui-sessions.png")

        page.click("#nav a[data-view=actions]")
        page.click("#actions button[data-action-id=word-count]")
        page.fill("#action-params", '{"text": "one two three"}')
        page.click("#action-detail button:has-text('Test')")
        page.wait_for_selector("#action-detail pre.output:has-text('ok')")
        page.screenshot(path=folder / "ui-actions.png")
        browser.close()
    return [folder / name for name in SHOTS]


def main(argv: list[str] | None = None) -> int:
    """``python -m tests.ui.screenshots [FOLDER]``."""
    args = sys.argv[1:] if argv is None else argv
    folder = Path(args[0]) if args else Path("docs/img")
    try:
        written = take(folder)
    except RuntimeError as exc:
        print(f"ui-screenshots: {exc}", file=sys.stderr)
        return 1
    for path in written:
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
