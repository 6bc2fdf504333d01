"""Rules the control room's files and plumbing keep, checked without a browser: no inline
script or markup sinks, loopback only, bounded event streams, the streaming seam."""

from __future__ import annotations

import asyncio
import json
import re
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("starlette")

from agentplug.api.page import static_files

from tests.ui.server import UiServer

STATIC = Path(__file__).parents[2] / "framework" / "agentplug" / "api" / "static"


class _Tags(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.script_text = ""

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))
        self._in_script = tag == "script"

    def handle_endtag(self, tag: str) -> None:
        self._in_script = False

    def handle_data(self, data: str) -> None:
        if getattr(self, "_in_script", False):
            self.script_text += data


def test_the_page_has_no_inline_script_handler_or_style() -> None:
    parser = _Tags()
    parser.feed((STATIC / "index.html").read_text(encoding="utf-8"))
    scripts = [attrs for tag, attrs in parser.tags if tag == "script"]
    assert scripts == [{"type": "module", "src": "app.js"}] and parser.script_text.strip() == ""
    for tag, attrs in parser.tags:
        assert not [a for a in attrs if a.startswith("on") or a == "style"], (tag, attrs)


SINKS = re.compile(
    r"innerHTML|outerHTML|insertAdjacentHTML|document\.write|\beval\(|new Function|"
    r"setAttribute\(\s*[\"']on|createContextualFragment|DOMParser"
)


@pytest.mark.parametrize("script", sorted(p.name for p in STATIC.glob("*.js")))
def test_no_script_of_the_page_uses_an_html_sink(script: str) -> None:
    text = (STATIC / script).read_text(encoding="utf-8")
    assert SINKS.findall(text) == []


def test_every_file_of_the_page_is_served_from_the_package() -> None:
    served = static_files()
    assert sorted(served) == sorted(p.name for p in STATIC.iterdir())
    assert served["app.js"].media_type.startswith("text/javascript")


def test_the_page_is_not_served_on_a_socket_bound_to_another_address(tmp_path: Path) -> None:
    """An embedding host may serve the app itself: on a non-loopback bind the page says no
    (the ``Host`` header alone could be a loopback name on any bind)."""
    with UiServer(tmp_path) as server:
        answered = server.call(_get(server.app, "/ui/", server=("10.1.2.3", 8731)))
        on_loopback = server.call(_get(server.app, "/ui/", server=("127.0.0.1", 8731)))
    assert answered[0] == 403 and b"loopback" in answered[1]
    assert on_loopback[0] == 200


async def _get(app: Any, path: str, *, server: tuple[str, int]) -> tuple[int, bytes]:
    """Call the ASGI app with a request as a server bound to ``server`` would pass it."""
    scope = {
        "type": "http",
        "asgi": {"version": "3.0", "spec_version": "2.4"},
        "http_version": "1.1",
        "method": "GET",
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "root_path": "",
        "headers": [(b"host", b"127.0.0.1:8731")],
        "client": ("127.0.0.1", 50000),
        "server": server,
    }
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    await app(scope, receive, send)
    body = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
    return sent[0]["status"], body


def test_event_streams_past_the_limit_are_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from agentplug.api import events

    monkeypatch.setattr(events, "MAX_STREAMS", 1)
    with (
        UiServer(tmp_path) as server,
        server.client() as client,
        client.stream("GET", "/api/events") as first,
    ):
        assert first.status_code == 200
        lines = first.iter_lines()  # kept: a dropped iterator closes the connection
        assert next(lines).startswith("retry:")
        second = client.get("/api/events")
        assert second.status_code == 429 and "limit is 1" in second.json()["error"]


def test_a_stream_that_falls_behind_is_closed_and_its_events_dropped() -> None:
    from agentplug.api.events import QUEUE_SIZE, EventHub
    from agentplug.gateway import Gateway

    async def scenario() -> list[str]:
        hub = EventHub(Gateway({}))
        queue = hub._open()
        for index in range(QUEUE_SIZE + 5):
            hub.publish("turn_ended", {"n": index})
        frames = [frame async for frame in hub._frames(queue)]
        await hub.aclose()
        return frames

    frames = asyncio.run(scenario())
    assert frames == ["retry: 1000\n\n"]  # closed at once: the page reconnects afresh


def test_a_streamed_turn_forwards_the_runners_text_deltas_in_order(tmp_path: Path) -> None:
    with (
        UiServer(tmp_path, responses=["three little words"]) as server,
        server.client() as client,
        client.stream("POST", "/api/sessions/s1/messages/stream", json={"content": "hi"}) as stream,
    ):
        lines = [line for line in stream.iter_lines() if line]
    kinds = [line[6:].strip() for line in lines if line.startswith("event:")]
    data = [json.loads(line[5:]) for line in lines if line.startswith("data:")]
    assert kinds[0] == "started" and kinds[-1] == "final" and "delta" in kinds
    deltas = [d["text"] for k, d in zip(kinds, data, strict=True) if k == "delta"]
    assert "".join(deltas) == "three little words" == data[-1]["reply"]
    assert kinds.index("final") > max(i for i, k in enumerate(kinds) if k == "delta")
