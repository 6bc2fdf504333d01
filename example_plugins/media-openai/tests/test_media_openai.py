"""media-openai loaded through its entry point, against a fake OpenAI API on 127.0.0.1."""

from __future__ import annotations

import asyncio
import base64
import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from agentplug import PluginHost
from agentplug.actions.flow import FlowResult
from agentplug.builtins.media import MediaProviders
from agentplug_media_openai import PLUGIN_ID, OpenAIMediaProvider

KEY_ENV = "AGENTPLUG_TEST_MEDIA_OPENAI_KEY"
SECRET = "sk-test-not-a-real-key"
PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQ"
    "DwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
)
PNG_B64 = base64.b64encode(PNG).decode()


class FakeOpenAI:
    """Records requests; answers like the OpenAI API (or with a configured error)."""

    def __init__(self, image_answer: str = "b64", fail_status: int | None = None) -> None:
        self.requests: list[dict[str, Any]] = []
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", "0"))
                body = json.loads(self.rfile.read(length))
                owner.requests.append(
                    {"path": self.path, "auth": self.headers.get("Authorization"), "body": body}
                )
                if fail_status is not None:
                    payload = {"error": {"message": "Incorrect API key provided"}}
                    self._send(fail_status, json.dumps(payload).encode(), "application/json")
                elif self.path == "/v1/images/generations":
                    item = (
                        {"b64_json": PNG_B64, "revised_prompt": "a lighthouse, dusk"}
                        if image_answer == "b64"
                        else {"url": "https://files.example/img.png"}
                    )
                    self._send(200, json.dumps({"data": [item]}).encode(), "application/json")
                elif self.path == "/v1/audio/speech":
                    self._send(200, b"ID3fake-mp3-bytes", "audio/mpeg")
                elif self.path == "/v1/chat/completions":
                    answer = {"choices": [{"message": {"content": "A tiny red pixel."}}]}
                    self._send(200, json.dumps(answer).encode(), "application/json")
                else:
                    self._send(404, b'{"error": {"message": "no such route"}}', "application/json")

            def _send(self, status: int, body: bytes, content_type: str) -> None:
                self.send_response(status)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:
                return None

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.base_url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"


@contextmanager
def fake_openai(**kwargs: Any) -> Iterator[FakeOpenAI]:
    api = FakeOpenAI(**kwargs)
    thread = threading.Thread(target=api.server.serve_forever, daemon=True)
    thread.start()
    try:
        yield api
    finally:
        api.server.shutdown()
        api.server.server_close()
        thread.join()


def make_host(config: dict[str, Any]) -> PluginHost:
    entries = {PLUGIN_ID: {"config": config}}
    host = PluginHost({"plugins": {"allow": [PLUGIN_ID], "entries": entries}})
    host.load_installed(use_cache=False)
    return host


def plugin_config(api: FakeOpenAI, **extra: Any) -> dict[str, Any]:
    return {"base_url": api.base_url, "api_key_env": KEY_ENV, "trust_env": False, **extra}


def run_all(host: PluginHost, *messages: str) -> list[Any]:
    async def go() -> list[FlowResult]:
        await host.actions.load()
        return [await host.actions.run(m) for m in messages]

    flows = asyncio.run(go())
    assert all(f.result is not None for f in flows)
    return [f.result for f in flows]


@pytest.fixture(autouse=True)
def api_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEY_ENV, SECRET)


def test_entry_point_registers_the_provider_in_the_media_service() -> None:
    with fake_openai() as api:
        host = make_host(plugin_config(api))
    assert host.load_errors == []
    media = host.actions.get_service("media")
    assert isinstance(media, MediaProviders) and media.ids() == [PLUGIN_ID]
    assert isinstance(media.get(PLUGIN_ID), OpenAIMediaProvider)


def test_generate_image_from_b64_and_url_answers() -> None:
    with fake_openai() as api:
        host = make_host(plugin_config(api, model="img-model", image_size="256x256"))
        (b64,) = run_all(host, 'GENERATE_MEDIA {"prompt": "a lighthouse at dusk"}')
    assert b64.success, b64.text
    attachment = b64.attachments[0]
    assert attachment.url == f"data:image/png;base64,{PNG_B64}"
    assert attachment.content_type == "image/png"
    assert attachment.description == "a lighthouse, dusk"
    assert api.requests == [
        {
            "path": "/v1/images/generations",
            "auth": f"Bearer {SECRET}",
            "body": {
                "model": "img-model",
                "prompt": "a lighthouse at dusk",
                "n": 1,
                "size": "256x256",
            },
        }
    ]
    with fake_openai(image_answer="url") as api:
        host = make_host(plugin_config(api))
        (url,) = run_all(host, 'GENERATE_MEDIA {"prompt": "a cat"}')
    assert url.success and url.attachments[0].url == "https://files.example/img.png"


def test_generate_audio_speaks_the_prompt_and_video_is_unsupported() -> None:
    with fake_openai() as api:
        host = make_host(plugin_config(api, voice="nova"))
        audio, video = run_all(
            host,
            'GENERATE_MEDIA {"prompt": "read this aloud", "mediaType": "audio"}',
            'GENERATE_MEDIA {"prompt": "a video of waves"}',
        )
    assert audio.success
    expected = base64.b64encode(b"ID3fake-mp3-bytes").decode()
    assert audio.attachments[0].url == f"data:audio/mpeg;base64,{expected}"
    assert api.requests[0]["path"] == "/v1/audio/speech"
    assert api.requests[0]["body"] == {
        "model": "gpt-4o-mini-tts",
        "input": "read this aloud",
        "voice": "nova",
        "response_format": "mp3",
    }
    assert not video.success and video.data["reason"] == "unsupported_media_type"
    assert len(api.requests) == 1  # nothing was sent for the video


def test_analyze_image_sends_an_image_content_part() -> None:
    with fake_openai() as api:
        host = make_host(plugin_config(api, vision_model="vision-x"))
        by_b64, by_url = run_all(
            host,
            f'ANALYZE_IMAGE {{"imageBase64": "{PNG_B64}", "prompt": "what colour is it?"}}',
            'ANALYZE_IMAGE {"imageUrl": "https://example.com/cat.jpg"}',
        )
    assert by_b64.success and by_b64.text == "A tiny red pixel."
    assert by_url.success
    first, second = (r["body"] for r in api.requests)
    assert first["model"] == "vision-x"
    assert first["messages"][0]["content"] == [
        {"type": "text", "text": "what colour is it?"},
        {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG_B64}"}},
    ]
    assert second["messages"][0]["content"][1]["image_url"]["url"] == "https://example.com/cat.jpg"


def test_api_errors_are_failed_results_without_the_key() -> None:
    with fake_openai(fail_status=401) as api:
        host = make_host(plugin_config(api))
        (result,) = run_all(host, 'GENERATE_MEDIA {"prompt": "a cat"}')
    assert not result.success
    assert "HTTP 401: Incorrect API key provided" in result.text
    assert SECRET not in result.text


def test_missing_api_key_names_the_environment_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(KEY_ENV)
    with fake_openai() as api:
        host = make_host(plugin_config(api))
        (result,) = run_all(host, 'GENERATE_MEDIA {"prompt": "a cat"}')
    assert not result.success and KEY_ENV in result.text
    assert api.requests == []


def test_unreachable_api_is_a_failed_result() -> None:
    with fake_openai() as api:
        config = plugin_config(api)
    host = make_host(config)  # the server is gone now
    (result,) = run_all(host, 'GENERATE_MEDIA {"prompt": "a cat"}')
    assert not result.success and "failed" in result.text


def test_invalid_config_fails_to_load_naming_the_key() -> None:
    host = make_host({"base_url": "ftp://nowhere", "colour": "blue"})
    assert len(host.load_errors) == 1
    message = str(host.load_errors[0])
    assert f"plugins.entries.{PLUGIN_ID}.config.base_url" in message
    assert f"plugins.entries.{PLUGIN_ID}.config.colour" in message
