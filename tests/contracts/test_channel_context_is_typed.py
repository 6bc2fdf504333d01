"""Issue 13.12: typed ``channel_context.sender`` / ``.chat`` checked against the ids."""

from __future__ import annotations

import pytest
from agentplug_hookspecs.common import (
    AgentContext,
    ChannelChatContext,
    ChannelSenderContext,
)


def test_channel_context_sender_and_chat_are_typed_models() -> None:
    ctx = AgentContext(
        sender_id="u1",
        chat_id="c1",
        channel_context={
            "sender": {"id": "u1", "name": "Ana", "username": "ana"},
            "chat": {"id": "c1", "type": "group", "title": "Billing"},
        },
    )
    assert ctx.channel_context is not None
    assert isinstance(ctx.channel_context.sender, ChannelSenderContext)
    assert isinstance(ctx.channel_context.chat, ChannelChatContext)
    assert ctx.channel_context.sender.username == "ana"
    assert ctx.channel_context.chat.title == "Billing"


def test_channel_context_sender_and_chat_keep_channel_specific_extra_keys() -> None:
    ctx = AgentContext(
        channel_context={"sender": {"id": "u1", "union_id": "on_1"}, "chat": {"id": "c1"}}
    )
    assert ctx.channel_context is not None
    assert ctx.channel_context.sender is not None
    assert ctx.channel_context.sender.model_extra == {"union_id": "on_1"}


def test_channel_context_sender_id_must_match_sender_id() -> None:
    with pytest.raises(ValueError, match=r"channel_context\.sender\.id .*sender_id"):
        AgentContext(sender_id="u1", channel_context={"sender": {"id": "u2"}})


def test_channel_context_chat_id_must_match_chat_id() -> None:
    with pytest.raises(ValueError, match=r"channel_context\.chat\.id .*chat_id"):
        AgentContext(chat_id="c1", channel_context={"chat": {"id": "c9"}})


def test_channel_context_id_alone_is_accepted_without_the_top_level_id() -> None:
    ctx = AgentContext(channel_context={"sender": {"id": "u1"}})
    assert ctx.channel_context is not None and ctx.channel_context.sender is not None
    assert ctx.channel_context.sender.id == "u1"


def test_channel_context_is_read_only() -> None:
    ctx = AgentContext(channel_context={"sender": {"id": "u1"}})
    assert ctx.channel_context is not None and ctx.channel_context.sender is not None
    with pytest.raises((TypeError, ValueError)):
        ctx.channel_context.sender.id = "u2"  # type: ignore[misc]


def test_channel_context_numeric_chat_ids_compare_with_string_chat_ids() -> None:
    ctx = AgentContext(chat_id="-100123", channel_context={"chat": {"id": -100123}})
    assert ctx.channel_context is not None and ctx.channel_context.chat is not None
    assert ctx.channel_context.chat.id == -100123
