"""``agentplug chat``: an interactive agent session at the terminal.

Each line you type is an inbound message on the ``chat`` channel, through the same path
as any channel (``inbound_claim``, ``message_received``, the turn, delivery with
``message_sent``): :class:`~agentplug.agent.AgentRunner` with the configured provider
(``agent.model``; the offline ``scripted`` provider repeats what you type when nothing is
configured, and the banner says so and how to choose a model). After each reply a
compact trace shows which hooks ran, which plugin blocked (and why), rewrote or asked for
approval, refused tool calls, and the timings; approvals are asked at the terminal.
``--trace`` shows every hook with each handler's status and measured duration; ``--json``
prints the trace as JSON lines instead, for programs (one object per hook, model call or
tool call, then one ``{"turn": ...}`` summary). ``--demo`` runs a built-in offline
conversation with the example plugins (:mod:`agentplug.cli.chat_demo`). Lines starting
with ``/`` are commands (:mod:`agentplug.cli.chat_commands`: ``/help``, ``/reset``,
``/new``, ``/sessions``, ``/approve``) and never reach the model. ``/quit`` or end of input
ends the session (``session_end``, then ``gateway_stop``). The reply is printed as it
streams in, as far as the delivery hooks allow (:mod:`agentplug.agent.streaming`).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from dataclasses import dataclass
from typing import Any

from agentplug.cli.chat_commands import ChatState, dispatch
from agentplug.config.lookup import CONFIG_HELP
from agentplug.store.location import STATE_DIR_HELP

__all__ = ["add_chat_command", "cmd_chat"]


def add_chat_command(subparsers: Any) -> None:
    """Add ``agentplug chat`` to the command parser."""
    p = subparsers.add_parser(
        "chat",
        help="an interactive agent session against the configured model",
        description="Talk to the agent at the terminal: every line is one turn through the "
        "runner and the installed plugins; a compact trace follows each reply and approvals "
        "are asked here. /quit or end of input ends the session.",
    )
    p.add_argument("--config", metavar="FILE", help=CONFIG_HELP)
    p.add_argument("--model", metavar="PROVIDER/MODEL", help="override agent.model")
    p.add_argument(
        "--script",
        metavar="FILE",
        help="scripted provider replies (a JSON list), for offline sessions and tests",
    )
    p.add_argument(
        "--session",
        metavar="KEY",
        default="agent:main:chat:terminal",
        help="the session key the turns run in (default: agent:main:chat:terminal)",
    )
    p.add_argument("--state-dir", metavar="DIR", help=STATE_DIR_HELP)
    p.add_argument(
        "--demo",
        action="store_true",
        help="an offline demo with the example plugins: a tool call, a block and an approval",
    )
    out = p.add_mutually_exclusive_group()
    out.add_argument(
        "--trace",
        action="store_true",
        help="after each reply, every hook with each handler's status and duration",
    )
    out.add_argument(
        "--json",
        action="store_true",
        help="machine output: the trace as JSON lines (one per hook, model and tool call, "
        "then a turn summary), no banner or prompts",
    )
    p.set_defaults(func=cmd_chat, reports_load_errors=True)


@dataclass
class _Chat:
    gateway: Any
    state: str
    """The ``state: ...`` line."""
    demo: Any = None
    """The :class:`~agentplug.cli.chat_demo.DemoSetup` of ``--demo``."""
    printed: Any = None
    """The :class:`_Line` the streamed reply is printed on (``None``: not streamed)."""


def _gateway(args: argparse.Namespace, resolver: Any, channel: Any) -> _Chat:
    """The chat's gateway and its ``state: ...`` line: the config's plugins, its store
    (the commands' state folder, so allow-always grants and pending approvals are kept and
    another terminal's ``agentplug approvals`` sees them), the terminal answering
    approvals and printing replies."""
    from agentplug.agent.providers.scripted import ScriptedProvider, load_script
    from agentplug.cli.common import command_config, command_state
    from agentplug.gateway import Gateway

    if args.demo:
        return _demo_gateway(resolver, channel)
    config, _source = command_config(args)  # --config, $AGENTPLUG_CONFIG, ./agentplug.*
    agent = dict(config.agent)
    if args.model:
        agent["model"] = args.model
    provider = None
    if args.script:
        provider = ScriptedProvider(load_script(args.script))
        agent.setdefault("model", "scripted/script")
    location = command_state(args, config)
    # The store opens here: state.url must be reachable before the first turn (one line if
    # not).
    gateway = Gateway.from_config(
        config,
        load_plugins=True,  # --no-plugins / $AGENTPLUG_DISABLE_PLUGINS: the loader's switch
        resolver=resolver,
        provider=provider,
        channel=channel,
        agent=agent,
        state_dir=location.state_dir,
    )
    return _Chat(gateway, location.describe())


def _demo_gateway(resolver: Any, channel: Any) -> _Chat:
    from agentplug.agent.providers.scripted import ScriptedProvider
    from agentplug.cli.chat_demo import AFTER_DEMO, demo_setup
    from agentplug.gateway import Gateway
    from agentplug.store import MemoryStore

    demo = demo_setup()
    gateway = Gateway.from_config(
        demo.config,
        load_plugins=True,
        resolver=resolver,
        provider=ScriptedProvider(demo.responses, default=AFTER_DEMO),
        channel=channel,
        store=MemoryStore(),
    )
    return _Chat(gateway, "state: memory: (the demo keeps nothing)", demo)


def _print(text: str) -> None:
    sys.stdout.write(text + "\n")
    sys.stdout.flush()


class _Line:
    """The ``agent>`` line being printed as the reply streams in."""

    def __init__(self) -> None:
        self.step: int | None = None
        self.text = ""

    def add(self, step: int, text: str) -> None:
        if step != self.step:  # a new model call (or a retry) starts a new line
            self.close()
            sys.stdout.write("agent> ")
            self.step = step
        sys.stdout.write(text)
        sys.stdout.flush()
        self.text += text

    def close(self) -> None:
        if self.step is not None:
            sys.stdout.write("\n")
            sys.stdout.flush()
        self.step, self.text = None, ""


async def _streamed_turn(runner: Any, message: dict[str, Any], line: _Line) -> Any:
    """One turn through ``runner.stream``: text printed as it is released."""
    from agentplug.agent.streaming import FinalReply, ModelRetry, TextDelta

    result = None
    async for event in runner.stream(message):
        if isinstance(event, TextDelta):
            line.add(event.step, event.text)
        elif isinstance(event, ModelRetry):
            line.close()
        elif isinstance(event, FinalReply):
            result = event.result
    line.close()
    return result


_SENDER = "terminal"


async def _start(args: argparse.Namespace, chat: _Chat) -> list[str] | None:
    """Start the gateway; the banner's warnings, or ``None`` when the session cannot run
    (the demo without its plugins)."""
    from agentplug.cli.chat_demo import add_demo_tools, missing_demo_plugins
    from agentplug.gateway.operator_config import model_problems

    gateway = chat.gateway
    gateway.host.timings = True  # the trace shows how long each handler really took
    warnings = list(await gateway.start(host_name="agentplug chat"))
    if chat.demo is not None:
        missing = missing_demo_plugins({r.plugin_id for r in gateway.host.plugins})
        if missing is not None:
            print(f"agentplug chat --demo: error: {missing}", file=sys.stderr)
            return None
        add_demo_tools(gateway.runner.tools)
    model = gateway.runner.config.model
    warnings += [
        f"{key}: {problem} (the first turn fails unless a plugin's before_model_resolve "
        "picks another)"
        for key, problem in model_problems({"agent": {"model": model}})
    ]
    return warnings


def _banner(args: argparse.Namespace, chat: _Chat, warnings: list[str]) -> None:
    from agentplug.actions.builtins import BUILTIN_PLUGIN_ID
    from agentplug.cli.chat_view import banner_lines

    if args.json:
        for warning in warnings:
            print(f"agentplug chat: warning: {warning}", file=sys.stderr)
        return
    gateway = chat.gateway
    scripted = "--script " + args.script if args.script else None
    if chat.demo is not None:
        scripted = "the demo's script"
    for line in banner_lines(
        model=gateway.runner.config.model,
        # The built-in actions are part of agentplug, not a plugin someone installed.
        plugins=[r.plugin_id for r in gateway.host.plugins if r.plugin_id != BUILTIN_PLUGIN_ID],
        state=chat.state,
        scripted_from=scripted,
        warnings=warnings,
        notes=[(r.plugin_id, note) for r in gateway.host.plugins for note in r.notes],
    ):
        _print(line)
    for line in chat.demo.intro if chat.demo is not None else ():
        _print(line)


async def _turn(args: argparse.Namespace, chat: _Chat, text: str, session_key: str) -> None:
    from agentplug.cli.chat_view import detail_lines, json_lines, turn_lines

    message = {"content": text, "channel": "chat", "sender_id": _SENDER, "session_key": session_key}
    if args.json or chat.printed is None:
        result = await chat.gateway.runner.handle_inbound(message)
    else:
        result = await _streamed_turn(chat.gateway.runner, message, chat.printed)
    if args.json:
        for line in json_lines(result):
            _print(line)
        return
    if result.delivery is not None and result.delivery.status == "delivered":
        pass  # printed by the channel
    elif result.reply:
        _print(f"agent> {result.reply}")
    elif result.status == "blocked":
        _print(f"agent> (blocked by {result.blocked_by}; not sent to the model)")
    elif result.status == "suppressed":
        _print("agent> (the reply was suppressed by a plugin)")
    else:
        _print(f"agent> ({result.status}{': ' + result.error if result.error else ''})")
    for line in detail_lines(result) if args.trace else turn_lines(result):
        _print(line)


async def _session(args: argparse.Namespace) -> int:
    from agentplug.services.approvals import TerminalResolver

    # The person in this chat session decides; with --json stdout carries JSON only.
    terminal = TerminalResolver(output=sys.stderr if args.json else None, by="chat")
    printed = _Line()

    def show(payload: dict[str, Any]) -> dict[str, bool]:
        # The terminal is this chat's channel: a reply is printed once every delivery
        # hook has had its say, and message_sent reports it. Text streamed before (as
        # the delivery hooks allowed) that is the reply is not printed twice.
        text = payload.get("text") or ""
        if not args.json:
            streamed = printed.text == text and printed.step is not None
            printed.close()
            if not streamed:
                _print(f"agent> {text}")
        return {"printed": True}

    chat = _gateway(args, terminal, show)
    chat.printed = printed
    try:
        warnings = await _start(args, chat)
        if warnings is None:
            return 1
        _banner(args, chat, warnings)
        state = ChatState(chat.gateway, chat.gateway.runner, args.session, _print)
        if chat.demo is not None:
            _print(f"you> {chat.demo.first_message}")
            await _turn(args, chat, chat.demo.first_message, state.session_key)
        while True:
            if not args.json:
                sys.stdout.write("you> ")
                sys.stdout.flush()
            line = await terminal.read_line()
            if line is None or line.strip() in ("/quit", "/exit"):
                break
            text = line.strip()
            if not text:
                continue
            if text.startswith("/"):  # a command (/help, /reset, ...): never sent to the model
                sent = await dispatch(text, state)
                if sent is None:
                    continue
                text = sent
            await _turn(args, chat, text, state.session_key)
    finally:
        await chat.gateway.stop()
    return 0


def cmd_chat(args: argparse.Namespace) -> int:
    """Run the interactive session (exit 0 at ``/quit`` or end of input)."""
    return asyncio.run(_session(args))
