"""``agentplug chat``: an interactive agent session at the terminal.

Each line you type is an inbound message on the ``chat`` channel, through the same path
as any channel (``inbound_claim``, ``message_received``, the turn, delivery with
``message_sent``): :class:`~agentplug.agent.AgentRunner` with the configured provider
(``agent.model``; the offline ``scripted`` provider echoes when nothing is configured).
After each reply a compact trace shows which hooks ran, which plugin blocked, rewrote or
asked for approval, and the timings; approvals are asked at the terminal. ``--trace``
prints the trace as JSON lines instead (one object per hook, model call or tool call,
then one ``{"turn": ...}`` summary). ``/quit`` or end of input ends the session
(``session_end``, then ``gateway_stop``). The reply is printed as it streams in, as far
as the delivery hooks allow (:mod:`agentplug.agent.streaming`).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from typing import Any

from agentplug.core.config_lookup import CONFIG_HELP

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
    p.add_argument("--session", metavar="KEY", default="agent:main:chat:terminal")
    p.add_argument("--trace", action="store_true", help="print the trace as JSON lines")
    p.add_argument("--no-plugins", action="store_true", help="do not load installed plugins")
    p.set_defaults(func=cmd_chat)


def _gateway(args: argparse.Namespace, resolver: Any, channel: Any) -> Any:
    """The chat's gateway: the config's plugins, its store (so allow-always grants and
    pending approvals are the gateway's: on a shared store any process can answer them),
    the terminal answering approvals and printing replies."""
    from agentplug.agent.providers.scripted import ScriptedProvider, load_script
    from agentplug.cli.common import command_config
    from agentplug.gateway import Gateway

    config, _source = command_config(args)  # --config, $AGENTPLUG_CONFIG, ./agentplug.*
    agent = dict(config.agent)
    if args.model:
        agent["model"] = args.model
    provider = None
    if args.script:
        provider = ScriptedProvider(load_script(args.script))
        agent.setdefault("model", "scripted/script")
    # The store opens here: state.url must be reachable before the first turn (one line if
    # not).
    return Gateway.from_config(
        config,
        load_plugins=not args.no_plugins,
        resolver=resolver,
        provider=provider,
        channel=channel,
        agent=agent,
    )


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


async def _session(args: argparse.Namespace) -> int:
    from agentplug.agent.trace import summary_lines
    from agentplug.services.approvals import TerminalResolver

    terminal = TerminalResolver(by="chat")  # the person in this chat session decides
    printed = _Line()

    def show(payload: dict[str, Any]) -> dict[str, bool]:
        # The terminal is this chat's channel: a reply is printed once every delivery
        # hook has had its say, and message_sent reports it. Text streamed before (as
        # the delivery hooks allowed) that is the reply is not printed twice.
        text = payload.get("text") or ""
        if not args.trace:
            streamed = printed.text == text and printed.step is not None
            printed.close()
            if not streamed:
                _print(f"agent> {text}")
        return {"printed": True}

    gateway = _gateway(args, terminal, show)
    runner = gateway.runner
    for problem in await gateway.start(host_name="agentplug chat"):
        print(f"agentplug chat: warning: {problem}", file=sys.stderr)
    if not args.trace:
        plugins = len(gateway.host.plugins)
        _print(f"agentplug chat: {runner.config.model} ({plugins} plugins); /quit ends")
    try:
        while True:
            if not args.trace:
                sys.stdout.write("you> ")
                sys.stdout.flush()
            line = await terminal.read_line()
            if line is None or line.strip() in ("/quit", "/exit"):
                break
            text = line.strip()
            if not text:
                continue
            message = {
                "content": text,
                "channel": "chat",
                "sender_id": _SENDER,
                "session_key": args.session,
            }
            if args.trace:
                result = await runner.handle_inbound(message)
            else:
                result = await _streamed_turn(runner, message, printed)
            if args.trace:
                for entry in result.trace:
                    _print(json.dumps(entry, default=str))
                summary = {
                    "turn": {
                        "run_id": result.run_id,
                        "status": result.status,
                        "success": result.success,
                        "reply": result.reply,
                        "error": result.error,
                        "duration_ms": round(result.duration_ms, 3),
                    }
                }
                _print(json.dumps(summary, default=str))
                continue
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
            for trace_line in summary_lines(result.trace):
                _print(f"  | {trace_line}")
            _print(
                f"  | {result.status} in {result.duration_ms:.1f} ms, {result.steps} model call(s)"
            )
    finally:
        await gateway.stop()
    return 0


def cmd_chat(args: argparse.Namespace) -> int:
    """Run the interactive session (exit 0 at ``/quit`` or end of input)."""
    return asyncio.run(_session(args))
