"""The state and helpers every control API route mixin shares: :class:`ApiBase`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from starlette.exceptions import HTTPException
from starlette.requests import Request

if TYPE_CHECKING:
    from agentplug.actions.builtins.comms import OutputHub
    from agentplug.actions.terminal import TerminalService
    from agentplug.core.host import PluginHost

MAX_BODY_BYTES = 1024 * 1024


class ApiBase:
    """What the route mixins share: the host, the paths, the terminal, body parsing."""

    host: PluginHost
    state_dir: Path
    config_path: Path | None
    terminal: TerminalService

    @staticmethod
    async def _body(request: Request) -> dict[str, Any]:
        declared = request.headers.get("content-length")
        if declared is not None and declared.isdigit() and int(declared) > MAX_BODY_BYTES:
            raise HTTPException(413, f"request body larger than {MAX_BODY_BYTES} bytes")
        raw = await request.body()
        if len(raw) > MAX_BODY_BYTES:
            raise HTTPException(413, f"request body larger than {MAX_BODY_BYTES} bytes")
        if not raw.strip():
            return {}
        try:
            data = json.loads(raw)
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise HTTPException(400, f"request body is not valid JSON: {exc}") from None
        if not isinstance(data, dict):
            raise HTTPException(
                400, f"request body must be a JSON object, got {type(data).__name__}"
            )
        return data

    def _hub(self) -> OutputHub:
        from agentplug.actions.builtins.comms import output_hub

        return output_hub(self.host.actions)
