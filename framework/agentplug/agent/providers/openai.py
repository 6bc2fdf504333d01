"""``openai``: any OpenAI-compatible chat-completions server over httpx.

Works with OpenAI, Ollama, vLLM, llama.cpp's server, LM Studio, OpenRouter and anything
else that speaks ``POST {base_url}/chat/completions``. Options
(``agent.providers.openai`` in the config):

- ``base_url``: default ``https://api.openai.com/v1`` (``http://127.0.0.1:11434/v1`` for
  Ollama, ...);
- ``api_key_env``: the name of the environment variable holding the API key (default
  ``OPENAI_API_KEY``); the key itself never appears in the config. A server that needs no
  key (a local one) works with the variable unset;
- ``timeout_s``: the total deadline of one call, connecting, sending and reading the
  whole body included (default 60): a server that drips its answer cannot outlive it;
- ``temperature``, ``max_tokens``, ``extra_body``: passed through.

The body is read incrementally and never past :attr:`ModelRequest.max_response_bytes`
(``agent.limits.model_response_bytes``, 16 MiB when the request sets none); a compressed
body is bounded after decompression. Every failure is a one-line :class:`ProviderError`:
HTTP errors (with the server's own message when it sent one), timeouts, connection
failures, responses over the limit and malformed bodies.
"""

from __future__ import annotations

import asyncio
import json
import os
import zlib
from collections.abc import Mapping
from typing import Any

import httpx

from agentplug.agent.providers.base import (
    ModelRequest,
    ModelResponse,
    ProviderError,
    ToolCall,
)
from agentplug.core.redaction import register_secret, scrub

__all__ = ["DEFAULT_BASE_URL", "DEFAULT_MAX_RESPONSE_BYTES", "OpenAIProvider"]

DEFAULT_BASE_URL = "https://api.openai.com/v1"
DEFAULT_MAX_RESPONSE_BYTES = 16 * 1024 * 1024
"""The response bound when a request does not carry one (the ``agent.limits`` default)."""
_MAX_ERROR_CHARS = 300
_MAX_ERROR_BODY_BYTES = 64 * 1024
"""An error body is read this far only: its message is cut at 300 characters anyway."""


class _TooLarge(Exception):
    """The body passed the byte limit (raised by :func:`_read_body`)."""


class _Undecodable(Exception):
    """The body's content-encoding is unknown or its compressed data is broken."""


async def _read_body(response: httpx.Response, limit: int, *, cut: bool = False) -> bytes:
    """The body, decompressed, read chunk by chunk and never held past ``limit`` bytes.

    Past the limit: :class:`_TooLarge`, or with ``cut`` the first ``limit`` bytes. A
    declared length over the limit is refused before reading; a compressed chunk is
    inflated only up to the room left.
    """
    declared = response.headers.get("content-length", "")
    encoding = response.headers.get("content-encoding", "").strip().lower()
    identity = encoding in ("", "identity")
    if identity and not cut and declared.isdigit() and int(declared) > limit:
        raise _TooLarge
    inflater: Any = None
    if encoding in ("gzip", "x-gzip", "deflate"):
        inflater = zlib.decompressobj(zlib.MAX_WBITS | 32)  # a gzip or a zlib header
    elif not identity:
        raise _Undecodable(f"unsupported content-encoding {encoding!r}")
    chunks: list[bytes] = []
    size = 0
    async for raw in response.aiter_raw():
        chunk, over = raw, False
        if inflater is not None:
            try:
                chunk = inflater.decompress(raw, limit - size + 1)
            except zlib.error as exc:
                raise _Undecodable(f"broken {encoding} data ({exc})") from None
            over = bool(inflater.unconsumed_tail)
        if over or size + len(chunk) > limit:
            if not cut:
                raise _TooLarge
            chunks.append(chunk[: limit - size])
            break
        size += len(chunk)
        chunks.append(chunk)
    return b"".join(chunks)


class OpenAIProvider:
    """Chat completions over HTTP (see the module docstring)."""

    name = "openai"

    def __init__(
        self,
        *,
        base_url: str = DEFAULT_BASE_URL,
        api_key: str | None = None,
        api_key_env: str = "OPENAI_API_KEY",
        timeout_s: float = 60.0,
        options: Mapping[str, Any] | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.api_key_env = api_key_env
        self._api_key = api_key
        register_secret(api_key)
        self.timeout_s = float(timeout_s)
        self.options = dict(options or {})
        self._transport = transport

    @classmethod
    def from_options(cls, options: Mapping[str, Any]) -> OpenAIProvider:
        """Build from ``agent.providers.openai``."""
        known = {"base_url", "baseUrl", "api_key_env", "apiKeyEnv", "timeout_s", "timeoutS"}
        extra = {k: v for k, v in options.items() if k not in known}
        return cls(
            base_url=str(options.get("base_url") or options.get("baseUrl") or DEFAULT_BASE_URL),
            api_key_env=str(
                options.get("api_key_env") or options.get("apiKeyEnv") or "OPENAI_API_KEY"
            ),
            timeout_s=float(options.get("timeout_s") or options.get("timeoutS") or 60.0),
            options=extra,
        )

    @property
    def url(self) -> str:
        """The chat-completions endpoint."""
        return f"{self.base_url}/chat/completions"

    def _headers(self) -> dict[str, str]:
        headers = {"content-type": "application/json"}
        key = self._api_key if self._api_key is not None else os.environ.get(self.api_key_env)
        if key:
            register_secret(key)  # a server may echo it in its error message
            headers["authorization"] = f"Bearer {key}"
        return headers

    def body(self, request: ModelRequest) -> dict[str, Any]:
        """The JSON body of one call."""
        body: dict[str, Any] = {"model": request.model, "messages": request.messages}
        if request.tools:
            body["tools"] = [t.to_openai() for t in request.tools]
        merged = {**self.options, **request.options}
        extra = merged.pop("extra_body", None)
        for key in ("temperature", "max_tokens", "top_p", "stop", "seed"):
            if key in merged:
                body[key] = merged[key]
        if isinstance(extra, Mapping):
            body.update(extra)
        return body

    async def complete(self, request: ModelRequest) -> ModelResponse:
        """One chat-completions call; a :class:`ProviderError` on any failure."""
        url = self.url
        limit = request.max_response_bytes or DEFAULT_MAX_RESPONSE_BYTES
        deadline = asyncio.timeout(self.timeout_s)
        data, error_body = b"", None
        try:
            async with (
                deadline,
                httpx.AsyncClient(
                    timeout=self.timeout_s, transport=self._transport, trust_env=False
                ) as client,
                client.stream(
                    "POST", url, json=self.body(request), headers=self._headers()
                ) as response,
            ):
                status = response.status_code
                if status >= 400:
                    error_body = await _error_response(response)
                else:
                    data = await _read_body(response, limit)
        except _Undecodable as exc:
            raise ProviderError(
                f"openai provider: {url} sent a body that cannot be decoded: {exc}",
                kind="malformed",
            ) from None
        except _TooLarge:
            raise ProviderError(
                f"openai provider: the response from {url} is over {limit} bytes "
                "(agent.limits.model_response_bytes); raise the limit or ask for less "
                "(max_tokens)",
                kind="limit",
            ) from None
        except (TimeoutError, httpx.TimeoutException) as exc:
            if isinstance(exc, TimeoutError) and not deadline.expired():
                raise
            raise ProviderError(
                f"openai provider: {url} did not complete within {self.timeout_s:g} s "
                "(agent.providers.openai.timeout_s, the total deadline of one call, body "
                "included); raise it or check the server",
                kind="timeout",
            ) from None
        except httpx.HTTPError as exc:
            raise ProviderError(
                f"openai provider: cannot reach {url} ({type(exc).__name__}); check "
                "agent.providers.openai.base_url and that the server runs",
                kind="connection",
            ) from None
        request_id = response.headers.get("x-request-id")
        if error_body is not None:
            raise ProviderError(
                f"openai provider: HTTP {status} from {url}: "
                f"{_error_message(error_body)}{_hint(status, self.api_key_env)}",
                kind="http",
                status=status,
            )
        try:
            # json.loads on the bytes: decoding to a str first would hold a second copy of
            # up to four bytes per character (text outside the BMP) next to the parsed body.
            parsed = json.loads(data)
        except (ValueError, RecursionError):
            raise ProviderError(
                f"openai provider: {url} answered HTTP {status} with a body "
                "that is not JSON; is base_url an OpenAI-compatible /v1 endpoint?",
                kind="malformed",
            ) from None
        del data
        return parse_completion(parsed, url, request_id, max_tool_calls=request.max_tool_calls)


async def _error_response(response: httpx.Response) -> httpx.Response:
    """An error response rebuilt from its first bytes (enough for its message)."""
    try:
        body = await _read_body(response, _MAX_ERROR_BODY_BYTES, cut=True)
    except _Undecodable:
        body = b""
    content_type = response.headers.get("content-type", "application/octet-stream")
    return httpx.Response(
        response.status_code, headers={"content-type": content_type}, content=body
    )


def _error_message(response: httpx.Response) -> str:
    # Scrubbed before the final cut: a cut through an echoed key would leave its head.
    text = " ".join(_server_message(response)[: _MAX_ERROR_CHARS * 16].split())
    return scrub(text)[:_MAX_ERROR_CHARS]


def _server_message(response: httpx.Response) -> str:
    try:
        data = response.json()
    except ValueError:
        return response.text.strip() or response.reason_phrase
    error = data.get("error") if isinstance(data, Mapping) else None
    if isinstance(error, Mapping) and error.get("message"):
        return str(error["message"])
    if isinstance(error, str):
        return error
    return response.reason_phrase


def _hint(status: int, api_key_env: str) -> str:
    if status in (401, 403):
        return f" (set the API key in ${api_key_env} or agent.providers.openai.api_key_env)"
    if status == 404:
        return " (check agent.model and agent.providers.openai.base_url)"
    if status == 429:
        return " (rate limited: retry later)"
    return ""


def _malformed(url: str, what: str) -> ProviderError:
    return ProviderError(
        f"openai provider: malformed chat-completions body from {url}: {what}",
        kind="malformed",
    )


def parse_completion(
    data: Any, url: str, request_id: str | None = None, *, max_tool_calls: int | None = None
) -> ModelResponse:
    """A :class:`ModelResponse` from a chat-completions JSON body (strictly checked).

    Past ``max_tool_calls`` calls are counted (``dropped_tool_calls``), not built.
    """
    if not isinstance(data, Mapping):
        raise _malformed(url, "the body is not a JSON object")
    choices = data.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], Mapping):
        raise _malformed(url, "no choices[0]")
    message = choices[0].get("message")
    if not isinstance(message, Mapping):
        raise _malformed(url, "choices[0].message is missing")
    content = message.get("content")
    if content is not None and not isinstance(content, str):
        if isinstance(content, list):  # content parts: keep the text parts
            content = "".join(str(p.get("text", "")) for p in content if isinstance(p, Mapping))
        else:
            raise _malformed(url, "choices[0].message.content is not text")
    calls: list[ToolCall] = []
    raw_calls = message.get("tool_calls") or []
    if not isinstance(raw_calls, list):
        raise _malformed(url, "choices[0].message.tool_calls is not a list")
    built = raw_calls if max_tool_calls is None else raw_calls[:max_tool_calls]
    for index, raw in enumerate(built):
        function = raw.get("function") if isinstance(raw, Mapping) else None
        if not isinstance(function, Mapping) or not isinstance(function.get("name"), str):
            raise _malformed(url, f"tool_calls[{index}] has no function name")
        arguments_text = function.get("arguments") or "{}"
        arguments: Any
        raw_text: str | None = None
        if isinstance(arguments_text, Mapping):
            arguments = dict(arguments_text)
        else:
            try:
                arguments = json.loads(str(arguments_text))
            except (json.JSONDecodeError, RecursionError):  # nested past the parser's depth
                arguments, raw_text = {}, str(arguments_text)
            if not isinstance(arguments, dict):
                arguments, raw_text = {}, str(arguments_text)
        calls.append(
            ToolCall(
                id=str(raw.get("id") or f"call_{index}"),
                name=function["name"],
                arguments=arguments,
                raw_arguments=raw_text,
            )
        )
    usage = data.get("usage")
    return ModelResponse(
        text=content or "",
        tool_calls=calls,
        usage=dict(usage) if isinstance(usage, Mapping) else None,
        request_id=request_id or (str(data["id"]) if data.get("id") else None),
        finish_reason=choices[0].get("finish_reason"),
        dropped_tool_calls=len(raw_calls) - len(built),
    )
