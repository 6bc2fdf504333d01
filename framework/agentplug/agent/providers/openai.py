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
- ``temperature``, ``max_tokens``, ``extra_body``: passed through;
- ``response_format`` (default true): send a turn's output schema as
  ``response_format: {"type": "json_schema", ...}`` (false for servers that refuse it:
  the runner still validates the answer);
- ``stream_usage`` (default true): ask a streamed call for its usage
  (``stream_options.include_usage``).

:meth:`OpenAIProvider.stream` streams (server-sent events, tool calls assembled from
their fragments: :mod:`~agentplug.agent.providers.openai_stream`), under the same bounds.
An HTTP error carries the server's ``Retry-After`` (:func:`retry_after_s`) for the
runner's retries.

The body is read incrementally and never past :attr:`ModelRequest.max_response_bytes`
(``agent.limits.model_response_bytes``, 16 MiB when the request sets none); a compressed
body is bounded after decompression. Every failure is a one-line :class:`ProviderError`:
HTTP errors (with the server's own message when it sent one), timeouts, connection
failures, responses over the limit and malformed bodies.
"""

from __future__ import annotations

import asyncio
import email.utils
import json
import os
import time
import zlib
from collections.abc import AsyncIterator, Awaitable, Mapping
from typing import Any, TypeVar

import httpx

from agentplug.agent.providers.base import (
    ModelDelta,
    ModelRequest,
    ModelResponse,
    ProviderError,
    ToolCall,
)
from agentplug.agent.providers.openai_stream import StreamAssembler, tool_arguments
from agentplug.core.redaction import register_secret, scrub

__all__ = ["DEFAULT_BASE_URL", "DEFAULT_MAX_RESPONSE_BYTES", "OpenAIProvider", "retry_after_s"]

T = TypeVar("T")

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
    return b"".join([chunk async for chunk in _body_chunks(response, limit, cut=cut)])


async def _body_chunks(
    response: httpx.Response, limit: int, *, cut: bool = False
) -> AsyncIterator[bytes]:
    """The body's decompressed chunks as they arrive, never past ``limit`` bytes in all
    (see :func:`_read_body`)."""
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
            yield chunk[: limit - size]
            return
        size += len(chunk)
        yield chunk


_MAX_RETRY_AFTER_S = 86_400.0
"""A longer ``Retry-After`` is read as a day (the runner's own bound is far lower)."""


def retry_after_s(headers: httpx.Headers) -> float | None:
    """The wait a response asks for (``retry-after-ms``, ``retry-after`` in seconds or as
    an HTTP date), in seconds, or ``None`` when it asks for none it can be held to."""
    millis = headers.get("retry-after-ms", "").strip()
    try:
        if millis:
            value = float(millis) / 1000
        else:
            text = headers.get("retry-after", "").strip()
            if not text:
                return None
            try:
                value = float(text)
            except ValueError:
                when = email.utils.parsedate_to_datetime(text)
                if when.tzinfo is None:
                    return None
                value = when.timestamp() - time.time()
    except (ValueError, TypeError, OverflowError):
        return None
    if value != value:  # NaN
        return None
    return min(max(value, 0.0), _MAX_RETRY_AFTER_S)


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
        if request.output_schema is not None and merged.get("response_format", True):
            body["response_format"] = {
                "type": "json_schema",
                "json_schema": {"name": request.output_name, "schema": request.output_schema},
            }
        if isinstance(extra, Mapping):
            body.update(extra)
        return body

    def _http_error(
        self, status: int, error_body: httpx.Response, headers: httpx.Headers
    ) -> ProviderError:
        return ProviderError(
            f"openai provider: HTTP {status} from {self.url}: "
            f"{_error_message(error_body)}{_hint(status, self.api_key_env)}",
            kind="http",
            status=status,
            retry_after=retry_after_s(headers),
        )

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelDelta | ModelResponse]:
        """One streamed call (``"stream": true``): the reply text as it arrives, then the
        response (tool calls assembled, usage when the server sends it). The same bounds
        as :meth:`complete`: ``timeout_s`` is the deadline of the whole stream and the
        body is never read past :attr:`ModelRequest.max_response_bytes`; a server that
        answers with a plain JSON body is read as one."""
        url = self.url
        limit = request.max_response_bytes or DEFAULT_MAX_RESPONSE_BYTES
        body = self.body(request)
        body["stream"] = True
        if self.options.get("stream_usage", True):
            body["stream_options"] = {"include_usage": True}
        deadline = asyncio.get_running_loop().time() + self.timeout_s
        client = httpx.AsyncClient(
            timeout=self.timeout_s, transport=self._transport, trust_env=False
        )
        try:
            sent = client.build_request("POST", url, json=body, headers=self._headers())
            response = await self._guard(_within(client.send(sent, stream=True), deadline), limit)
            try:
                status = response.status_code
                request_id = response.headers.get("x-request-id")
                if status >= 400:
                    error_body = await self._guard(
                        _within(_error_response(response), deadline), limit
                    )
                    raise self._http_error(status, error_body, response.headers)
                kind = response.headers.get("content-type", "").split(";")[0].strip().lower()
                if kind != "text/event-stream":
                    data = await self._guard(_within(_read_body(response, limit), deadline), limit)
                    whole = self._parse(data, status, request_id, request)
                    if whole.text:
                        yield ModelDelta(whole.text)
                    yield whole
                    return
                assembler = StreamAssembler(url, request_id, max_tool_calls=request.max_tool_calls)
                chunks = _body_chunks(response, limit)
                while not assembler.done:
                    try:
                        chunk = await self._guard(_within(anext(chunks), deadline), limit)
                    except StopAsyncIteration:
                        break
                    for text in assembler.feed(chunk):
                        yield ModelDelta(text)
                await chunks.aclose()  # type: ignore[attr-defined]  # an async generator
                yield assembler.finish()
            finally:
                await response.aclose()
        finally:
            await client.aclose()

    async def _guard(self, awaitable: Awaitable[T], limit: int) -> T:
        """``awaitable``, its failures turned into one-line provider errors."""
        url = self.url
        try:
            return await awaitable
        except _Undecodable as exc:
            raise _undecodable(url, exc) from None
        except _TooLarge:
            raise self._too_large(self.url, limit) from None
        except _Late:
            raise self._timeout() from None
        except httpx.TimeoutException:
            raise self._timeout() from None
        except httpx.HTTPError as exc:
            raise _unreachable(url, exc) from None

    def _too_large(self, url: str, limit: int) -> ProviderError:
        return ProviderError(
            f"openai provider: the response from {url} is over {limit} bytes "
            "(agent.limits.model_response_bytes); raise the limit or ask for less "
            "(max_tokens)",
            kind="limit",
        )

    def _timeout(self) -> ProviderError:
        return ProviderError(
            f"openai provider: {self.url} did not complete within {self.timeout_s:g} s "
            "(agent.providers.openai.timeout_s, the total deadline of one call, body "
            "included); raise it or check the server",
            kind="timeout",
        )

    def _parse(
        self, data: bytes, status: int, request_id: str | None, request: ModelRequest
    ) -> ModelResponse:
        try:
            # json.loads on the bytes: decoding to a str first would hold a second copy of
            # up to four bytes per character (text outside the BMP) next to the parsed body.
            parsed = json.loads(data)
        except (ValueError, RecursionError):
            raise ProviderError(
                f"openai provider: {self.url} answered HTTP {status} with a body "
                "that is not JSON; is base_url an OpenAI-compatible /v1 endpoint?",
                kind="malformed",
            ) from None
        del data
        return parse_completion(parsed, self.url, request_id, max_tool_calls=request.max_tool_calls)

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
            raise _undecodable(url, exc) from None
        except _TooLarge:
            raise self._too_large(url, limit) from None
        except (TimeoutError, httpx.TimeoutException) as exc:
            if isinstance(exc, TimeoutError) and not deadline.expired():
                raise
            raise self._timeout() from None
        except httpx.HTTPError as exc:
            raise _unreachable(url, exc) from None
        request_id = response.headers.get("x-request-id")
        if error_body is not None:
            raise self._http_error(status, error_body, response.headers)
        return self._parse(data, status, request_id, request)


def _undecodable(url: str, exc: Exception) -> ProviderError:
    return ProviderError(
        f"openai provider: {url} sent a body that cannot be decoded: {exc}", kind="malformed"
    )


def _unreachable(url: str, exc: Exception) -> ProviderError:
    return ProviderError(
        f"openai provider: cannot reach {url} ({type(exc).__name__}); check "
        "agent.providers.openai.base_url and that the server runs",
        kind="connection",
    )


class _Late(Exception):
    """A streamed call passed its deadline (raised by :func:`_within`)."""


async def _within(awaitable: Awaitable[T], deadline: float) -> T:
    """``awaitable``, unless the loop's clock passes ``deadline`` first (:class:`_Late`).

    One await at a time: a timeout around a whole async generator would cancel whatever
    its consumer awaits between two chunks.
    """
    try:
        async with asyncio.timeout_at(deadline) as scope:
            return await awaitable
    except TimeoutError:
        if scope.expired():
            raise _Late from None
        raise


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
        return " (rate limited: agent.retry retries it; agent.fallback_models adds other models)"
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
        arguments, raw_text = tool_arguments(function.get("arguments") or "{}")
        calls.append(
            ToolCall(
                id=str(raw.get("id") or f"call_{index}"),
                name=function["name"],
                arguments=arguments,
                raw_arguments=raw_text,
            )
        )
    usage = data.get("usage")
    model = data.get("model")
    return ModelResponse(
        text=content or "",
        tool_calls=calls,
        usage=dict(usage) if isinstance(usage, Mapping) else None,
        request_id=request_id or (str(data["id"]) if data.get("id") else None),
        finish_reason=choices[0].get("finish_reason"),
        dropped_tool_calls=len(raw_calls) - len(built),
        model=model[:256] if isinstance(model, str) else None,
    )
