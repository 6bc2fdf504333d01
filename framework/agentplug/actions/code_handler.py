"""The ``code`` custom-action handler: ``{type: "code", code, language?}``."""

from __future__ import annotations

import ast
import re
from collections.abc import Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError
from pydantic.alias_generators import to_camel

from agentplug.actions.handler_output import HandlerOutput
from agentplug.core.errors import ConfigError
from agentplug.sandbox.code_sandbox import CodeSandbox
from agentplug.sandbox.models import FetchCallable, Language

__all__ = ["CodeHandlerDef", "CodeSettings", "code_settings", "detect_language", "run_code_handler"]

# Tokens that are not valid Python but are everyday JavaScript. Only consulted when the
# code is not valid Python, so a Python snippet can never be mistaken for JavaScript.
_JS_MARKERS = re.compile(
    r"\b(?:const|let|var|function|typeof|undefined|null|new)\b|=>|===|!==|&&|\|\||`|;\s*(?:$|\n)|//"
)


class CodeHandlerDef(BaseModel):
    """A ``code`` handler definition.

    ``language`` is optional: the seed's definitions have no such field and contain
    JavaScript, and must run unchanged; see :func:`detect_language` for the rule.
    """

    model_config = ConfigDict(frozen=True, populate_by_name=True)

    type: Literal["code"] = "code"
    code: str
    language: Language | None = None


class CodeSettings(BaseModel):
    """``actions.code``: the sandbox pool that a host's ``code`` custom actions share."""

    model_config = ConfigDict(
        alias_generator=to_camel, populate_by_name=True, extra="forbid", frozen=True
    )

    pool_size: int = Field(default=2, ge=0, le=64)
    """Ready (hardened, idle) workers kept per language: a burst of up to this many
    concurrent runs starts at warm speed. Each idle worker is a small process (about
    10-20 MB); 0 starts every run cold."""
    parallel: int | None = Field(default=None, ge=1, le=32)
    """Workers started at the same time when the pool refills (default: up to 4, never more
    than ``pool_size``)."""


def code_settings(actions: Mapping[str, Any]) -> CodeSettings:
    """Validate ``actions.code``; raise :class:`ConfigError` naming each key."""
    raw = actions.get("code")
    if raw is None:
        raw = {}
    if not isinstance(raw, Mapping):
        raise ConfigError([("actions.code", f"must be an object, got {type(raw).__name__}")])
    try:
        return CodeSettings.model_validate(dict(raw))
    except ValidationError as exc:
        issues = []
        for error in exc.errors():
            where = ".".join(str(part) for part in error["loc"])
            issues.append((f"actions.code.{where}" if where else "actions.code", error["msg"]))
        raise ConfigError(issues) from None


def detect_language(defn: CodeHandlerDef) -> Language:
    """Which language a definition's code is in.

    Rule: an explicit ``language`` wins. Otherwise the code is Python when it parses as
    Python (only parsed, never executed, in the host); when it does not, it is JavaScript
    if it contains JavaScript-only syntax (``const``/``let``, ``=>``, ``===``, ``;`` at
    line ends, template strings, ...), and Python otherwise, so the Python syntax error is
    what gets reported. Snippets valid in both languages (e.g. ``return 'hi'``) run as
    Python, the documented default; ``params.x`` works in both.
    """
    if defn.language is not None:
        return defn.language
    try:
        ast.parse(defn.code, mode="exec")
    except SyntaxError:
        return "javascript" if _JS_MARKERS.search(defn.code) else "python"
    except (ValueError, RecursionError, MemoryError):
        return "python"
    return "python"


async def run_code_handler(
    defn: CodeHandlerDef,
    params: Mapping[str, str],
    *,
    sandbox: CodeSandbox,
    fetch: FetchCallable | None,
    timeout_s: float = 30,
    memory_mb: int = 256,
    max_output_bytes: int = 64 * 1024,
) -> HandlerOutput:
    """Run a ``code`` handler in ``sandbox``; ``ok`` is False on any error or time-out and
    ``output`` then carries the reason."""
    result = await sandbox.run(
        defn.code,
        params,
        language=detect_language(defn),
        timeout_s=timeout_s,
        memory_mb=memory_mb,
        max_output_bytes=max_output_bytes,
        fetch=fetch,
    )
    if result.ok:
        return HandlerOutput(ok=True, output=result.output)
    return HandlerOutput(ok=False, output=f"Error: {result.error or 'code failed'}")
