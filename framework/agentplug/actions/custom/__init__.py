"""Custom actions: user-defined actions declared in the config file, no plugin code.

The config's top-level ``customActions`` array holds definitions in the seed's JSON shape
(``eliza.json`` definitions load unchanged)::

    {"id": "weather-check", "name": "CHECK_WEATHER", "description": "...",
     "similes": ["WEATHER"], "parameters": [{"name": "city", "description": "...",
     "required": true}], "handler": {"type": "http", "method": "GET",
     "url": "https://wttr.in/{{city}}?format=3"}, "enabled": true,
     "createdAt": "2025-01-01T00:00:00Z", "updatedAt": "2025-01-01T00:00:00Z"}

:func:`load_custom_actions` validates and converts them, :func:`def_to_action` turns one
definition into an :class:`~agentplug.actions.model.Action`, :func:`register_custom_action_live`
adds one to a running runtime, and :func:`build_test_handler` runs one without registering it.

The three handler kinds run through a :class:`CustomActionServices` object so hosts (and
tests) can swap the back-ends; its defaults are the real ones: the SSRF-guarded HTTP client,
the local terminal service and the isolated code sandbox.
"""

from __future__ import annotations

from agentplug.actions.code_handler import CodeHandlerDef
from agentplug.actions.custom.convert import build_test_handler, def_to_action
from agentplug.actions.custom.live import bind_runtime, register_custom_action_live
from agentplug.actions.custom.loading import (
    CustomActionConfigError,
    CustomActionLoadError,
    LoadResult,
    load_custom_actions,
    read_custom_action_defs,
)
from agentplug.actions.custom.models import (
    ACTION_ID_PATTERN,
    MAX_ACTION_ID_LENGTH,
    CustomActionDef,
    CustomActionHandlerDef,
    CustomActionParameter,
    TestOutput,
)
from agentplug.actions.custom.models import CONFIG_KEY as CONFIG_KEY
from agentplug.actions.custom.services import (
    CodeBackend,
    CustomActionServices,
    HttpBackend,
    ShellBackend,
    guarded_fetch_for_code,
)
from agentplug.actions.http_handler import HttpHandlerDef
from agentplug.actions.shell_handler import ShellHandlerDef

__all__ = [
    "ACTION_ID_PATTERN",
    "MAX_ACTION_ID_LENGTH",
    "CodeBackend",
    "CodeHandlerDef",
    "CustomActionConfigError",
    "CustomActionDef",
    "CustomActionHandlerDef",
    "CustomActionLoadError",
    "CustomActionParameter",
    "CustomActionServices",
    "HttpBackend",
    "HttpHandlerDef",
    "LoadResult",
    "ShellBackend",
    "ShellHandlerDef",
    "TestOutput",
    "bind_runtime",
    "build_test_handler",
    "def_to_action",
    "guarded_fetch_for_code",
    "load_custom_actions",
    "read_custom_action_defs",
    "register_custom_action_live",
]
