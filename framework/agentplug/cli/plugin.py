"""``agentplug plugin ...``: the plugin manager's commands
(:mod:`agentplug.plugins.manager.cli`), run after the config is checked whole, as every
command's is (:func:`agentplug.cli.common.command_config`)."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

from agentplug.cli.common import command_config
from agentplug.plugins.manager import add_plugin_management_commands

__all__ = ["add_plugin_commands"]


def add_plugin_commands(sub: Any) -> argparse.ArgumentParser:
    """``agentplug plugin install|eject|sync|reinject|ejected|core-status|...``."""
    parser = add_plugin_management_commands(sub)
    run: Callable[[argparse.Namespace], int] = parser.get_default("func")

    def checked(args: argparse.Namespace) -> int:
        # An invalid config stops the command (exit 2, every problem); the manager then
        # uses the config read here (read once: `-v` says which file once).
        args.loaded_config, _ = command_config(args)
        return run(args)

    parser.set_defaults(func=checked)
    return parser
