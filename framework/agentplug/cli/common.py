"""What every ``agentplug`` command shares: the parser class, ``-v``, the config lookup and
one-line errors.

Exit codes, the same for every command: ``0`` done, ``1`` the command ran and what it
checked or did failed (an expectation, an action, a blocked install, doctor's problems),
``2`` a usage error (a bad argument, a missing or invalid config or scenario file, an
unknown plugin, action or hook name). Errors are one line on stderr,
``agentplug <command>: error: <what was wrong>; <how to fix it>``; ``-v`` adds the
traceback of an unexpected exception.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any, NoReturn

from agentplug.config.suggest import did_you_mean
from agentplug.core.errors import one_line

if TYPE_CHECKING:  # config models load when a command reads its config, not for --help
    from agentplug.config.lookup import ConfigSource
    from agentplug.config.model import AgentplugConfig
    from agentplug.gateway import Gateway
    from agentplug.store.location import StateLocation

__all__ = [
    "EXIT_FAILED",
    "EXIT_OK",
    "EXIT_USAGE",
    "NO_PLUGINS_HELP",
    "PLUGIN_COMMANDS",
    "AgentplugArgumentParser",
    "add_plugin_switch",
    "add_verbose_options",
    "command_config",
    "command_gateway",
    "command_name",
    "command_state",
    "error_line",
    "one_line",
    "walk_parsers",
]

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2


class AgentplugArgumentParser(argparse.ArgumentParser):
    """An argument parser whose usage errors are one line naming the fix (exit 2): a
    did-you-mean for a misspelt command, option or choice, and the ``--help`` of the
    command the mistake is in."""

    _argv: list[str] | None = None

    def parse_known_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> tuple[argparse.Namespace, list[str]]:
        # Remembered for error(): the top parser's unknown-argument error names the
        # command the mistake is in.
        self._argv = list(sys.argv[1:] if args is None else args)
        return super().parse_known_args(args, namespace)

    def error(self, message: str) -> NoReturn:
        where: argparse.ArgumentParser = self
        choices = _subcommand_choices(self)
        if choices and message.startswith("the following arguments are required"):
            message = f"choose a command: {', '.join(choices)}"
        wrong = re.search(r"invalid choice: '([^']*)'", message)
        if wrong and choices:
            hint = did_you_mean(wrong.group(1), choices)
            message = f"unknown command {wrong.group(1)!r}{hint} (commands: {', '.join(choices)})"
        elif wrong:  # an argument's value outside its choices
            offered = re.findall(r"'([^']*)'", message.split("choose from", 1)[-1])
            hint = did_you_mean(wrong.group(1), offered)
            argument = message.split(": invalid choice", 1)[0]
            message = f"{argument}: {wrong.group(1)!r} is not one of {', '.join(offered)}{hint}"
        unknown = re.match(r"unrecognized arguments: (.*)", message)
        if unknown and self._argv is not None:
            where = _command_parser(self, self._argv)
            first = unknown.group(1).split()[0]
            options = [o for a in where._actions for o in a.option_strings if o.startswith("--")]
            hint = did_you_mean(first.split("=")[0], options) if first.startswith("-") else ""
            message = f"unknown argument {first!r} for `{where.prog}`{hint}"
        print(f"{self.prog}: error: {message} (see `{where.prog} --help`)", file=sys.stderr)
        raise SystemExit(EXIT_USAGE)


def _command_parser(
    parser: argparse.ArgumentParser, argv: Sequence[str]
) -> argparse.ArgumentParser:
    """The parser of the command ``argv`` runs (``agentplug approvals list`` for
    ``["approvals", "list", ...]``): the words that name subcommands, in order."""
    for word in argv:
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction) and word in action.choices:
                parser = action.choices[word]
                break
    return parser


def _subcommand_choices(parser: argparse.ArgumentParser) -> list[str]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return list(action.choices)
    return []


def walk_parsers(
    parser: argparse.ArgumentParser, path: tuple[str, ...] = ()
) -> Iterator[tuple[tuple[str, ...], argparse.ArgumentParser]]:
    """Every parser of the command tree with its command path (``("plugin", "eject")``)."""
    yield path, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, child in action.choices.items():
                yield from walk_parsers(child, (*path, name))


def add_verbose_options(parser: argparse.ArgumentParser) -> None:
    """``-v/--verbose`` on the top parser and on every command (``agentplug -v plugins`` and
    ``agentplug plugins -v`` both work)."""
    for path, each in walk_parsers(parser):
        if any("-v" in a.option_strings for a in each._actions):
            continue
        each.add_argument(
            "-v",
            "--verbose",
            action="count",
            default=0 if not path else argparse.SUPPRESS,
            help="say which config file is used; show tracebacks of failing handlers",
        )


# Commands that load installed plugins: each has ``--no-plugins``.
PLUGIN_COMMANDS = frozenset(
    {"hooks", "plugins", "doctor", "actions", "chat", "mcp-proxy", "serve", "supervise"}
)
NO_PLUGINS_HELP = (
    "load no installed plugin (the same as AGENTPLUG_DISABLE_PLUGINS=1, which every "
    "command honours)"
)


def add_plugin_switch(parser: argparse.ArgumentParser) -> None:
    """``--no-plugins`` on every command of :data:`PLUGIN_COMMANDS` (and its subcommands)."""
    for path, each in walk_parsers(parser):
        if not path or path[0] not in PLUGIN_COMMANDS:
            continue
        if any(isinstance(a, argparse._SubParsersAction) for a in each._actions):
            continue  # a group: its commands get the option
        if any("--no-plugins" in a.option_strings for a in each._actions):
            continue
        each.add_argument("--no-plugins", action="store_true", help=NO_PLUGINS_HELP)


def command_name(args: argparse.Namespace) -> str:
    """``agentplug plugin eject`` for the parsed command (for error lines)."""
    parts = ["agentplug"]
    for key in ("command", *sorted(k for k in vars(args) if k.endswith("_command"))):
        value = getattr(args, key, None)
        if isinstance(value, str) and value not in parts:
            parts.append(value)
    return " ".join(parts)


def error_line(args: argparse.Namespace | str, message: str) -> str:
    """Print ``<command>: error: <message>`` on stderr and return it."""
    name = args if isinstance(args, str) else command_name(args)
    line = f"{name}: error: {message}"
    print(line, file=sys.stderr)
    return line


def command_config(args: argparse.Namespace) -> tuple[AgentplugConfig, ConfigSource]:
    """The command's config through the one lookup (``--config``, ``$AGENTPLUG_CONFIG``,
    ``./agentplug.{toml,yaml,json}``, none); ``-v`` says which file on stderr. Every
    section is checked before the command runs: a :class:`ConfigError` lists every
    problem with the file and the key (exit 2)."""
    from agentplug.gateway.operator_config import read_operator_config

    return read_operator_config(getattr(args, "config", None), verbose=verbose(args))


def command_state(
    args: argparse.Namespace,
    config: AgentplugConfig,
    *,
    url: str | None = None,
    option: str = "--url",
) -> StateLocation:
    """Where the command's state lives: the one rule of
    :func:`~agentplug.store.location.state_location` with the command's ``--state-dir``,
    its URL option (``url``, named ``option`` in messages) and the commands' default
    folder, ``.agentplug-state``."""
    from agentplug.store.location import DEFAULT_STATE_DIR, state_location

    return state_location(
        config,
        state_dir=getattr(args, "state_dir", None),
        url=url,
        default_dir=DEFAULT_STATE_DIR,
        url_option=option,
    )


def verbose(args: Any) -> bool:
    """Whether ``-v`` was given."""
    return bool(getattr(args, "verbose", 0))


def command_gateway(
    config: AgentplugConfig,
    *,
    plugins: bool = True,
    state: bool = False,
    use_cache: bool = True,
    **parts: Any,
) -> Gateway:
    """The gateway a command runs on: built once from ``config``, the installed plugins
    loaded (``plugins``), the configured state store opened only when the command reads or
    writes state (``state``; otherwise an in-memory one, so listing commands never need the
    database). ``parts`` go to :class:`~agentplug.Gateway`."""
    from agentplug.gateway import Gateway
    from agentplug.store.location import DEFAULT_STATE_DIR, state_location

    if not state and "store" not in parts:
        from agentplug.store import MemoryStore

        parts["store"] = MemoryStore()
    if "state_dir" not in parts:  # the commands' state folder, which plugins may use too
        parts["state_dir"] = state_location(config, default_dir=DEFAULT_STATE_DIR).state_dir
    gateway = Gateway(config, **parts)
    if plugins:
        gateway.host.load_installed(
            use_cache=use_cache, before_import=gateway.plugin_sources.prepare()
        )
    return gateway
