"""Language-aware actions: an LLM action selector and an LLM parameter extractor.

Both implement the existing interfaces of the action flow
(:class:`~agentplug.actions.flow.selection.ActionSelector`,
:class:`~agentplug.actions.flow.extraction.ParameterExtractor`), so
``run_action_flow(..., selector=LlmActionSelector(provider, model),
extractor=LlmParameterExtractor(provider, model))`` lets the model choose the action and
read its parameters from plain language (ACTIONS.md, the elizaOS flow).

- The selector shows the model every action's name, description, similes and examples
  and asks for ``{"action": NAME}`` (or ``null``). Structured input (an exact action
  name, ``content["action"]``) is still taken without a model call; a provider failure
  or an unreadable answer falls back to the deterministic selector.
- The extractor first reads structured input (JSON, ``key=value``); when a declared
  parameter is still missing (or a value is invalid) it asks the model for a JSON
  object matching the parameter schema, validates it, and on a failed validation asks
  **once** more with the error. If that fails too, the flow's parameter check reports
  the missing or invalid parameter to the user.

These calls are not agent turns and run no turn hooks, but each is a governed model
call when the selector and extractor know the host (``host=``, or a
:class:`~agentplug.agent.calls.ModelCaller` in place of the provider;
:func:`language_aware_flow` with ``host``, as ``agentplug actions run`` does):
``model_call_started`` / ``model_call_ended``, the abort signal, retries, fallback models
and the usage limits. With no model configured, the deterministic selector and
extractor are used.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Mapping, Sequence
from typing import Any

from agentplug.actions.flow.extraction import StructuredParameterExtractor, first_json_object
from agentplug.actions.flow.parameters import ParameterValidationError, check_parameters
from agentplug.actions.flow.selection import (
    ActionMatch,
    DeterministicActionSelector,
    MatchTier,
)
from agentplug.actions.model import Action, Message, State
from agentplug.actions.registry import normalize_action_name
from agentplug.agent.calls import ModelCaller
from agentplug.agent.providers.base import ModelProvider, ModelRequest
from agentplug.agent.tools import action_schema
from agentplug.agent.turn import TurnCancelled
from agentplug.services.signals import AbortSignal

__all__ = ["LlmActionSelector", "LlmParameterExtractor", "language_aware_flow", "parse_json_answer"]

log = logging.getLogger("agentplug.agent")

_FENCE = re.compile(r"```(?:json)?\s*(.*?)```", re.S)


def parse_json_answer(text: str) -> dict[str, Any] | None:
    """The first JSON object in a model answer (code fences allowed), or ``None``."""
    fenced = _FENCE.search(text)
    for candidate in ([fenced.group(1)] if fenced else []) + [text]:
        found = first_json_object(candidate)
        if found is not None:
            return found[0]
    return None


def _examples(action: Action, limit: int = 3) -> list[str]:
    lines: list[str] = []
    for conversation in list(action.examples)[:limit]:
        turns = [f'{turn.name}: "{turn.text}"' for turn in conversation]
        if turns:
            lines.append("      " + " -> ".join(turns))
    return lines


def _catalogue(actions: Sequence[Action]) -> str:
    lines: list[str] = []
    for action in actions:
        lines.append(f"- {action.name}: {action.description}")
        if action.similes:
            lines.append(f"    also called: {', '.join(action.similes)}")
        if action.parameters:
            params = ", ".join(
                f"{p.name}{'' if p.required else '?'} ({p.description or p.schema_.type})"
                for p in action.parameters
            )
            lines.append(f"    parameters: {params}")
        examples = _examples(action)
        if examples:
            lines.append("    examples:")
            lines.extend(examples)
    return "\n".join(lines)


def _caller(
    provider: ModelProvider | ModelCaller, model: str, host: Any, signal: AbortSignal | None
) -> ModelCaller | None:
    """The governed caller of a selector or extractor (``None``: a bare provider and no
    host to dispatch the model-call hooks on)."""
    if isinstance(provider, ModelCaller):
        return provider
    if host is None:
        return None
    return ModelCaller(host, provider, model, signal=signal)


async def _ask(
    provider: ModelProvider,
    caller: ModelCaller | None,
    model: str,
    system: str,
    user: str,
    purpose: str,
) -> str:
    request = ModelRequest(
        model=model,
        messages=[{"role": "system", "content": system}, {"role": "user", "content": user}],
        options={"temperature": 0},
    )
    if caller is not None:
        return (await caller.complete(request, purpose)).text
    response = await provider.complete(request)
    return response.text


class LlmActionSelector:
    """Lets the model pick the action (see the module docstring)."""

    def __init__(
        self,
        provider: ModelProvider | ModelCaller,
        model: str,
        *,
        fallback: DeterministicActionSelector | None = None,
        host: Any = None,
        signal: AbortSignal | None = None,
    ) -> None:
        self.caller = _caller(provider, model, host, signal)
        self.provider: Any = provider
        self.model = model
        self.fallback = fallback or DeterministicActionSelector()
        self.last_answer: str | None = None

    async def select(
        self, actions: Sequence[Action], message: Message, state: State | None
    ) -> Sequence[ActionMatch]:
        """The model's choice first, then no other candidate (``[]`` when none fits)."""
        structured = self.fallback.rank(actions, message)
        if structured and structured[0].tier is MatchTier.EXACT_NAME:
            return structured
        system = (
            "You pick the one action that answers the user's message.\n"
            f"Actions:\n{_catalogue(actions)}\n\n"
            'Answer with only a JSON object: {"action": "<ACTION_NAME>"}, or '
            '{"action": null} when no action fits.'
        )
        try:
            answer = await _ask(
                self.provider, self.caller, self.model, system, message.text, "select"
            )
        except TurnCancelled:
            raise
        except Exception as exc:  # the model is an improvement, never a single point of failure
            log.warning("LLM action selection failed (%s); using the deterministic selector", exc)
            return structured
        self.last_answer = answer
        parsed = parse_json_answer(answer)
        if parsed is None or "action" not in parsed:
            log.warning("LLM action selection: unreadable answer; using the deterministic selector")
            return structured
        chosen = parsed.get("action")
        if chosen is None:
            return []
        wanted = normalize_action_name(str(chosen))
        for order, action in enumerate(actions):
            names = [action.name, *action.similes]
            if any(normalize_action_name(n) == wanted for n in names):
                return [
                    ActionMatch(
                        action,
                        MatchTier.EXACT_NAME,
                        f"chosen by the model ({self.provider.name}/{self.model})",
                        order=order,
                    )
                ]
        log.warning("LLM action selection: the model named unknown action %r", chosen)
        return structured


class LlmParameterExtractor:
    """Lets the model read parameters from plain language (see the module docstring)."""

    def __init__(
        self,
        provider: ModelProvider | ModelCaller,
        model: str,
        *,
        fallback: StructuredParameterExtractor | None = None,
        host: Any = None,
        signal: AbortSignal | None = None,
    ) -> None:
        self.caller = _caller(provider, model, host, signal)
        self.provider: Any = provider
        self.model = model
        self.fallback = fallback or StructuredParameterExtractor()
        self.asked = 0
        """Model calls made (tests and traces)."""

    def _prompt(self, action: Action) -> str:
        lines = [
            f"Extract the parameters of the action {action.name} ({action.description}) "
            "from the user's message.",
            f"JSON schema of the parameters: {json.dumps(action_schema(action))}",
        ]
        examples = _examples(action)
        if examples:
            lines.append("Examples of messages for this action:")
            lines.extend(examples)
        lines.append(
            "Answer with only one JSON object of parameter values. Leave out a parameter "
            "the message does not give; never invent one."
        )
        return "\n".join(lines)

    async def extract(
        self, action: Action, message: Message, state: State | None
    ) -> Mapping[str, Any]:
        """Structured values, completed by the model when a required one is missing."""
        structured = self.fallback.extract_sync(action, message)
        missing = [p.name for p in action.parameters if p.name not in structured]
        if not missing and _valid(action, structured) is None:
            return structured
        system = self._prompt(action)
        values = await self._attempt(action, system, message.text, structured)
        error = _valid(action, values)
        if error is None:
            return values
        retry = (
            f"{message.text}\n\nYour previous answer was not valid: {error}. Answer again "
            "with one JSON object of parameter values."
        )
        again = await self._attempt(action, system, retry, structured)
        return again if _valid(action, again) is None else {**values, **again}

    async def _attempt(
        self, action: Action, system: str, text: str, structured: Mapping[str, Any]
    ) -> dict[str, Any]:
        self.asked += 1
        try:
            answer = await _ask(self.provider, self.caller, self.model, system, text, "extract")
        except TurnCancelled:
            raise
        except Exception as exc:
            log.warning("LLM parameter extraction for %s failed (%s)", action.name, exc)
            return dict(structured)
        parsed = parse_json_answer(answer) or {}
        declared = {p.name for p in action.parameters}
        found = {k: v for k, v in parsed.items() if k in declared and v is not None}
        return {**found, **structured}


def _valid(action: Action, values: Mapping[str, Any]) -> str | None:
    """``None`` when ``values`` pass the parameter check, else the error text."""
    try:
        check_parameters(action, values)
    except ParameterValidationError as exc:
        return str(exc)
    return None


def language_aware_flow(
    agent: Mapping[str, Any] | None,
    host: Any = None,
    *,
    signal: AbortSignal | None = None,
) -> tuple[LlmActionSelector, LlmParameterExtractor] | None:
    """The LLM selector and extractor for the ``agent`` config section, or ``None``.

    ``None`` when the section names no ``model``: the deterministic selector and
    extractor stay in charge. An unknown provider raises a one-line
    :class:`~agentplug.agent.providers.ProviderError`. With ``host`` every call is a
    governed one (:class:`~agentplug.agent.calls.ModelCaller`): ``model_call_started`` /
    ``model_call_ended`` on that host, ``signal`` aborting it, ``agent.retry``,
    ``agent.fallback_models`` and ``agent.limits`` applied.
    """
    from agentplug.agent.config import agent_config
    from agentplug.agent.providers import ProviderRegistry, split_model

    if not agent or not agent.get("model"):
        return None
    config = agent_config(agent)
    name, model = split_model(config.model)
    registry = ProviderRegistry(config.providers)
    provider = registry.get(name)
    if host is None:
        return LlmActionSelector(provider, model), LlmParameterExtractor(provider, model)
    caller = ModelCaller(
        host,
        registry.get,
        model,
        provider_name=name,
        limits=config.limits,
        retry=config.retry,
        fallbacks=[split_model(spec, name) for spec in config.fallback_models],
        signal=signal,
    )
    return LlmActionSelector(caller, model), LlmParameterExtractor(caller, model)
