"""media-openai loaded from its entry point with agentplug's pytest fixtures, against a fake
OpenAI API on 127.0.0.1.

The fake server and the action runtime (``agentplug_host.gateway.actions``) are not covered by the
fixtures: the server is a fixture of this module, and the actions run with ``asyncio.run``
on the fixture host.
"""

from __future__ import annotations

import asyncio
import base64
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from agentplug import PluginHost, PluginRecord
from agentplug.actions.builtins.media import MediaProviders
from agentplug.actions.flow import FlowResult
from agentplug.core.errors import PluginLoadError
from agentplug.testing.pytest_plugin import PluginLoader
from agentplug_media_openai import PLUGIN_ID, OpenAIMediaProvider

KEY_ENV = "AGENTPLUG_TEST_MEDIA_OPENAI_KEY"
SECRET = "sk-test-not-a-real-key"
PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQ"
    "DwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
)
PNG_B64 = base64.b64encode(PNG).decode()


class FakeOpenAI:
    """Records requests; answers like the OpenAI API (or with ``fail_status``).

    ``image_answer`` (``"b64"`` or ``"url"``) and ``fail_status`` are read at each request,
    so a test sets them before it runs an action.
    """

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        self.image_answer = "b64"
        self.fail_status: int | None = None
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", "0"))
                body = json.loads(self.rfile.read(length))
                owner.requests.append(
                    {"path": self.path, "auth": self.headers.get("Authorization"), "body": body}
                )
                if owner.fail_status is not None:
                    payload = {"error": {"message": "Incorrect API key provided"}}
                    self._send(owner.fail_status, json.dumps(payload).encode(), "application/json")
                elif self.path == "/v1/images/generations":
                    item = (
                        {"b64_json": PNG_B64, "revised_prompt": "a lighthouse, dusk"}
                        if owner.image_answer == "b64"
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
        self._thread = threading.Thread(target=self.server.serve_forever, args=(0.05,), daemon=True)
        self._thread.start()
        self.running = True

    def stop(self) -> None:
        """Shut the server down (idempotent): its port stops answering."""
        if self.running:
            self.running = False
            self.server.shutdown()
            self.server.server_close()
            self._thread.join()


@pytest.fixture
def fake_api() -> Iterator[FakeOpenAI]:
    api = FakeOpenAI()
    try:
        yield api
    finally:
        api.stop()


@pytest.fixture(autouse=True)
def api_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEY_ENV, SECRET)


@pytest.fixture
def agentplug_config(fake_api: FakeOpenAI) -> dict[str, Any]:
    """Operator config: the plugin talks to ``fake_api`` with the key from ``KEY_ENV``."""
    config = {"base_url": fake_api.base_url, "api_key_env": KEY_ENV, "trust_env": False}
    return {"plugins": {"entries": {PLUGIN_ID: {"config": config}}}}


def media_config(**config: Any) -> pytest.MarkDecorator:
    """More ``plugins.entries.media-openai.config`` keys, merged over the module's config."""
    return pytest.mark.agentplug_config({"plugins": {"entries": {PLUGIN_ID: {"config": config}}}})


@pytest.fixture
def media_openai(agentplug_load: PluginLoader) -> PluginRecord:
    """The plugin, registered from its entry point like an installed plugin (not bundled)."""
    return agentplug_load(PLUGIN_ID)


def run_all(host: PluginHost, *messages: str) -> list[Any]:
    async def go() -> list[FlowResult]:
        await host.gateway.actions.load()
        return [await host.gateway.actions.run(m) for m in messages]

    flows = asyncio.run(go())
    assert all(f.result is not None for f in flows)
    return [f.result for f in flows]


def test_entry_point_registers_the_provider_in_the_media_service(
    media_openai: PluginRecord, agentplug_host: PluginHost
) -> None:
    assert agentplug_host.plugins == [media_openai]
    assert (media_openai.plugin_id, media_openai.bundled) == (PLUGIN_ID, False)
    media = agentplug_host.gateway.actions.get_service("media")
    assert isinstance(media, MediaProviders) and media.ids() == [PLUGIN_ID]
    assert isinstance(media.get(PLUGIN_ID), OpenAIMediaProvider)


@media_config(model="img-model", image_size="256x256")
def test_generate_image_turns_a_b64_answer_into_a_data_url(
    media_openai: PluginRecord, agentplug_host: PluginHost, fake_api: FakeOpenAI
) -> None:
    (b64,) = run_all(agentplug_host, 'GENERATE_MEDIA {"prompt": "a lighthouse at dusk"}')
    assert b64.success, b64.text
    attachment = b64.attachments[0]
    assert attachment.url == f"data:image/png;base64,{PNG_B64}"
    assert attachment.content_type == "image/png"
    assert attachment.description == "a lighthouse, dusk"
    assert fake_api.requests == [
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


def test_generate_image_returns_a_url_answer_as_is(
    media_openai: PluginRecord, agentplug_host: PluginHost, fake_api: FakeOpenAI
) -> None:
    fake_api.image_answer = "url"
    (url,) = run_all(agentplug_host, 'GENERATE_MEDIA {"prompt": "a cat"}')
    assert url.success and url.attachments[0].url == "https://files.example/img.png"


@media_config(voice="nova")
def test_generate_audio_speaks_the_prompt(
    media_openai: PluginRecord, agentplug_host: PluginHost, fake_api: FakeOpenAI
) -> None:
    (audio,) = run_all(
        agentplug_host, 'GENERATE_MEDIA {"prompt": "read this aloud", "mediaType": "audio"}'
    )
    assert audio.success
    expected = base64.b64encode(b"ID3fake-mp3-bytes").decode()
    assert audio.attachments[0].url == f"data:audio/mpeg;base64,{expected}"
    (request,) = fake_api.requests
    assert request["path"] == "/v1/audio/speech"
    assert request["body"] == {
        "model": "gpt-4o-mini-tts",
        "input": "read this aloud",
        "voice": "nova",
        "response_format": "mp3",
    }


def test_video_is_unsupported_and_nothing_is_sent(
    media_openai: PluginRecord, agentplug_host: PluginHost, fake_api: FakeOpenAI
) -> None:
    (video,) = run_all(agentplug_host, 'GENERATE_MEDIA {"prompt": "a video of waves"}')
    assert not video.success and video.data["reason"] == "unsupported_media_type"
    assert fake_api.requests == []


@media_config(vision_model="vision-x")
def test_analyze_image_sends_an_image_content_part(
    media_openai: PluginRecord, agentplug_host: PluginHost, fake_api: FakeOpenAI
) -> None:
    by_b64, by_url = run_all(
        agentplug_host,
        f'ANALYZE_IMAGE {{"imageBase64": "{PNG_B64}", "prompt": "what colour is it?"}}',
        'ANALYZE_IMAGE {"imageUrl": "https://example.com/cat.jpg"}',
    )
    assert by_b64.success and by_b64.text == "A tiny red pixel."
    assert by_url.success
    first, second = (r["body"] for r in fake_api.requests)
    assert first["model"] == "vision-x"
    assert first["messages"][0]["content"] == [
        {"type": "text", "text": "what colour is it?"},
        {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG_B64}"}},
    ]
    assert second["messages"][0]["content"][1]["image_url"]["url"] == "https://example.com/cat.jpg"


def test_api_errors_are_failed_results_without_the_key(
    media_openai: PluginRecord, agentplug_host: PluginHost, fake_api: FakeOpenAI
) -> None:
    fake_api.fail_status = 401
    (result,) = run_all(agentplug_host, 'GENERATE_MEDIA {"prompt": "a cat"}')
    assert not result.success
    assert "HTTP 401: Incorrect API key provided" in result.text
    assert SECRET not in result.text


def test_missing_api_key_names_the_environment_variable(
    media_openai: PluginRecord,
    agentplug_host: PluginHost,
    fake_api: FakeOpenAI,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv(KEY_ENV)
    (result,) = run_all(agentplug_host, 'GENERATE_MEDIA {"prompt": "a cat"}')
    assert not result.success and KEY_ENV in result.text
    assert fake_api.requests == []


def test_unreachable_api_is_a_failed_result(
    media_openai: PluginRecord, agentplug_host: PluginHost, fake_api: FakeOpenAI
) -> None:
    fake_api.stop()  # the configured base_url no longer answers
    (result,) = run_all(agentplug_host, 'GENERATE_MEDIA {"prompt": "a cat"}')
    assert not result.success and "failed" in result.text


@media_config(base_url="ftp://nowhere", colour="blue")
def test_invalid_config_fails_to_load_naming_the_key(
    agentplug_load: PluginLoader, agentplug_host: PluginHost
) -> None:
    with pytest.raises(PluginLoadError) as failed:
        agentplug_load(PLUGIN_ID)
    assert failed.value.plugin_id == PLUGIN_ID
    message = str(failed.value)
    assert f"plugins.entries.{PLUGIN_ID}.config.base_url" in message
    assert f"plugins.entries.{PLUGIN_ID}.config.colour" in message
    assert agentplug_host.plugins == []
