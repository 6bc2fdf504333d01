"""The ``agentplug`` command line: the parser (built from each command module) and ``main``.

Commands live in one module each (``run``, ``catalogue``, ``docs``, ``actions``,
``approvals``) or next to what they drive (``agentplug.api.serve``,
``agentplug.plugins.manager.cli``, ``agentplug.plugins.supervisor``); what they share
(config lookup, ``-v``, exit codes, one-line errors) is in :mod:`agentplug.cli.common`.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import logging
import os
import sys
import traceback
from collections.abc import Iterator, Sequence

from agentplug.cli.common import (
    EXIT_FAILED,
    EXIT_USAGE,
    AgentplugArgumentParser,
    add_plugin_switch,
    add_verbose_options,
    error_line,
    one_line,
    verbose,
)
from agentplug.cli.examples import add_examples
from agentplug.core.errors import AgentplugError

__all__ = ["build_parser", "main"]

_DESCRIPTION = (
    "The agentplug command line. Replay scenarios, inspect hooks and plugins, validate the "
    "config, list and run actions, serve the control API, manage plugins."
)
_EPILOG = (
    "Config: --config FILE, else $AGENTPLUG_CONFIG, else ./agentplug.toml, ./agentplug.yaml "
    "or ./agentplug.json, else none (-v says which). State: --state-dir, else "
    "$AGENTPLUG_STATE_DIR, else runtime.state_dir, else ./.agentplug-state. "
    "AGENTPLUG_DISABLE_PLUGINS=1 (or --no-plugins) loads no installed plugin. Exit status: "
    "0 done, 1 failed, 2 usage error or invalid config. Each command has examples in "
    "`agentplug COMMAND --help`; `agentplug completion bash|zsh|fish` prints shell completion."
)


# Every command group is imported only when its command runs: ``agentplug --help`` lists
# the commands from this table (name -> summary, the function that registers the group), so
# it loads no pydantic model, host or layer above the core. ``tests/test_startup.py`` checks
# that each summary matches what the group registers. Names sharing a function are one group.
LAZY_COMMANDS: dict[str, tuple[str, str]] = {
    "run": (
        "replay a scenario through real plugins and check its expectations",
        "agentplug.cli.run:add_run_command",
    ),
    "hooks": ("list every declared hook", "agentplug.cli.catalogue:add_catalogue_commands"),
    "plugins": (
        "list discovered plugins and their handlers",
        "agentplug.cli.catalogue:add_catalogue_commands",
    ),
    "doctor": ("validate config and plugins", "agentplug.cli.catalogue:add_catalogue_commands"),
    "config": ("operator config tools", "agentplug.cli.docs:add_docs_commands"),
    "docs": ("documentation generators", "agentplug.cli.docs:add_docs_commands"),
    "dev": ("maintainer tools", "agentplug.cli.docs:add_docs_commands"),
    "new": (
        "create a new plugin package from the template",
        "agentplug.cli.new:add_new_command",
    ),
    "actions": (
        "list every action, test a custom one, run the action flow",
        "agentplug.cli.actions:add_actions_commands",
    ),
    "approvals": (
        "list or revoke standing allow-always grants; list or answer pending approvals",
        "agentplug.cli.approvals:add_approvals_commands",
    ),
    "state": (
        "migrate, check, export or import the state store (SQLite or PostgreSQL)",
        "agentplug.cli.state:add_state_commands",
    ),
    "chat": (
        "an interactive agent session against the configured model",
        "agentplug.cli.chat:add_chat_command",
    ),
    "sessions": (
        "list, show or reset agent sessions (transcripts in the state store)",
        "agentplug.cli.sessions:add_sessions_command",
    ),
    "mcp-proxy": (
        "an MCP server (stdio) gating the tools of upstream MCP servers with the plugins",
        "agentplug.cli.mcp_proxy:add_mcp_proxy_command",
    ),
    "serve": (
        "run the local control API on loopback (needs the 'api' extra)",
        "agentplug.api.serve:add_serve_command",
    ),
    "plugin": (
        "install, eject, sync and reinject plugins (and agentplug itself)",
        "agentplug.cli.plugin:add_plugin_commands",
    ),
    "supervise": (
        "run a command and restart it while it exits with 75 (RESTART_AGENT)",
        "agentplug.plugins.supervisor:add_supervisor_command",
    ),
    "completion": (
        "print a shell completion script (bash, zsh or fish)",
        "agentplug.cli.completion:add_completion_command",
    ),
}
# Commands that need the whole tree (``docs cli`` renders every command).
_NEEDS_EVERY_GROUP = frozenset({"docs", "completion"})


def build_parser(argv: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The argument parser of every command (exposed for docs/cli.md and tests).

    Without ``argv`` every command group is complete. With ``argv`` (what :func:`main`
    parses), only the group ``argv`` names is imported; the others are listed in
    ``--help`` with their summary.
    """
    from agentplug import __version__

    parser = AgentplugArgumentParser(prog="agentplug", description=_DESCRIPTION, epilog=_EPILOG)
    parser.add_argument("--version", action="version", version=f"agentplug {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    wanted = None if argv is None else _command_named(argv)
    complete = argv is None or wanted in _NEEDS_EVERY_GROUP
    wanted_target = LAZY_COMMANDS[wanted][1] if wanted in LAZY_COMMANDS else None
    registered: set[str] = set()
    for name, (summary, target) in LAZY_COMMANDS.items():
        if target in registered:
            continue  # registered with the other commands of its group
        if not complete and target != wanted_target:
            sub.add_parser(name, help=summary)  # completed when the command itself runs
            continue
        module, function = target.split(":")
        getattr(importlib.import_module(module), function)(sub)
        registered.add(target)
    add_verbose_options(parser)
    add_plugin_switch(parser)
    add_examples(parser)
    parser.set_defaults(parser=parser)  # `agentplug docs cli` renders this very tree
    return parser


def _command_named(argv: Sequence[str]) -> str | None:
    """The command ``argv`` runs: its first argument that is not an option."""
    return next((arg for arg in argv if not arg.startswith("-")), None)


def _crashed(args: argparse.Namespace, exc: BaseException) -> int:
    """An exception no command expected: one line, the traceback with ``-v``."""
    if verbose(args):
        traceback.print_exception(exc, file=sys.stderr)
    hint = "" if verbose(args) else " (run with -v for the traceback)"
    error_line(args, f"unexpected {type(exc).__name__}: {one_line(exc)}{hint}")
    return EXIT_FAILED


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``agentplug`` console script."""
    arguments = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser(arguments)
    if not arguments:
        parser.print_help()
        return 0
    try:
        args = parser.parse_args(arguments)
    except SystemExit as exc:  # --help, --version, or a usage error already printed
        return exc.code if isinstance(exc.code, int) else EXIT_USAGE
    # Commands report problems themselves (handler reports, doctor notes); runtime log
    # records are shown from AGENTPLUG_LOG_LEVEL (default ERROR) so output stays readable.
    logging.basicConfig(
        level=os.environ.get("AGENTPLUG_LOG_LEVEL", "ERROR").upper(),
        format="agentplug %(levelname)s %(name)s: %(message)s",
    )
    # A command that prints each plugin load error itself (with where it was raised) keeps
    # the host's log record of it from saying the same a second time.
    handlers = logging.getLogger().handlers if getattr(args, "reports_load_errors", False) else []
    for handler in handlers:
        handler.addFilter(_not_a_load_error)
    try:
        with _plugins_switch(bool(getattr(args, "no_plugins", False))):
            return _run(args)
    finally:
        for handler in handlers:
            handler.removeFilter(_not_a_load_error)


@contextlib.contextmanager
def _plugins_switch(off: bool) -> Iterator[None]:
    """``--no-plugins``: the environment switch every loader honours, for this command
    (and the processes it starts), restored afterwards (``main`` may run in-process)."""
    from agentplug.core.loader import DISABLE_PLUGINS_ENV

    before = os.environ.get(DISABLE_PLUGINS_ENV)
    if off:
        os.environ[DISABLE_PLUGINS_ENV] = "1"
    try:
        yield
    finally:
        if off and before is None:
            os.environ.pop(DISABLE_PLUGINS_ENV, None)
        elif off and before is not None:
            os.environ[DISABLE_PLUGINS_ENV] = before


def _not_a_load_error(record: logging.LogRecord) -> bool:
    return not getattr(record, "agentplug_load_error", False)


def _run(args: argparse.Namespace) -> int:
    """Run the parsed command: its exit code, or one line for what went wrong."""
    try:
        code: int = args.func(args)
    except (AgentplugError, LookupError) as exc:
        # A scenario step that crashed is the plugin author's bug: -v shows where. (The
        # testing layer is looked up, not imported: only `run` loads it.)
        scenario = sys.modules.get("agentplug.testing.scenario")
        cause = exc.__cause__
        crashed = (
            scenario is not None
            and isinstance(exc, scenario.ScenarioError)
            and cause is not None
            and not isinstance(cause, AgentplugError)
        )
        if crashed and verbose(args):
            traceback.print_exception(cause, file=sys.stderr)
        hint = " (run with -v for the traceback)" if crashed and not verbose(args) else ""
        error_line(args, f"{one_line(exc)}{hint}")
        return EXIT_USAGE
    except BrokenPipeError:  # output piped into `head` and the like
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0
    except KeyboardInterrupt:
        return 130
    except Exception as exc:
        # The state store could not be opened or reached (looked up, not imported: only
        # commands that use the store load it): one line naming the store and the cause.
        store = sys.modules.get("agentplug.store.base")
        if store is not None and isinstance(exc, store.StateUrlError):
            error_line(args, one_line(exc))
            return EXIT_USAGE
        if store is not None and isinstance(exc, store.StateStoreUnavailable):
            error_line(args, one_line(exc))
            return EXIT_FAILED
        return _crashed(args, exc)
    return code


if __name__ == "__main__":
    raise SystemExit(main())
