"""``scripted``: a deterministic, offline provider (the embedded default).

Responses come from a list (or a JSON file holding a list, or ``{"responses": [...]}``),
one per model call, in order. Each entry is

- a string: the reply text;
- ``{"text": ..., "tool_calls": [{"name": ..., "arguments": {...}, "id"?: ...}],
  "usage"?: {...}, "request_id"?: ...}``: a reply with tool calls;
- ``{"error": "..."}``: the call fails with a :class:`ProviderError`; with
  ``"status": 503`` (and ``"retry_after": 0.1``) it fails as an HTTP error would, which
  the runner retries (``agent.retry``);
- ``{"hang": true}``: the call never returns (until the turn is cancelled).

When the script runs out the provider answers ``default`` if one was given, else it
echoes the last user message (``You said: ...``), so ``agentplug chat`` works without any
script. Every request is kept in :attr:`ScriptedProvider.requests` for tests.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Iterable, Mapping
from pathlib import Path
from typing import Any

from agentplug.agent.providers.base import (
    ModelDelta,
    ModelRequest,
    ModelResponse,
    ProviderError,
    ToolCall,
)

__all__ = ["ScriptedProvider", "load_script"]


def load_script(path: str | Path) -> list[Any]:
    """The responses of a script file (a JSON list or ``{"responses": [...]}``)."""
    source = Path(path)
    try:
        data = json.loads(source.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ProviderError(
            f"scripted provider: cannot read script {source}: {exc.strerror}; "
            "check agent.providers.scripted.file",
            kind="config",
        ) from None
    except json.JSONDecodeError as exc:
        raise ProviderError(
            f"scripted provider: {source} is not valid JSON (line {exc.lineno}): {exc.msg}",
            kind="config",
        ) from None
    if isinstance(data, Mapping):
        data = data.get("responses")
    if not isinstance(data, list):
        raise ProviderError(
            f'scripted provider: {source} must hold a list of responses or {{"responses": [...]}}',
            kind="config",
        )
    return data


def _tool_call(raw: Any, index: int, call: int) -> ToolCall:
    if not isinstance(raw, Mapping) or not isinstance(raw.get("name"), str):
        raise ProviderError(
            f"scripted provider: response {call} tool_calls[{index}] needs a 'name'",
            kind="config",
        )
    arguments = raw.get("arguments", raw.get("params", {}))
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments)
        except (json.JSONDecodeError, RecursionError):
            return ToolCall(
                str(raw.get("id") or f"call_{call}_{index}"), raw["name"], {}, arguments
            )
    return ToolCall(
        id=str(raw.get("id") or f"call_{call}_{index}"),
        name=raw["name"],
        arguments=dict(arguments or {}),
    )


class ScriptedProvider:
    """Answers from a script, one entry per call (see the module docstring)."""

    name = "scripted"

    def __init__(
        self,
        responses: Iterable[Any] = (),
        *,
        default: str | None = None,
        usage: Mapping[str, Any] | None = None,
    ) -> None:
        self.responses: list[Any] = list(responses)
        self.default = default
        self.usage = dict(usage) if usage is not None else None
        self.requests: list[ModelRequest] = []
        self.calls = 0

    @classmethod
    def from_options(cls, options: Mapping[str, Any]) -> ScriptedProvider:
        """Build from ``agent.providers.scripted``: ``responses``, ``file``, ``default``."""
        responses = list(options.get("responses") or [])
        if options.get("file"):
            responses.extend(load_script(str(options["file"])))
        return cls(responses, default=options.get("default"))

    def add(self, *responses: Any) -> None:
        """Append responses to the script."""
        self.responses.extend(responses)

    async def complete(self, request: ModelRequest) -> ModelResponse:
        """The next scripted response (see the module docstring)."""
        self.requests.append(request)
        index = self.calls
        self.calls += 1
        if index >= len(self.responses):
            return self._fallback(request, index)
        entry = self.responses[index]
        if isinstance(entry, str):
            return ModelResponse(text=entry, usage=self._usage(request, entry), request_id=None)
        if not isinstance(entry, Mapping):
            raise ProviderError(
                f"scripted provider: response {index} must be a string or an object, "
                f"not {type(entry).__name__}",
                kind="config",
            )
        if entry.get("hang"):
            await asyncio.Event().wait()
        if entry.get("error"):
            status = entry.get("status")
            if isinstance(status, int) and not isinstance(status, bool):
                wait = entry.get("retry_after")
                raise ProviderError(
                    f"scripted provider: HTTP {status}: {entry['error']}",
                    kind="http",
                    status=status,
                    retry_after=float(wait) if isinstance(wait, int | float) else None,
                )
            raise ProviderError(f"scripted provider: {entry['error']}", kind="scripted")
        text = str(entry.get("text") or "")
        calls = [_tool_call(c, i, index) for i, c in enumerate(entry.get("tool_calls") or [])]
        usage = entry.get("usage")
        return ModelResponse(
            text=text,
            tool_calls=calls,
            usage=dict(usage) if isinstance(usage, Mapping) else self._usage(request, text),
            request_id=entry.get("request_id") or f"scripted-{index}",
            finish_reason="tool_calls" if calls else "stop",
        )

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelDelta | ModelResponse]:
        """The same response as :meth:`complete`, its text first streamed word by word."""
        response = await self.complete(request)
        words = response.text.split(" ")
        for index, word in enumerate(words):
            yield ModelDelta(word if index == len(words) - 1 else word + " ")
        yield response

    def _fallback(self, request: ModelRequest, index: int) -> ModelResponse:
        if self.default is not None:
            text = self.default
        else:
            last = next(
                (m.get("content") for m in reversed(request.messages) if m.get("role") == "user"),
                "",
            )
            text = f"You said: {last}" if last else "(the scripted provider has no reply)"
        return ModelResponse(
            text=text, usage=self._usage(request, text), request_id=f"scripted-{index}"
        )

    def _usage(self, request: ModelRequest, text: str) -> dict[str, Any]:
        if self.usage is not None:
            return dict(self.usage)
        prompt = sum(len(str(m.get("content") or "")) for m in request.messages) // 4
        return {"prompt_tokens": prompt, "completion_tokens": len(text) // 4}
