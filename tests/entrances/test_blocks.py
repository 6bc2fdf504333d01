"""Blocks, at every entrance: a public reason reaches the model, a confidential one never
reaches the model or the client, and a trusted policy decides before the ordinary hooks.

The rules live once, in the matrix plugin (tests/entrances/matrix_plugin.py).
"""

from __future__ import annotations

import json

import pytest

from tests.entrances.conftest import FRAMEWORK_TURN, NO_TURN, cells
from tests.entrances.entrance import Entrance, new_nonce
from tests.entrances.matrix_plugin import (
    FAILING_HOOK,
    POLICY_BLOCKED,
    POLICY_ID,
    POLICY_REASON,
    PUBLIC_BLOCK,
    PUBLIC_REASON,
    SECRET,
)


@pytest.mark.parametrize("entrance", cells(), indirect=True)
def test_a_block_with_a_public_reason_reaches_the_model_and_the_tool_does_not_run(
    entrance: Entrance,
) -> None:
    seen = entrance.call_tool(PUBLIC_BLOCK, {"nonce": new_nonce()})
    assert not seen.ran
    assert [row["tool"] for row in seen.seen("before_tool_call")] == [PUBLIC_BLOCK]
    assert f"tool call blocked: {PUBLIC_REASON}" in seen.read
    assert PUBLIC_REASON in seen.client


@pytest.mark.parametrize("entrance", cells(), indirect=True)
def test_a_failing_tool_hook_blocks_and_its_message_never_reaches_the_model_or_the_client(
    entrance: Entrance,
) -> None:
    seen = entrance.call_tool(FAILING_HOOK, {"nonce": new_nonce()})
    assert not seen.ran
    assert "tool call blocked: plugin 'matrix' failed" in seen.read  # named by plugin id only
    assert SECRET not in seen.read
    assert SECRET not in seen.client


@pytest.mark.parametrize(
    "entrance",
    cells(
        mcp_proxy=NO_TURN,
        pydantic_ai_tools=FRAMEWORK_TURN.format(framework="PydanticAI"),
        pydantic_ai_output=FRAMEWORK_TURN.format(framework="PydanticAI"),
        langchain=FRAMEWORK_TURN.format(framework="LangChain"),
    ),
    indirect=True,
)
def test_a_before_agent_run_block_reason_never_reaches_the_model_or_the_client(
    entrance: Entrance,
) -> None:
    nonce = new_nonce()
    blocked = entrance.send("[forbidden] tell me everything", nonce)
    after = entrance.send("and now?", nonce)  # the same session: the model reads its history
    assert blocked.model == []  # the model was not called for the blocked message
    assert blocked.reply is None
    assert SECRET not in blocked.client
    assert after.model != [] and SECRET not in json.dumps(after.model)


@pytest.mark.parametrize("entrance", cells(), indirect=True)
def test_a_trusted_policy_decides_first_and_its_block_is_terminal(entrance: Entrance) -> None:
    seen = entrance.call_tool(POLICY_BLOCKED, {"nonce": new_nonce()})
    assert not seen.ran
    assert seen.seen("before_tool_call") == []  # the ordinary hook never saw the call
    assert f"tool call blocked: {POLICY_REASON}" in seen.read
    assert seen.decision is not None and seen.decision.blocked_by_policy == POLICY_ID
