"""Data models shared by the code sandbox and the ``code`` action handler."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

Language = Literal["python", "javascript"]


class FetchRequest(BaseModel):
    """An HTTP request issued by sandboxed code through ``fetch(url, options)``.

    The sandbox never performs it: the request travels over IPC to the host, which hands
    it to the injected :data:`FetchCallable` (the SSRF-guarded client in production).
    """

    model_config = ConfigDict(frozen=True)

    url: str
    method: str = "GET"
    headers: dict[str, str] = Field(default_factory=dict)
    body: str | None = None


class FetchResponse(BaseModel):
    """The host's answer to a :class:`FetchRequest`, sent back into the sandbox."""

    model_config = ConfigDict(frozen=True)

    status: int
    headers: dict[str, str] = Field(default_factory=dict)
    body: str = ""


FetchCallable = Callable[[FetchRequest], Awaitable[FetchResponse]]
"""Host-side implementation of ``fetch`` for sandboxed code."""


class SandboxResult(BaseModel):
    """Outcome of one sandboxed run.

    ``output`` is the code's return value (a string as is, other values JSON-encoded,
    ``Done`` when nothing was returned); ``error`` explains a failure; ``timed_out`` is set
    when the host killed the run at its time limit.
    """

    model_config = ConfigDict(frozen=True)

    ok: bool
    output: str = ""
    error: str | None = None
    timed_out: bool = False
    duration_ms: float = 0.0
    truncated: bool = False
