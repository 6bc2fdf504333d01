"""Structured output: a turn's final answer as a validated value.

``run_turn(..., output_type=Invoice)`` (a pydantic model, or any type pydantic can
validate: a dataclass, ``list[int]``...) or ``output_type={"type": "object", ...}`` (a
JSON schema, checked with the ``jsonschema`` library: ``pip install
'agentplug[jsonschema]'``) asks the model for a JSON answer matching the schema: the
schema goes with every model call of the turn (the ``openai`` provider sends it as
``response_format``, and the system prompt says it for every provider). The final answer
is parsed (a fenced ``json`` block is accepted) and validated; an answer that fails is
answered with the validation error and the model asked again, at most ``output_retries``
times (2 by default); then the turn fails with the last error. ``TurnResult.output``
holds the validated value; the reply delivered is the answer's text.

The answer is model output: it is bounded by ``agent.limits.reply_chars`` before it is
parsed, its nesting by the JSON parser's depth, and the error the model reads back is
cut at 500 characters.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import TypeAdapter, ValidationError

from agentplug.core.errors import AgentplugError

__all__ = ["OutputInvalid", "OutputSpec", "output_spec"]

_MAX_ERROR_CHARS = 500


class OutputInvalid(Exception):
    """A final answer that does not match the output type (the message says why)."""


def _clip(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= _MAX_ERROR_CHARS else text[: _MAX_ERROR_CHARS - 3] + "..."


def _json_text(text: str) -> str:
    """The JSON of an answer: the whole text, or its first fenced block."""
    stripped = text.strip()
    if stripped.startswith("```"):
        body = stripped.split("\n", 1)[1] if "\n" in stripped else ""
        end = body.rfind("```")
        return body[:end].strip() if end >= 0 else body.strip()
    return stripped


def _parse(text: str) -> Any:
    try:
        return json.loads(_json_text(text))
    except (ValueError, RecursionError) as exc:
        raise OutputInvalid(f"the answer is not JSON ({_clip(str(exc))})") from None


@dataclass(frozen=True)
class OutputSpec:
    """An output type: its JSON schema, and how an answer is validated against it."""

    name: str
    schema: Mapping[str, Any]
    adapter: TypeAdapter[Any] | None = None
    validator: Any = None
    """A ``jsonschema`` validator (JSON-schema output types)."""

    def instruction(self) -> str:
        """What the system prompt adds so that any model knows the expected shape."""
        return (
            "Give your final answer as one JSON value matching this JSON schema, with no "
            f"other text: {json.dumps(self.schema, separators=(',', ':'))}"
        )

    def validate(self, text: str) -> Any:
        """The validated value of the answer ``text``; :class:`OutputInvalid` if none."""
        if self.adapter is not None:
            try:
                return self.adapter.validate_json(_json_text(text))
            except ValidationError as exc:
                problems = "; ".join(
                    f"{'.'.join(str(p) for p in e['loc']) or '(root)'}: {e['msg']}"
                    for e in exc.errors(include_url=False)[:5]
                )
                raise OutputInvalid(_clip(problems)) from None
            except RecursionError:
                raise OutputInvalid("the answer is nested too deeply") from None
        value = _parse(text)
        errors = sorted(self.validator.iter_errors(value), key=lambda e: list(e.path))[:5]
        if errors:
            problems = "; ".join(
                f"{'.'.join(str(p) for p in e.path) or '(root)'}: {e.message}" for e in errors
            )
            raise OutputInvalid(_clip(problems))
        return value

    def retry_prompt(self, error: str) -> str:
        """What the model reads when its answer failed validation."""
        return (
            f"Your answer does not match the required output: {error}. Answer again with only "
            "one JSON value matching the schema."
        )


def output_spec(output_type: Any) -> OutputSpec:
    """The :class:`OutputSpec` of ``output_type`` (a type pydantic validates, or a JSON
    schema as a mapping). A bad type or schema is an :class:`AgentplugError` saying so."""
    if isinstance(output_type, Mapping):
        try:
            import jsonschema
        except ImportError:  # pragma: no cover - depends on the optional extra
            raise AgentplugError(
                "output_type as a JSON schema needs the jsonschema package: pip install "
                "'agentplug[jsonschema]' (or pass a pydantic model)"
            ) from None
        schema = dict(output_type)
        cls = jsonschema.validators.validator_for(schema)
        try:
            cls.check_schema(schema)
        except jsonschema.SchemaError as exc:
            raise AgentplugError(
                f"output_type is not a valid JSON schema: {_clip(exc.message)}"
            ) from None
        name = str(schema.get("title") or "output")
        return OutputSpec(name=_name(name), schema=schema, validator=cls(schema))
    try:
        adapter: TypeAdapter[Any] = TypeAdapter(output_type)
        schema = adapter.json_schema()
    except Exception as exc:  # pydantic's errors for a type it cannot describe
        raise AgentplugError(
            f"output_type {output_type!r} has no JSON schema ({type(exc).__name__}); pass a "
            "pydantic model, a dataclass or a JSON schema"
        ) from None
    name = getattr(output_type, "__name__", None) or str(schema.get("title") or "output")
    return OutputSpec(name=_name(name), schema=schema, adapter=adapter)


def _name(text: str) -> str:
    """A ``response_format`` name: letters, digits, ``_`` and ``-``, at most 64."""
    cleaned = "".join(c if c.isalnum() or c in "_-" else "_" for c in text)[:64]
    return cleaned or "output"
