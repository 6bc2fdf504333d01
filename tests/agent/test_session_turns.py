"""Turns of one session run one after another; turns of different sessions side by side."""

from __future__ import annotations

import asyncio
from typing import Any

from agentplug.agent import ModelRequest, ModelResponse, ScriptedProvider

from tests.agent.conftest import make_runner, run


class Gated(ScriptedProvider):
    """Answers each call only once its gate opens; records what each call was shown."""

    def __init__(self) -> None:
        super().__init__([])
        self.gates: list[asyncio.Event] = []
        self.shown: list[list[str]] = []

    async def complete(self, request: ModelRequest) -> ModelResponse:
        self.shown.append([str(m.get("content")) for m in request.messages])
        gate = asyncio.Event()
        self.gates.append(gate)
        await gate.wait()
        return ModelResponse(text=f"reply {len(self.gates)}")


def test_a_second_turn_of_a_session_waits_and_reads_what_the_first_wrote() -> None:
    runner, _ = make_runner()
    provider = Gated()
    runner.providers.register("scripted", provider)

    async def main() -> list[Any]:
        first = asyncio.create_task(runner.run_turn("one", session_key="s"))
        second = asyncio.create_task(runner.run_turn("two", session_key="s"))
        while not provider.gates:
            await asyncio.sleep(0)
        for _ in range(50):  # the second turn has every chance to reach the model now
            await asyncio.sleep(0)
        assert len(provider.gates) == 1
        provider.gates[0].set()
        while len(provider.gates) < 2:
            await asyncio.sleep(0)
        provider.gates[1].set()
        return list(await asyncio.gather(first, second))

    one, two = run(main())
    assert one.reply == "reply 1" and two.reply == "reply 2"
    assert provider.shown[1][-3:] == ["one", "reply 1", "two"]


def test_turns_of_different_sessions_run_side_by_side() -> None:
    runner, _ = make_runner()
    provider = Gated()
    runner.providers.register("scripted", provider)

    async def main() -> None:
        turns = [asyncio.create_task(runner.run_turn("hi", session_key=key)) for key in ("a", "b")]
        while len(provider.gates) < 2:  # both reach the model before either answers
            await asyncio.sleep(0)
        for gate in provider.gates:
            gate.set()
        await asyncio.gather(*turns)

    run(asyncio.wait_for(main(), 30))
