"""Approvals, at every entrance: allowed, denied, not answered in time, and an
``allow-always`` grant that answers the next call without asking.

The person answers as each entrance lets them: at the terminal (``chat``), through the
control API (``serve``), or through the resolver the host gave its gateway (the runner,
the MCP proxy, the adapters).
"""

from __future__ import annotations

import pytest

from tests.entrances.conftest import cells
from tests.entrances.entrance import Entrance, new_nonce
from tests.entrances.matrix_plugin import GRANTABLE, NEEDS_APPROVAL, SHORT_APPROVAL


@pytest.mark.parametrize("entrance", cells(), indirect=True)
def test_an_approval_allowed_once_lets_the_tool_run(entrance: Entrance) -> None:
    seen = entrance.call_tool(NEEDS_APPROVAL, {"nonce": new_nonce()}, answer="allow-once")
    assert seen.asked == 1
    assert [run["tool"] for run in seen.runs] == [NEEDS_APPROVAL]
    assert seen.decision is not None and seen.decision.approval == "allow-once"


@pytest.mark.parametrize("entrance", cells(), indirect=True)
def test_an_approval_denied_keeps_the_tool_from_running_and_the_model_reads_why(
    entrance: Entrance,
) -> None:
    seen = entrance.call_tool(NEEDS_APPROVAL, {"nonce": new_nonce()}, answer="deny")
    assert seen.asked == 1
    assert not seen.ran
    assert "was denied by the approver" in seen.read


@pytest.mark.parametrize("entrance", cells(), indirect=True)
def test_an_approval_nobody_answers_times_out_and_the_tool_does_not_run(
    entrance: Entrance,
) -> None:
    seen = entrance.call_tool(SHORT_APPROVAL, {"nonce": new_nonce()}, answer=None)
    assert not seen.ran
    assert "was not answered within" in seen.read
    assert seen.decision is not None and seen.decision.approval == "timeout"


@pytest.mark.parametrize("entrance", cells(), indirect=True)
def test_an_allow_always_grant_answers_the_next_call_without_asking(entrance: Entrance) -> None:
    params = {"nonce": new_nonce()}
    first = entrance.call_tool(GRANTABLE, params, answer="allow-always")
    second = entrance.call_tool(GRANTABLE, params, answer=None)
    assert (first.asked, len(first.runs)) == (1, 1)
    assert (second.asked, len(second.runs)) == (0, 1)
    assert second.decision is not None and second.decision.approval_by == "grant"
