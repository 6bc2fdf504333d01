"""The state and helpers every control API route mixin shares: :class:`ApiBase`."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any

from starlette.exceptions import HTTPException
from starlette.requests import Request

from agentplug.config.datafiles import DataFileError, parse_json

if TYPE_CHECKING:
    from agentplug.actions.builtins.comms import OutputHub
    from agentplug.actions.terminal import TerminalService
    from agentplug.gateway import Gateway, PluginHost

log = logging.getLogger("agentplug.api")

MAX_BODY_BYTES = 1024 * 1024
"""Largest request body the API reads (bigger ones get 413 and the connection closes)."""


_DRAIN_BYTES = 1024 * 1024
"""How far past the limit a body is still read (and dropped) so that the client gets a
clean 413 on a connection it can reuse; past that the connection is closed unread."""


def _too_large(limit: int, *, close: bool) -> HTTPException:
    return HTTPException(
        413,
        f"request body larger than {limit} bytes; send less",
        headers={"Connection": "close"} if close else None,
    )


def _refused(request: Request, status: int, why: str) -> None:
    log.warning("%s %s answered %d: %s", request.method, request.url.path, status, why)


class ApiBase:
    """What the route mixins share: the gateway, the paths, the terminal, body parsing."""

    gateway: Gateway
    host: PluginHost
    state_dir: Path
    config_path: Path | None
    terminal: TerminalService

    @staticmethod
    async def _body(request: Request, max_bytes: int = MAX_BODY_BYTES) -> dict[str, Any]:
        """The request's JSON object body (``{}`` when empty), within the API's limits.

        The body is streamed and never kept past ``max_bytes`` (413); a body at most 1 MiB
        over is read to its end so the connection stays usable, a larger one is cut off
        there and the connection closed, so the rest is never read. A body that is not
        JSON, nests deeper than :data:`~agentplug.config.datafiles.MAX_DEPTH` or holds a
        number literal that is too long is a 400 with one line saying so (and one log line).
        """
        declared = request.headers.get("content-length")
        if declared is not None and declared.isdigit() and int(declared) > max_bytes + _DRAIN_BYTES:
            _refused(request, 413, f"declared body of {declared} bytes")
            raise _too_large(max_bytes, close=True)
        chunks: list[bytes] = []
        size = 0
        async for chunk in request.stream():
            size += len(chunk)
            if size > max_bytes + _DRAIN_BYTES:
                _refused(request, 413, f"body passed {max_bytes} bytes")
                raise _too_large(max_bytes, close=True)
            if size <= max_bytes:
                chunks.append(chunk)
        if size > max_bytes:  # a little too large: read to the end, the connection stays usable
            _refused(request, 413, f"body of {size} bytes")
            raise _too_large(max_bytes, close=False)
        raw = b"".join(chunks)
        if not raw.strip():
            return {}
        try:
            data = parse_json(raw, "request body")
        except DataFileError as exc:
            _refused(request, 400, exc.problem)
            raise HTTPException(400, str(exc)) from None
        if not isinstance(data, dict):
            raise HTTPException(
                400, f"request body must be a JSON object, got {type(data).__name__}"
            )
        return data

    def _hub(self) -> OutputHub:
        from agentplug.actions.builtins.comms import output_hub

        return output_hub(self.gateway.actions)
