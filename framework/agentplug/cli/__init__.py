"""The ``agentplug`` command line: one module per command group (``main`` parses)."""

from __future__ import annotations

__all__ = ["main"]


def main(argv: list[str] | None = None) -> int:
    """Run the ``agentplug`` command (``python -m agentplug.cli``)."""
    from agentplug.cli.main import main as run

    return run(argv)
