"""Isolation boundary for the ``code`` custom-action handler (Python and JavaScript)."""

from agentplug.sandbox.code_sandbox import CodeSandbox
from agentplug.sandbox.errors import SandboxUnavailableError
from agentplug.sandbox.models import (
    FetchCallable,
    FetchRequest,
    FetchResponse,
    Language,
    SandboxResult,
)

__all__ = [
    "CodeSandbox",
    "FetchCallable",
    "FetchRequest",
    "FetchResponse",
    "Language",
    "SandboxResult",
    "SandboxUnavailableError",
]
