"""``message_sending`` at every entrance that delivers a reply: a rewrite is what the
client gets, a cancel delivers nothing."""

from __future__ import annotations

import pytest

from tests.entrances.conftest import MCP_DELIVERS_NOTHING, cells
from tests.entrances.entrance import Entrance, new_nonce
from tests.entrances.matrix_plugin import REWRITTEN


@pytest.mark.parametrize("entrance", cells(mcp_proxy=MCP_DELIVERS_NOTHING), indirect=True)
def test_message_sending_rewrites_the_reply_the_client_gets(entrance: Entrance) -> None:
    seen = entrance.send("[rewrite] the weather is fine", new_nonce())
    assert seen.reply == REWRITTEN


@pytest.mark.parametrize("entrance", cells(mcp_proxy=MCP_DELIVERS_NOTHING), indirect=True)
def test_message_sending_cancel_delivers_nothing(entrance: Entrance) -> None:
    seen = entrance.send("[cancel] the weather is fine", new_nonce())
    assert seen.reply is None
