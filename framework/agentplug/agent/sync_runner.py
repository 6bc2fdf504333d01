"""``SyncAgentRunner``: the blocking face of an :class:`~agentplug.agent.AgentRunner`.

Hosts without an event loop call ``runner.sync.handle_inbound(...)`` /
``runner.sync.run_turn(...)``; each call runs on the host's private loop, like
``host.sync``.
"""

from __future__ import annotations

from collections.abc import Coroutine, Mapping
from typing import Any, TypeVar

from agentplug.agent.turn import InboundMessage, TurnResult

__all__ = ["SyncAgentRunner"]

T = TypeVar("T")


class SyncAgentRunner:
    """Blocking methods over an :class:`~agentplug.agent.AgentRunner` (on the host's
    private loop)."""

    def __init__(self, runner: Any) -> None:
        self.runner = runner

    def _run(self, coro: Coroutine[Any, Any, T]) -> T:
        result: T = self.runner.host.sync.run(coro)
        return result

    def handle_inbound(
        self, message: InboundMessage | Mapping[str, Any], **kwargs: Any
    ) -> TurnResult:
        """Blocking :meth:`AgentRunner.handle_inbound`."""
        result: TurnResult = self._run(self.runner.handle_inbound(message, **kwargs))
        return result

    def run_turn(self, prompt_text: str, **kwargs: Any) -> TurnResult:
        """Blocking :meth:`AgentRunner.run_turn`."""
        result: TurnResult = self._run(self.runner.run_turn(prompt_text, **kwargs))
        return result
