"""The slash commands of ``agentplug chat``: a line that starts with ``/`` is a command,
run here, and never reaches the model.

- ``/help``: the commands;
- ``/reset``: start this session over (``before_reset``, ``session_end`` with reason
  ``reset``, the plugins' session cleanup, a fresh transcript, ``session_start``);
- ``/new``: continue in a new session (the old one stays in the store);
- ``/sessions``: the sessions in the store, this one marked;
- ``/approve``: the approvals waiting on any gateway that shares this chat's store;
  ``/approve ID allow-once|allow-always|deny`` answers one (as ``agentplug approvals
  resolve`` does);
- ``/quit`` (or ``/exit``, or end of input): end the chat.

A line that starts with ``//`` is sent to the model with one ``/`` removed (``//etc is a
folder`` sends ``/etc is a folder``).
"""

from __future__ import annotations

import secrets
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from agentplug.agent.runner import AgentRunner
    from agentplug.gateway import Gateway

__all__ = ["COMMANDS", "ChatState", "dispatch"]

COMMANDS: dict[str, str] = {
    "/help": "list these commands",
    "/reset": "start this session over (fires before_reset; the transcript is emptied)",
    "/new": "continue in a new session (this one stays in the store)",
    "/sessions": "list the sessions in the store (* marks this one)",
    "/approve": "list pending approvals; /approve ID allow-once|allow-always|deny answers one",
    "/quit": "end the chat (also /exit or end of input)",
}
"""Each command and what it does (``/help`` prints them)."""


@dataclass
class ChatState:
    """What the commands act on: the chat's gateway, runner and current session."""

    gateway: Gateway
    runner: AgentRunner
    session_key: str
    write: Callable[[str], None]
    """Prints one line to the person at the terminal."""
    base_key: str = field(default="")
    """The session key the chat started with (``/new`` keys derive from it)."""

    def __post_init__(self) -> None:
        if not self.base_key:
            self.base_key = self.session_key


async def dispatch(line: str, chat: ChatState) -> str | None:
    """Run ``line`` when it is a command and return ``None``; return the text to send to
    the model otherwise (a ``//`` line loses one ``/``)."""
    text = line.strip()
    if not text.startswith("/"):
        return line
    if text.startswith("//"):
        return text[1:]
    name, _, rest = text.partition(" ")
    command = _HANDLERS.get(name.lower())
    if command is None:
        chat.write(f"unknown command {name!r}; /help lists them (start with // to send it)")
        return None
    await command(chat, rest.split())
    return None


async def _help(chat: ChatState, args: list[str]) -> None:
    width = max(len(name) for name in COMMANDS)
    for name, what in COMMANDS.items():
        chat.write(f"  {name.ljust(width)}  {what}")
    where = chat.gateway.state_dir
    chat.write(f"  sessions are kept in {where}" if where else "  sessions are kept in memory")


async def _reset(chat: ChatState, args: list[str]) -> None:
    from agentplug.agent.sessions import UnknownSession

    try:
        fresh = await chat.runner.reset_session(chat.session_key, source="command")
    except UnknownSession:
        chat.write(f"nothing to reset: session {chat.session_key} has no turn yet")
        return
    chat.write(f"session {chat.session_key} reset (new session id {fresh.session_id})")


async def _new(chat: ChatState, args: list[str]) -> None:
    chat.session_key = f"{chat.base_key}-{secrets.token_hex(3)}"
    chat.write(f"new session {chat.session_key} (/sessions lists them)")


async def _sessions(chat: ChatState, args: list[str]) -> None:
    found = chat.runner.list_sessions()
    if not any(s.session_key == chat.session_key for s in found):
        chat.write(f"* {chat.session_key}  (new: no turn yet)")
    for summary in found:
        mark = "*" if summary.session_key == chat.session_key else " "
        when = ""
        if summary.updated_at_ms:
            stamp = datetime.fromtimestamp(summary.updated_at_ms / 1000, UTC)
            when = f"  {stamp:%Y-%m-%d %H:%M}Z"
        chat.write(
            f"{mark} {summary.session_key}  {summary.messages} messages{when}"
            + (f"  {summary.last_user!r}" if summary.last_user else "")
        )


async def _approve(chat: ChatState, args: list[str]) -> None:
    from agentplug.services.approvals.shared import list_pending, resolve_pending
    from agentplug.store import StateStoreUnavailable

    broker = chat.gateway.approvals
    if not broker.shared:
        chat.write(
            "no approval can wait here: this chat's store is in memory (set runtime.state_dir "
            "or state.url to share approvals with other gateways)"
        )
        return
    try:
        if not args:
            pending = list_pending(broker.store)
            if not pending:
                chat.write("no pending approvals")
            for item in pending:
                offered = "|".join(item.get("allowed_decisions") or [])
                chat.write(
                    f"{item['id']}  tool={item.get('tool_name')}  plugin={item.get('plugin_id')}"
                    f"  title={item.get('title')!r}  decisions={offered}"
                )
            return
        if len(args) != 2:
            chat.write("usage: /approve ID allow-once|allow-always|deny")
            return
        reply = resolve_pending(broker.store, args[0], args[1], by="chat")
    except StateStoreUnavailable as exc:
        chat.write(f"the state store cannot be reached: {exc}")
        return
    chat.write(reply.message)


_HANDLERS: dict[str, Callable[[ChatState, list[str]], Awaitable[Any]]] = {
    "/help": _help,
    "/reset": _reset,
    "/new": _new,
    "/sessions": _sessions,
    "/approve": _approve,
}
