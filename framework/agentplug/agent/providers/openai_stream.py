"""Streamed chat completions: server-sent events in, text deltas and one response out.

:class:`StreamAssembler` reads the body of a ``"stream": true`` chat-completions call
(``text/event-stream``) as it arrives: each ``data:`` event is one JSON chunk whose
``choices[0].delta`` holds a piece of the reply text or pieces of tool calls
(``tool_calls[].index`` says which call a piece belongs to: its id and name come once,
its arguments in fragments), ``finish_reason`` arrives at the end, ``usage`` in a last
chunk when the request set ``stream_options.include_usage``, and ``data: [DONE]`` closes
the stream. The assembler hands back the text deltas as they come and builds the final
:class:`~agentplug.agent.providers.base.ModelResponse` from the pieces.

Everything the server sends is bounded: the body by the caller (the same byte limit as
an unstreamed body, ``agent.limits.model_response_bytes``), the tool calls built by
``max_tool_calls`` (fragments of the calls past it are counted, not kept), and the
stream must end properly: a body that stops before ``[DONE]`` or a ``finish_reason`` is a
``connection`` :class:`~agentplug.agent.providers.base.ProviderError` (retried like a
dropped connection), an ``error`` chunk is an ``http`` one with the server's message.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from agentplug.agent.providers.base import ModelResponse, ProviderError, ToolCall
from agentplug.core.redaction import scrub

__all__ = ["StreamAssembler", "tool_arguments"]

_MAX_ERROR_CHARS = 300


def tool_arguments(text: Any) -> tuple[dict[str, Any], str | None]:
    """A call's arguments as a dict, and the raw text when it was not a JSON object."""
    if isinstance(text, Mapping):
        return dict(text), None
    raw = str(text or "{}")
    try:
        parsed = json.loads(raw)
    except (json.JSONDecodeError, RecursionError):  # nested past the parser's depth
        return {}, raw
    if not isinstance(parsed, dict):
        return {}, raw
    return parsed, None


@dataclass
class _Call:
    """A tool call being assembled from its fragments."""

    id: str | None = None
    name: str | None = None
    arguments: list[str] = field(default_factory=list)


class StreamAssembler:
    """Turns a streamed chat-completions body into deltas and a response (see the module
    docstring). ``feed`` the body's bytes as they arrive; ``finish`` at its end."""

    def __init__(
        self, url: str, request_id: str | None = None, *, max_tool_calls: int | None = None
    ) -> None:
        self.url = url
        self.request_id = request_id
        self.max_tool_calls = max_tool_calls
        self.done = False
        """``data: [DONE]`` arrived: nothing after it is read."""
        self._pending = b""
        self._data: list[str] = []
        self._text: list[str] = []
        self._calls: dict[int, _Call] = {}
        self._dropped: set[int] = set()
        self._usage: dict[str, Any] | None = None
        self._finish_reason: str | None = None
        self._model: str | None = None
        self._id: str | None = None

    def _malformed(self, what: str) -> ProviderError:
        return ProviderError(
            f"openai provider: malformed streamed chunk from {self.url}: {what}",
            kind="malformed",
        )

    def feed(self, chunk: bytes) -> list[str]:
        """Read ``chunk``; return the reply text it completed (in order)."""
        if self.done:
            return []
        out: list[str] = []
        lines = (self._pending + chunk).split(b"\n")
        self._pending = lines.pop()  # an unfinished line waits for the next chunk
        for raw in lines:
            line = raw[:-1] if raw.endswith(b"\r") else raw
            if not line:  # a blank line ends the event
                out.extend(self._event())
                if self.done:
                    break
                continue
            if line.startswith(b":"):  # a comment (servers send them to keep alive)
                continue
            name, _, value = line.partition(b":")
            if name == b"data":
                text = value[1:] if value.startswith(b" ") else value
                self._data.append(text.decode("utf-8", "replace"))
        return out

    def _event(self) -> list[str]:
        if not self._data:
            return []
        data = "\n".join(self._data)
        self._data = []
        if data.strip() == "[DONE]":
            self.done = True
            return []
        try:
            parsed = json.loads(data)
        except (ValueError, RecursionError):
            raise self._malformed("a data line is not JSON") from None
        if not isinstance(parsed, Mapping):
            raise self._malformed("a chunk is not a JSON object")
        if parsed.get("error") is not None:
            raise self._error(parsed["error"])
        if isinstance(parsed.get("model"), str):
            self._model = parsed["model"][:256]
        if isinstance(parsed.get("id"), str) and self._id is None:
            self._id = parsed["id"][:256]
        usage = parsed.get("usage")
        if isinstance(usage, Mapping):
            self._usage = dict(usage)
        choices = parsed.get("choices")
        if choices is None or choices == []:
            return []
        if not isinstance(choices, list) or not isinstance(choices[0], Mapping):
            raise self._malformed("choices is not a list of objects")
        choice = choices[0]
        reason = choice.get("finish_reason")
        if isinstance(reason, str):
            self._finish_reason = reason[:64]
        delta = choice.get("delta")
        if delta is None:
            return []
        if not isinstance(delta, Mapping):
            raise self._malformed("choices[0].delta is not an object")
        self._tool_calls(delta.get("tool_calls"))
        content = delta.get("content")
        if isinstance(content, str) and content:
            self._text.append(content)
            return [content]
        if content is not None and not isinstance(content, str):
            raise self._malformed("choices[0].delta.content is not text")
        return []

    def _tool_calls(self, raw: Any) -> None:
        if raw is None:
            return
        if not isinstance(raw, list):
            raise self._malformed("choices[0].delta.tool_calls is not a list")
        for position, piece in enumerate(raw):
            if not isinstance(piece, Mapping):
                raise self._malformed("a tool-call fragment is not an object")
            index = piece.get("index", position)
            if isinstance(index, bool) or not isinstance(index, int) or index < 0:
                raise self._malformed("a tool-call fragment has no valid index")
            call = self._calls.get(index)
            if call is None:
                if self.max_tool_calls is not None and len(self._calls) >= self.max_tool_calls:
                    self._dropped.add(index)  # counted, never assembled
                    continue
                call = self._calls[index] = _Call()
            if isinstance(piece.get("id"), str) and call.id is None:
                call.id = piece["id"]
            function = piece.get("function")
            if function is None:
                continue
            if not isinstance(function, Mapping):
                raise self._malformed("a tool-call fragment's function is not an object")
            if isinstance(function.get("name"), str) and call.name is None:
                call.name = function["name"]
            arguments = function.get("arguments")
            if isinstance(arguments, str):
                call.arguments.append(arguments)

    def _error(self, error: Any) -> ProviderError:
        message = error.get("message") if isinstance(error, Mapping) else error
        text = scrub(" ".join(str(message)[: _MAX_ERROR_CHARS * 16].split()))
        return ProviderError(
            f"openai provider: {self.url} reported an error mid-stream: {text[:_MAX_ERROR_CHARS]}",
            kind="http",
        )

    def finish(self) -> ModelResponse:
        """The response the stream carried; a ``connection`` error when it was cut short."""
        if self._pending.strip() or self._data:
            self.feed(b"\n\n")  # a last event without its blank line
        if not self.done and self._finish_reason is None:
            raise ProviderError(
                f"openai provider: the stream from {self.url} ended before the response was "
                "complete (no [DONE] and no finish_reason); the server or a proxy dropped it",
                kind="connection",
            )
        calls: list[ToolCall] = []
        for position, (index, call) in enumerate(sorted(self._calls.items())):
            if call.name is None:
                raise self._malformed(f"tool call {index} has no function name")
            arguments, raw = tool_arguments("".join(call.arguments))
            calls.append(
                ToolCall(
                    id=call.id or f"call_{position}",
                    name=call.name,
                    arguments=arguments,
                    raw_arguments=raw,
                )
            )
        return ModelResponse(
            text="".join(self._text),
            tool_calls=calls,
            usage=self._usage,
            request_id=self.request_id or self._id,
            finish_reason=self._finish_reason,
            dropped_tool_calls=len(self._dropped),
            model=self._model,
        )
