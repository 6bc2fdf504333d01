"""Isolation boundary for the ``code`` custom-action handler (Python and JavaScript)."""

from agentplug.sandbox.budget import DEFAULT_SANDBOX_MEMORY_MB, SandboxBudget
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
    "DEFAULT_SANDBOX_MEMORY_MB",
    "CodeSandbox",
    "FetchCallable",
    "FetchRequest",
    "FetchResponse",
    "Language",
    "SandboxBudget",
    "SandboxResult",
    "SandboxUnavailableError",
]
