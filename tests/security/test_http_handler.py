"""The ``http`` custom-action handler: templating, request shape and result mapping.

Requests go to a real echo server on 127.0.0.1 that the SSRF policy allowlists by host:port.
"""

from __future__ import annotations

import asyncio
import json
import socket
import threading
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

import pydantic
import pytest
from agentplug.actions.handler_output import HandlerOutput
from agentplug.actions.http_handler import (
    HttpHandlerDef,
    render_body,
    render_url,
    run_http_handler,
)
from agentplug.security.ssrf import SSRFPolicy


@dataclass
class Received:
    """What the echo server saw for one request."""

    method: str
    path: str
    headers: dict[str, str]
    body: bytes


class EchoServer:
    """Records requests; ``/status/<n>`` answers n, ``/redirect`` answers 302 to loopback,
    ``/drip`` sends 40 body bytes one every 0.3 s (``dripped`` counts those written)."""

    def __init__(self) -> None:
        self.requests: list[Received] = []
        self.dripped = 0
        self.drip_over = threading.Event()
        owner = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: object) -> None:
                return

            def _handle(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                headers = {k.lower(): v for k, v in self.headers.items()}
                owner.requests.append(Received(self.command, self.path, headers, body))
                path = urlsplit(self.path).path
                status, extra, payload = 200, {}, f"echo {self.command} {self.path}".encode()
                if path.startswith("/status/"):
                    status = int(path.rsplit("/", 1)[1])
                    payload = f"status {status}".encode()
                elif path == "/redirect":
                    status, extra = 302, {"Location": f"http://127.0.0.1:{owner.port}/secret"}
                elif path == "/big":
                    payload = b"x" * 5000
                if path == "/drip":
                    self._drip()
                    return
                self.send_response(status)
                for key, value in extra.items():
                    self.send_header(key, value)
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(payload)

            def _drip(self) -> None:
                owner.dripped = 0
                self.send_response(200)
                self.send_header("Content-Length", "40")
                self.end_headers()
                try:
                    for _ in range(40):
                        self.wfile.write(b"d")
                        self.wfile.flush()
                        owner.dripped += 1
                        time.sleep(0.3)
                except (BrokenPipeError, ConnectionResetError):
                    pass
                finally:
                    owner.drip_over.set()

            do_GET = do_POST = do_HEAD = do_PUT = do_DELETE = _handle

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.port: int = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def policy(self, **extra: float) -> SSRFPolicy:
        return SSRFPolicy(allow_hosts=[f"127.0.0.1:{self.port}"], **extra)

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture(scope="module")
def echo() -> Iterator[EchoServer]:
    server = EchoServer()
    yield server
    server.close()


def _run(
    echo: EchoServer,
    handler: Mapping[str, object],
    params: dict[str, str],
    declared: tuple[str, ...] = ("q",),
    policy: SSRFPolicy | None = None,
) -> HandlerOutput:
    defn = HttpHandlerDef.model_validate(handler)
    return asyncio.run(run_http_handler(defn, params, declared, policy=policy or echo.policy()))


# ------------------------------------------------------------------------------------------
# Definition model
# ------------------------------------------------------------------------------------------


def test_definition_accepts_the_seed_json_unchanged() -> None:
    seed = json.loads(
        """{
          "type": "http",
          "method": "POST",
          "url": "https://api.example.com/data/{{query}}",
          "headers": {"Authorization": "Bearer sk-xxx", "Content-Type": "application/json"},
          "bodyTemplate": "{\\"search\\": \\"{{query}}\\"}"
        }"""
    )
    defn = HttpHandlerDef.model_validate(seed)
    assert defn.method == "POST"
    assert defn.url == "https://api.example.com/data/{{query}}"
    assert defn.headers == {"Authorization": "Bearer sk-xxx", "Content-Type": "application/json"}
    assert defn.body_template == '{"search": "{{query}}"}'


def test_definition_method_is_normalised_to_upper_case() -> None:
    defn = HttpHandlerDef.model_validate({"type": "http", "method": "post", "url": "http://x/"})
    assert defn.method == "POST"


def test_definition_rejects_unknown_method_with_the_allowed_list() -> None:
    with pytest.raises(pydantic.ValidationError, match="GET, HEAD"):
        HttpHandlerDef.model_validate({"type": "http", "method": "TRACE", "url": "http://x/"})


def test_definition_rejects_other_handler_types() -> None:
    with pytest.raises(pydantic.ValidationError):
        HttpHandlerDef.model_validate({"type": "shell", "url": "http://x/"})


# ------------------------------------------------------------------------------------------
# Templating
# ------------------------------------------------------------------------------------------


def test_url_params_are_uri_component_encoded() -> None:
    url = render_url("https://h/p/{{q}}?x={{q}}", {"q": "a b/c?d&e=f#g"}, {"q"})
    assert url == "https://h/p/a%20b%2Fc%3Fd%26e%3Df%23g?x=a%20b%2Fc%3Fd%26e%3Df%23g"


def test_url_encoding_keeps_the_characters_encode_uri_component_keeps() -> None:
    assert render_url("{{q}}", {"q": "AZaz09-_.!~*'()"}, {"q"}) == "AZaz09-_.!~*'()"


def test_url_encoding_uses_utf8_percent_escapes() -> None:
    assert render_url("{{q}}", {"q": "é☃"}, {"q"}) == "%C3%A9%E2%98%83"


def test_url_param_cannot_inject_a_host_or_path(echo: EchoServer) -> None:
    out = _run(echo, {"url": echo.base + "/items/{{q}}"}, {"q": "@evil.test/../admin"})
    assert out.ok
    assert echo.requests[-1].path == "/items/%40evil.test%2F..%2Fadmin"


def test_body_params_are_inserted_raw() -> None:
    body = render_body('{"search": "{{q}}"}', {"q": 'a "b" & c/d'}, {"q"})
    assert body == '{"search": "a "b" & c/d"}'


def test_undeclared_placeholders_are_left_untouched() -> None:
    params = {"q": "v", "secret": "s3cr3t"}
    assert render_url("/{{q}}/{{secret}}", params, {"q"}) == "/v/{{secret}}"
    assert render_body("{{q}} {{secret}}", params, {"q"}) == "v {{secret}}"


def test_substituted_values_are_not_expanded_again() -> None:
    params = {"a": "{{b}}", "b": "B"}
    assert render_body("{{a}}-{{b}}", params, {"a", "b"}) == "{{b}}-B"


def test_declared_parameter_without_a_value_renders_empty() -> None:
    assert render_url("/x/{{q}}", {}, {"q"}) == "/x/"


# ------------------------------------------------------------------------------------------
# Request shape
# ------------------------------------------------------------------------------------------


def test_content_type_defaults_to_json_when_a_body_is_sent(echo: EchoServer) -> None:
    handler = {"method": "POST", "url": echo.base + "/", "bodyTemplate": '{"q": "{{q}}"}'}
    out = _run(echo, handler, {"q": "hi"})
    assert out.ok
    assert echo.requests[-1].headers["content-type"] == "application/json"
    assert echo.requests[-1].body == b'{"q": "hi"}'


def test_explicit_content_type_is_kept(echo: EchoServer) -> None:
    handler = {
        "method": "PUT",
        "url": echo.base + "/",
        "headers": {"content-type": "text/plain"},
        "bodyTemplate": "{{q}}",
    }
    _run(echo, handler, {"q": "raw"})
    assert echo.requests[-1].headers["content-type"] == "text/plain"


def test_configured_headers_are_sent(echo: EchoServer) -> None:
    handler = {"url": echo.base + "/", "headers": {"Authorization": "Bearer sk-test"}}
    _run(echo, handler, {})
    assert echo.requests[-1].headers["authorization"] == "Bearer sk-test"


def test_get_sends_no_body_even_with_a_body_template(echo: EchoServer) -> None:
    _run(echo, {"method": "GET", "url": echo.base + "/", "bodyTemplate": "{{q}}"}, {"q": "x"})
    sent = echo.requests[-1]
    assert sent.method == "GET"
    assert sent.body == b""
    assert "content-type" not in sent.headers


def test_head_sends_no_body_even_with_a_body_template(echo: EchoServer) -> None:
    _run(echo, {"method": "HEAD", "url": echo.base + "/", "bodyTemplate": "{{q}}"}, {"q": "x"})
    sent = echo.requests[-1]
    assert sent.method == "HEAD"
    assert sent.body == b""


# ------------------------------------------------------------------------------------------
# Result mapping
# ------------------------------------------------------------------------------------------


def test_2xx_response_is_ok_with_the_body_as_output(echo: EchoServer) -> None:
    out = _run(echo, {"url": echo.base + "/hello"}, {})
    assert out == HandlerOutput(ok=True, output="echo GET /hello")


@pytest.mark.parametrize("status", [404, 500])
def test_non_2xx_response_is_not_ok_but_keeps_the_body(echo: EchoServer, status: int) -> None:
    out = _run(echo, {"url": echo.base + f"/status/{status}"}, {})
    assert out == HandlerOutput(ok=False, output=f"status {status}")


def test_redirect_is_blocked_and_not_followed(echo: EchoServer) -> None:
    out = _run(echo, {"url": echo.base + "/redirect"}, {})
    assert out.ok is False
    assert "Redirect blocked" in out.output
    assert echo.requests[-1].path == "/redirect"


def test_internal_target_is_blocked_with_a_clear_message(echo: EchoServer) -> None:
    before = len(echo.requests)
    out = _run(echo, {"url": echo.base + "/"}, {}, policy=SSRFPolicy())
    assert out.ok is False
    assert out.output.startswith("Blocked by SSRF protection")
    assert "loopback" in out.output
    assert len(echo.requests) == before


def test_network_error_is_a_failed_output_with_the_reason(echo: EchoServer) -> None:
    with socket.socket() as probe:  # a port that is certainly closed once released
        probe.bind(("127.0.0.1", 0))
        closed_port = probe.getsockname()[1]
    policy = SSRFPolicy(allow_hosts=[f"127.0.0.1:{closed_port}"])
    out = _run(echo, {"url": f"http://127.0.0.1:{closed_port}/"}, {}, policy=policy)
    assert out.ok is False
    assert "failed" in out.output
    assert "127.0.0.1" in out.output


def test_long_output_is_bounded_and_marked_truncated(echo: EchoServer) -> None:
    out = _run(echo, {"url": echo.base + "/big"}, {}, policy=echo.policy(max_response_bytes=100))
    assert out.output == "x" * 100 + "\n[response truncated at 100 bytes]"


def test_a_url_over_the_length_limit_is_reported_as_too_long_not_as_an_ssrf_block(
    echo: EchoServer,
) -> None:
    before = len(echo.requests)
    out = _run(echo, {"url": echo.base + "/search?q={{q}}"}, {"q": "a" * 70_000})
    assert out.ok is False
    assert "SSRF" not in out.output and "allowHosts" not in out.output
    assert "URL too long" in out.output and "65536" in out.output
    assert len(out.output) < 1000  # the message does not quote the whole URL
    assert len(echo.requests) == before


def test_a_slow_drip_cannot_keep_an_http_action_past_its_timeout(echo: EchoServer) -> None:
    echo.drip_over.clear()
    out = _run(echo, {"url": echo.base + "/drip"}, {}, policy=echo.policy(timeout_seconds=0.5))
    assert out.ok is False and "timed out after 0.5 s" in out.output
    assert echo.drip_over.wait(30)
    assert echo.dripped < 40


def test_handler_output_is_frozen() -> None:
    out = HandlerOutput(ok=True, output="x")
    with pytest.raises(pydantic.ValidationError):
        out.ok = False  # type: ignore[misc]
