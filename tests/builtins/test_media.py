"""GENERATE_MEDIA, ANALYZE_IMAGE and PLAY_EMOTE, driven end to end through the action flow."""

from __future__ import annotations

import asyncio
import json
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from agentplug import PluginHost
from agentplug.actions.builtins.media import (
    MEDIA_SERVICE,
    MediaProviders,
    MediaResult,
    MediaType,
    UnsupportedMediaType,
    infer_media_type,
    load_emote_catalogue,
    media_providers,
)
from agentplug.actions.flow import FlowResult
from agentplug.actions.model import Attachment, Message
from agentplug.core.errors import ConfigError


def make_host(actions: dict[str, Any] | None = None) -> PluginHost:
    return PluginHost({"actions": actions or {}})


async def run(host: PluginHost, message: Message | str) -> FlowResult:
    await host.gateway.actions.load()
    flow: FlowResult = await host.gateway.actions.run(message)
    return flow


def result_of(flow: FlowResult) -> Any:
    assert flow.result is not None, flow.outcome
    return flow.result


class FakeProvider:
    def __init__(self, kinds: tuple[MediaType, ...] = ("image", "video", "audio")) -> None:
        self.kinds = kinds
        self.generated: list[tuple[str, MediaType]] = []
        self.analyzed: list[dict[str, Any]] = []

    async def generate(self, prompt: str, media_type: MediaType) -> MediaResult:
        if media_type not in self.kinds:
            raise UnsupportedMediaType(f"only {', '.join(self.kinds)}")
        self.generated.append((prompt, media_type))
        return MediaResult(
            attachments=[Attachment(url=f"https://cdn.example/{media_type}/1")],
            text="(fake)",
        )

    async def analyze_image(
        self, *, prompt: str, image_url: str | None = None, image_base64: str | None = None
    ) -> str:
        self.analyzed.append({"prompt": prompt, "url": image_url, "b64": image_base64})
        return "A red square."


# ---------------------------------------------------------------------------
# No provider


def test_media_actions_without_a_provider_say_how_to_get_one() -> None:
    host = make_host()

    async def go() -> list[FlowResult]:
        await host.gateway.actions.load()
        return [
            await host.gateway.actions.run('GENERATE_MEDIA {"prompt": "a cat in a hat"}'),
            await host.gateway.actions.run(
                'ANALYZE_IMAGE {"imageUrl": "https://example.com/a.png"}'
            ),
        ]

    for flow in asyncio.run(go()):
        result = result_of(flow)
        assert not result.success
        assert result.text.startswith("No media provider is configured: install one, e.g. ")
        assert "agentplug-media-openai" in result.text
        assert result.data["reason"] == "no_provider"
    assert isinstance(host.gateway.actions.get_service(MEDIA_SERVICE), MediaProviders)


# ---------------------------------------------------------------------------
# GENERATE_MEDIA


def test_generate_media_infers_the_type_or_takes_the_forced_one() -> None:
    provider = FakeProvider()
    host = make_host()
    media_providers(host.gateway.actions).add(
        "fake", provider
    )  # before load: order does not matter

    async def go() -> list[FlowResult]:
        await host.gateway.actions.load()
        return [
            await host.gateway.actions.run('GENERATE_MEDIA {"prompt": "a lighthouse at dusk"}'),
            await host.gateway.actions.run('GENERATE_MEDIA {"prompt": "a song about the sea"}'),
            await host.gateway.actions.run(
                'GENERATE_MEDIA {"prompt": "a song about the sea", "mediaType": "video"}'
            ),
        ]

    image, audio, video = (result_of(f) for f in asyncio.run(go()))
    assert provider.generated == [
        ("a lighthouse at dusk", "image"),
        ("a song about the sea", "audio"),
        ("a song about the sea", "video"),
    ]
    assert image.success and image.attachments[0].url == "https://cdn.example/image/1"
    assert image.data == {"provider": "fake", "mediaType": "image", "inferred": True}
    assert audio.data["mediaType"] == "audio"
    assert video.data == {"provider": "fake", "mediaType": "video", "inferred": False}
    assert "(fake)" in video.text


def test_generate_media_reports_an_unsupported_type_and_a_bad_media_type() -> None:
    host = make_host()
    media_providers(host.gateway.actions).add("images-only", FakeProvider(("image",)))

    async def go() -> list[FlowResult]:
        await host.gateway.actions.load()
        return [
            await host.gateway.actions.run('GENERATE_MEDIA {"prompt": "a short video of rain"}'),
            await host.gateway.actions.run(
                'GENERATE_MEDIA {"prompt": "x", "mediaType": "hologram"}'
            ),
        ]

    unsupported, bad = (result_of(f) for f in asyncio.run(go()))
    assert not unsupported.success
    assert unsupported.data["reason"] == "unsupported_media_type"
    assert "'images-only' cannot generate video" in unsupported.text
    assert not bad.success and "mediaType" in bad.text


def test_configured_provider_must_be_registered() -> None:
    host = make_host({"media": {"provider": "fal"}})
    media_providers(host.gateway.actions).add("fake", FakeProvider())
    result = result_of(asyncio.run(run(host, 'GENERATE_MEDIA {"prompt": "a dog"}')))
    assert not result.success
    assert "actions.media.provider names the media provider 'fal'" in result.text
    assert result.data["registered"] == ["fake"]


def test_configured_provider_is_chosen_among_several() -> None:
    first, second = FakeProvider(), FakeProvider()
    host = make_host({"media": {"provider": "second"}})
    media_providers(host.gateway.actions).add("first", first)
    media_providers(host.gateway.actions).add("second", second)
    flow = asyncio.run(run(host, 'GENERATE_MEDIA {"prompt": "a dog"}'))
    assert flow.ok and second.generated and not first.generated


def test_a_failing_provider_is_a_failed_result() -> None:
    class Failing(FakeProvider):
        async def generate(self, prompt: str, media_type: MediaType) -> MediaResult:
            raise RuntimeError("quota exceeded")

    host = make_host()
    media_providers(host.gateway.actions).add("failing", Failing())
    result = result_of(asyncio.run(run(host, 'GENERATE_MEDIA {"prompt": "a dog"}')))
    assert not result.success
    assert "'failing' failed to generate the image: quota exceeded" in result.text


def test_a_plugin_registers_its_provider_from_register_api() -> None:
    provider = FakeProvider()

    class MediaPlugin:
        plugin_id = "fake-media"

        def register(self, api: Any) -> None:
            media_providers(api.host.gateway.actions).add(api.plugin_id, provider)

    host = make_host()
    host.register(MediaPlugin())
    flow = asyncio.run(run(host, 'GENERATE_MEDIA {"prompt": "a podcast intro jingle"}'))
    assert flow.ok
    assert provider.generated == [("a podcast intro jingle", "audio")]
    assert result_of(flow).data["provider"] == "fake-media"


def test_infer_media_type() -> None:
    assert infer_media_type("a picture of a band playing music") == "image"
    assert infer_media_type("music for a photo slideshow") == "audio"
    assert infer_media_type("Animate a bouncing ball") == "video"
    assert infer_media_type("a sign that says hello") == "image"


# ---------------------------------------------------------------------------
# ANALYZE_IMAGE

PNG_B64 = (
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQ"
    "DwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
)


def test_analyze_image_passes_the_image_and_prompt_to_the_provider() -> None:
    provider = FakeProvider()
    host = make_host()
    media_providers(host.gateway.actions).add("fake", provider)

    async def go() -> list[FlowResult]:
        await host.gateway.actions.load()
        return [
            await host.gateway.actions.run(
                f'ANALYZE_IMAGE {{"imageBase64": "{PNG_B64}", "prompt": "what colour?"}}'
            ),
            await host.gateway.actions.run(
                'ANALYZE_IMAGE {"imageUrl": "https://example.com/cat.jpg"}'
            ),
        ]

    b64, url = (result_of(f) for f in asyncio.run(go()))
    assert b64.success and b64.text == "A red square."
    assert url.success
    assert provider.analyzed == [
        {"prompt": "what colour?", "url": None, "b64": PNG_B64},
        {
            "prompt": "Describe this image in detail.",
            "url": "https://example.com/cat.jpg",
            "b64": None,
        },
    ]


@pytest.mark.parametrize(
    ("payload", "expected"),
    [
        ('{"prompt": "what is it"}', "Missing required parameter: imageUrl or imageBase64"),
        (
            f'{{"imageUrl": "https://e.com/a.png", "imageBase64": "{PNG_B64}"}}',
            "not both",
        ),
        ('{"imageBase64": "not base64 at all!"}', "not valid base64"),
        ('{"imageUrl": "file:///etc/passwd"}', "http(s) URL or a data: URL"),
    ],
)
def test_analyze_image_rejects_bad_input_before_calling_the_provider(
    payload: str, expected: str
) -> None:
    provider = FakeProvider()
    host = make_host()
    media_providers(host.gateway.actions).add("fake", provider)
    result = result_of(asyncio.run(run(host, f"ANALYZE_IMAGE {payload}")))
    assert not result.success and expected in result.text
    assert provider.analyzed == []


# ---------------------------------------------------------------------------
# PLAY_EMOTE


class AvatarServer:
    """A local fake avatar API on 127.0.0.1 recording POSTed JSON bodies."""

    def __init__(self, status: int = 200, location: str | None = None) -> None:
        self.bodies: list[dict[str, Any]] = []
        self.paths: list[str] = []
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", "0"))
                owner.paths.append(self.path)
                owner.bodies.append(json.loads(self.rfile.read(length)))
                body = b'{"ok": true}' if status < 400 else b"avatar crashed"
                self.send_response(status)
                if location:
                    self.send_header("Location", location)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:
                return None

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/api/avatar/emote"


@contextmanager
def avatar_server(status: int = 200, location: str | None = None) -> Iterator[AvatarServer]:
    server = AvatarServer(status, location)
    thread = threading.Thread(target=server.server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.server.shutdown()
        server.server.server_close()
        thread.join()


def test_play_emote_posts_the_catalogue_entry_to_the_avatar_api() -> None:
    with avatar_server() as server:
        host = make_host({"avatar": {"url": server.url}})

        async def go() -> list[FlowResult]:
            await host.gateway.actions.load()
            return [
                await host.gateway.actions.run(
                    Message(text='PLAY_EMOTE {"emote": "Wave"}', room_id="room-1")
                ),
                await host.gateway.actions.run("PLAY_EMOTE emote=party"),  # an alias of dance
            ]

        wave, dance = (result_of(f) for f in asyncio.run(go()))
    assert wave.success and dance.success
    assert wave.text == "Playing the Wave emote."
    assert server.paths == ["/api/avatar/emote", "/api/avatar/emote"]
    assert server.bodies[0] == {
        "emote": "wave",
        "name": "Wave",
        "duration": 2.0,
        "loop": False,
        "roomId": "room-1",
    }
    assert server.bodies[1]["emote"] == "dance"
    assert wave.data == {"emote": "wave", "url": server.url, "status": 200}


def test_unknown_emote_lists_close_matches_and_posts_nothing() -> None:
    with avatar_server() as server:
        host = make_host({"avatar": {"url": server.url}})
        result = result_of(asyncio.run(run(host, "PLAY_EMOTE emote=dnace")))
    assert not result.success
    assert result.data["reason"] == "unknown_emote"
    assert "dance" in result.data["close_matches"]
    assert "Did you mean: dance" in result.text
    assert server.bodies == []


def test_avatar_endpoint_down_is_a_failed_result() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    url = f"http://127.0.0.1:{port}/api/avatar/emote"  # nothing listens there any more
    host = make_host({"avatar": {"url": url, "timeoutSeconds": 5}})
    result = result_of(asyncio.run(run(host, "PLAY_EMOTE emote=wave")))
    assert not result.success
    assert result.data["reason"] == "avatar_unreachable"
    assert "unreachable" in result.text and url in result.text


def test_avatar_endpoint_error_and_redirect_are_failed_results() -> None:
    with avatar_server(status=500) as server:
        host = make_host({"avatar": {"url": server.url}})
        error = result_of(asyncio.run(run(host, "PLAY_EMOTE emote=wave")))
    assert not error.success and error.data["reason"] == "avatar_error"
    assert "HTTP 500: avatar crashed" in error.text

    with avatar_server(status=302, location="http://169.254.169.254/") as server:
        host = make_host({"avatar": {"url": server.url}})
        redirect = result_of(asyncio.run(run(host, "PLAY_EMOTE emote=wave")))
    assert not redirect.success and redirect.data["reason"] == "avatar_redirect"


def test_play_emote_without_an_avatar_endpoint() -> None:
    result = result_of(asyncio.run(run(make_host(), "PLAY_EMOTE emote=wave")))
    assert not result.success and "actions.avatar.url" in result.text


def test_emote_catalogue_can_be_overridden_inline_or_by_file(tmp_path: Path) -> None:
    catalogue = tmp_path / "emotes.json"
    catalogue.write_text(json.dumps({"emotes": [{"id": "moonwalk", "aliases": ["mj"]}]}))
    with avatar_server() as server:
        from_file = make_host(
            {"avatar": {"url": server.url}, "emotes": {"catalogue": str(catalogue)}}
        )
        inline = make_host(
            {"avatar": {"url": server.url}, "emotes": {"catalogue": [{"id": "salute"}]}}
        )
        mj = result_of(asyncio.run(run(from_file, "PLAY_EMOTE emote=MJ")))
        wave = result_of(asyncio.run(run(from_file, "PLAY_EMOTE emote=wave")))
        salute = result_of(asyncio.run(run(inline, "PLAY_EMOTE emote=salute")))
    assert mj.success and server.bodies[0] == {"emote": "moonwalk"}
    assert not wave.success  # the override replaces the built-in catalogue
    assert salute.success


def test_invalid_media_settings_name_the_key(tmp_path: Path) -> None:
    cases: list[tuple[dict[str, Any], str]] = [
        ({"emotes": {"catalogue": str(tmp_path / "missing.json")}}, "actions.emotes.catalogue"),
        ({"emotes": {"catalogue": [{"id": "bad id!"}]}}, "actions.emotes.catalogue.emotes.0.id"),
        ({"avatar": {"url": "ftp://127.0.0.1/x"}}, "actions.avatar.url"),
        ({"media": {"timeoutSeconds": 0}}, "actions.media.timeoutSeconds"),
    ]
    for actions, key in cases:
        with pytest.raises(ConfigError) as info:
            asyncio.run(make_host(actions).actions.load())
        assert key in [k for k, _ in info.value.issues], info.value


def test_builtin_catalogue_loads() -> None:
    catalogue = load_emote_catalogue()
    assert {"wave", "dance", "bow"} <= set(catalogue.ids())
    assert catalogue.find("Shake Head") is not None
