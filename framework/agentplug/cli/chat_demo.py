"""``agentplug chat --demo``: one offline conversation that shows what plugins do to an
agent's tool calls, with the example plugins ``make demo`` installs.

The scripted model asks for two tools in turn: ``web_search``, which the
``tool-preflight`` plugin holds for your approval (answer at the prompt), then
``delete_repository``, which the same plugin blocks (its public reason is in the trace);
then it replies. ``audit-log`` records every hook call to a file the banner names, in a
temporary folder. The demo uses its own config (your ``agentplug.toml`` is not read) and
keeps its state in memory: it leaves nothing behind but that audit file.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["DEMO_PLUGINS", "DemoSetup", "demo_setup", "missing_demo_plugins"]

DEMO_PLUGINS = ("tool-preflight", "audit-log")
"""The example plugins the demo loads (``make demo`` installs them)."""

FIRST_MESSAGE = "Find our invoice retention rules, then delete the old billing-archive repository."
_SEARCH_RESULT = "Invoices over 10 000 EUR need two approvals; keep every invoice 10 years."
_REPLY = (
    "Invoices over 10 000 EUR need two approvals and are kept for 10 years. I did not "
    "delete billing-archive: the operator blocks delete_repository."
)
_AFTER = "(the demo's scripted model has nothing more to say; /quit ends the demo)"


@dataclass
class DemoSetup:
    """Everything the demo session is built from."""

    config: dict[str, Any]
    """The demo's own operator config (the example plugins, configured)."""
    responses: list[Any]
    """The scripted model's replies, in order."""
    audit_file: Path
    """Where ``audit-log`` writes (a temporary folder)."""
    first_message: str = FIRST_MESSAGE
    """What the demo says first, as if you had typed it."""
    intro: list[str] = field(default_factory=list)
    """Lines printed before the first message."""


def demo_setup() -> DemoSetup:
    """The demo's config, script and audit file (a new temporary folder)."""
    audit = Path(tempfile.mkdtemp(prefix="agentplug-demo-")) / "audit.jsonl"
    config = {
        "plugins": {
            "allow": list(DEMO_PLUGINS),
            "entries": {
                "tool-preflight": {"config": {"blocked_tools": ["delete_repository"]}},
                "audit-log": {"config": {"path": str(audit)}},
            },
        },
        "agent": {
            "model": "scripted/demo",
            "system_prompt": "You are the billing team's assistant.",
        },
    }
    responses: list[Any] = [
        {
            "tool_calls": [
                {"id": "call-1", "name": "web_search", "arguments": {"query": "invoice rules"}}
            ]
        },
        {
            "tool_calls": [
                {
                    "id": "call-2",
                    "name": "delete_repository",
                    "arguments": {"name": "billing-archive"},
                }
            ]
        },
        _REPLY,
    ]
    intro = [
        "demo: a scripted model asks for web_search (tool-preflight holds it for your "
        "approval: answer once, always or deny), then delete_repository (tool-preflight "
        "blocks it); the trace under the reply shows who decided what",
    ]
    return DemoSetup(config, responses, audit, intro=intro)


def add_demo_tools(registry: Any) -> None:
    """The two tools the scripted model calls (canned results; nothing leaves the machine)."""

    def web_search(query: str) -> str:
        """Search the web."""
        return _SEARCH_RESULT

    def delete_repository(name: str) -> str:
        """Delete a code repository."""
        return f"deleted {name}"

    registry.add_python(web_search)
    registry.add_python(delete_repository)


def missing_demo_plugins(loaded: set[str]) -> str | None:
    """One line saying which example plugins the demo lacks and how to get them (``None``
    when all are loaded)."""
    from agentplug.core.loader import DISABLE_PLUGINS_ENV, installed_plugins_disabled

    missing = [name for name in DEMO_PLUGINS if name not in loaded]
    if not missing:
        return None
    if installed_plugins_disabled():
        return (
            f"the demo runs the example plugins {', '.join(DEMO_PLUGINS)}, and installed "
            f"plugins are off (--no-plugins or ${DISABLE_PLUGINS_ENV}); drop the switch"
        )
    folders = " ".join(f"-e example_plugins/{name}" for name in missing)
    return (
        f"the demo runs the example plugins {', '.join(DEMO_PLUGINS)}; "
        f"{', '.join(missing)} {'is' if len(missing) == 1 else 'are'} not installed: run "
        f"`make demo` in a clone of agentplug (or `pip install {folders}` there)"
    )


AFTER_DEMO = _AFTER
"""What the scripted model says once the demo's script is over."""
