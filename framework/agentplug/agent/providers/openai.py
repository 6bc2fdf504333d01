"""``openai``: any OpenAI-compatible chat-completions server over httpx.

Works with OpenAI, Ollama, vLLM, llama.cpp's server, LM Studio, OpenRouter and anything
else that speaks ``POST {base_url}/chat/completions``. Options
(``agent.providers.openai`` in the config):

- ``base_url``: default ``https://api.openai.com/v1`` (``http://127.0.0.1:11434/v1`` for
  Ollama, ...);
- ``api_key_env``: the name of the environment variable holding the API key (default
  ``OPENAI_API_KEY``); the key itself never appears in the config. A server that needs no
  key (a local one) works with the variable unset;
- ``timeout_s``: per-call budget (default 60);
- ``temperature``, ``max_tokens``, ``extra_body``: passed through.

Every failure is a one-line :class:`ProviderError`: HTTP errors (with the server's own
message when it sent one), timeouts, connection failures and malformed bodies.
"""

from __future__ import annotations

import json
import os
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

__all__ = ["DEFAULT_BASE_URL", "OpenAIProvider"]

DEFAULT_BASE_URL = "https://api.openai.com/v1"
_MAX_ERROR_CHARS = 300


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
        try:
            async with httpx.AsyncClient(
                timeout=self.timeout_s, transport=self._transport, trust_env=False
            ) as client:
                response = await client.post(url, json=self.body(request), headers=self._headers())
        except httpx.TimeoutException:
            raise ProviderError(
                f"openai provider: {url} did not answer within {self.timeout_s:g} s; raise "
                "agent.providers.openai.timeout_s or check the server",
                kind="timeout",
            ) from None
        except httpx.HTTPError as exc:
            raise ProviderError(
                f"openai provider: cannot reach {url} ({type(exc).__name__}); check "
                "agent.providers.openai.base_url and that the server runs",
                kind="connection",
            ) from None
        request_id = response.headers.get("x-request-id")
        if response.status_code >= 400:
            raise ProviderError(
                f"openai provider: HTTP {response.status_code} from {url}: "
                f"{_error_message(response)}{_hint(response.status_code, self.api_key_env)}",
                kind="http",
                status=response.status_code,
            )
        try:
            data = response.json()
        except ValueError:
            raise ProviderError(
                f"openai provider: {url} answered HTTP {response.status_code} with a body "
                "that is not JSON; is base_url an OpenAI-compatible /v1 endpoint?",
                kind="malformed",
            ) from None
        return parse_completion(data, url, request_id)


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


def parse_completion(data: Any, url: str, request_id: str | None = None) -> ModelResponse:
    """A :class:`ModelResponse` from a chat-completions JSON body (strictly checked)."""
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
    for index, raw in enumerate(raw_calls):
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
            except json.JSONDecodeError:
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
    )
