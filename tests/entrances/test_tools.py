"""What happens around a tool, at every entrance: ``validate()`` refuses before anything
else, the exec env a plugin contributes is filtered before the tool gets it, and
``after_tool_call`` observes the call with its fields."""

from __future__ import annotations

import pytest

from tests.entrances.conftest import NO_ACTIONS, OUTPUT_NOT_EXEC, cells
from tests.entrances.entrance import Entrance, new_nonce
from tests.entrances.matrix_plugin import (
    KEPT_NAME,
    KEPT_VALUE,
    LD_PRELOAD_VALUE,
    NOT_NOW,
    OBSERVED,
    PATH_VALUE,
)


@pytest.mark.parametrize(
    "entrance",
    cells(
        mcp_proxy=NO_ACTIONS.format(what="the upstream servers' tools"),
        pydantic_ai_tools=NO_ACTIONS.format(what="the PydanticAI agent's own tools"),
        pydantic_ai_output=NO_ACTIONS.format(what="the PydanticAI agent's output functions"),
        langchain=NO_ACTIONS.format(what="the LangChain agent's own tools"),
    ),
    indirect=True,
)
def test_an_action_whose_validate_is_false_is_not_offered_and_does_not_run(
    entrance: Entrance,
) -> None:
    seen = entrance.call_tool(NOT_NOW, {"nonce": new_nonce()})
    assert NOT_NOW not in seen.model[0]["tools"]
    assert not seen.ran
    assert "action NOT_NOW refused: its validate() returned false" in seen.read
    assert seen.decision is None and seen.seen("before_tool_call") == []  # refused first


@pytest.mark.parametrize("entrance", cells(pydantic_ai_output=OUTPUT_NOT_EXEC), indirect=True)
def test_an_exec_env_a_plugin_contributes_reaches_the_tool_without_ld_preload_or_path(
    entrance: Entrance,
) -> None:
    seen = entrance.call_tool(entrance.exec_tool, {"nonce": new_nonce()})
    assert seen.decision is not None
    assert {"LD_PRELOAD", "PATH"} <= set(seen.decision.env_dropped)
    assert KEPT_NAME in seen.decision.env_kept
    (run,) = seen.runs
    assert run["process_env"]["LD_PRELOAD"] != LD_PRELOAD_VALUE
    assert run["process_env"]["PATH"] != PATH_VALUE
    # None: this entrance hands its tools no exec env at all (they run as they are).
    assert run["handed_env"] in (None, {KEPT_NAME: KEPT_VALUE})


@pytest.mark.parametrize("entrance", cells(), indirect=True)
def test_after_tool_call_observes_the_call_with_its_fields(entrance: Entrance) -> None:
    nonce = new_nonce()
    seen = entrance.call_tool(OBSERVED, {"nonce": nonce, "text": "hello"})
    (row,) = seen.seen("after_tool_call")
    event, ctx = row["event"], row["ctx"]
    assert event["tool_name"] == OBSERVED
    assert event["params"] == {"nonce": nonce, "text": "hello"}
    assert event["result"] == f"OBSERVED ran ({nonce})"
    assert event["error"] is None
    assert isinstance(event["duration_ms"], float)
    assert event["run_id"] and event["tool_call_id"]
    assert ctx["session_key"] and ctx["agent_id"] == "main"
