"""Isolation boundary for the ``code`` custom-action handler (Python and JavaScript)."""

from agentplug.actions.code_handler import CodeHandlerDef, detect_language, run_code_handler
from agentplug.sandbox.code_sandbox import CodeSandbox, SandboxUnavailableError
from agentplug.sandbox.models import (
    FetchCallable,
    FetchRequest,
    FetchResponse,
    Language,
    SandboxResult,
)

__all__ = [
    "CodeHandlerDef",
    "CodeSandbox",
    "FetchCallable",
    "FetchRequest",
    "FetchResponse",
    "Language",
    "SandboxResult",
    "SandboxUnavailableError",
    "detect_language",
    "run_code_handler",
]
