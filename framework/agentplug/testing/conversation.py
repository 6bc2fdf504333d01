"""Running and checking scripted conversations (the ``conversation`` of a scenario).

Each turn runs through the real :class:`~agentplug.agent.AgentRunner` on the scenario's
host: the scripted provider answers with the turn's ``model`` entries, scripted tools
answer with their ``result``, approvals come from the turn's (or the scenario's)
``approvals``. :func:`check_conversation` compares every ``expect*`` key of a turn with
what happened and returns :class:`~agentplug.testing.scenario_check.StepFailure`
objects, so ``agentplug run`` and the pytest items report them like step failures.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from agentplug.agent import AgentRunner, ScriptedProvider, ToolOutput, TurnResult
from agentplug.agent.tools import Tool
from agentplug.gateway import PluginHost
from agentplug.services.approvals import TerminalResolver
from agentplug.testing.conversation_model import ConversationTurn, ScenarioTool
from agentplug.testing.scenario import Scenario, scripted_resolver
from agentplug.testing.scenario_check import MISSING, Mismatch, StepExpectation, StepFailure, match

__all__ = ["TurnReport", "check_conversation", "run_conversation", "turn_label"]


@dataclass
class TurnReport:
    """What one scripted turn did."""

    index: int
    result: TurnResult
    requests: list[dict[str, Any]] = field(default_factory=list)
    """The model requests of the turn (messages only)."""

    def to_json(self) -> dict[str, Any]:
        """One JSON line of ``agentplug run --json``."""
        return {"turn": self.index + 1, **self.result.model_dump(mode="json")}


def turn_label(index: int, name: str | None) -> str:
    """``turn 2 "name" (conversation[1])``."""
    named = f" {json.dumps(name)}" if name else ""
    return f"turn {index + 1}{named} (conversation[{index}])"


def _scripted_tool(spec: ScenarioTool) -> Tool:
    result = spec.result

    def run(params: dict[str, Any], call: Any) -> ToolOutput:
        if isinstance(result, str):
            return ToolOutput(result)
        return ToolOutput(
            str(result.get("content", "")),
            details=result.get("details"),
            is_error=bool(result.get("is_error")),
        )

    return Tool(
        spec.name, spec.description, spec.parameters, run, source="scenario", kind=spec.kind
    )


def build_runner(scenario: Scenario, host: PluginHost, *, interactive: bool = False) -> AgentRunner:
    """The runner of a scenario's conversation (scripted provider, scripted tools) on the
    host's gateway, whose approvals the scenario's scripted decisions answer."""
    settings = {**dict(host.config.agent), **scenario.agent}
    settings.setdefault("model", "scripted/scenario")
    resolver = scripted_resolver(scenario.approvals)
    if resolver is None and interactive:
        resolver = TerminalResolver()  # type: ignore[assignment]
    gateway = host.gateway
    gateway.approvals.use_resolver(resolver)
    provider = ScriptedProvider([], default="(the scenario scripted no more model replies)")
    runner = gateway.runner_for(provider, config=settings)
    for spec in scenario.tools:
        runner.tools.add(_scripted_tool(spec))
    runner.channel = lambda payload: {"delivered": True}
    return runner


async def run_conversation(
    scenario: Scenario,
    host: PluginHost,
    *,
    interactive: bool = False,
    on_turn: Callable[[int], None] | None = None,
) -> list[TurnReport]:
    """Run every turn of ``scenario.conversation`` in order."""
    runner = build_runner(scenario, host, interactive=interactive)
    provider = runner.providers.get("scripted")
    assert isinstance(provider, ScriptedProvider)
    reports: list[TurnReport] = []
    for index, turn in enumerate(scenario.conversation):
        if on_turn is not None:
            on_turn(index)
        if turn.approvals is not None:
            runner.broker.use_resolver(scripted_resolver(turn.approvals))
        provider.responses = list(turn.model)
        provider.calls = 0
        provider.requests = []
        if turn.inbound is not None:
            session_key = turn.session_key or runner_session_key(turn.inbound)
        else:
            session_key = turn.session_key or "agent:main:scenario"
        for item in turn.injections:
            host.gateway.sessions.enqueue_injection(
                str(item.get("plugin_id") or "scenario"),
                str(item.get("session_key") or session_key),
                str(item["text"]),
                placement=item.get("placement", "prepend"),
                idempotency_key=item.get("idempotency_key"),
            )
        if turn.inbound is not None:
            inbound = {
                **turn.inbound,
                "session_key": turn.inbound.get("session_key") or session_key,
            }
            result = await runner.handle_inbound(inbound)
        else:
            result = await runner.run_turn(
                turn.prompt or "", session_key=session_key, heartbeat=turn.heartbeat
            )
        requests = [{"messages": r.messages} for r in provider.requests]
        reports.append(TurnReport(index, result, requests))
    return reports


def runner_session_key(inbound: dict[str, Any]) -> str:
    """The session key the runner derives for an inbound message (agent ``main``)."""
    if inbound.get("session_key"):
        return str(inbound["session_key"])
    peer = inbound.get("chat_id") or inbound.get("sender_id") or "main"
    return f"agent:main:{inbound.get('channel') or 'direct'}:{peer}"


def _subsequence(
    expected: list[Any],
    actual: list[Any],
    path: str,
    out: list[Mismatch],
    test: Callable[[Any, Any], bool],
) -> None:
    position = 0
    for index, want in enumerate(expected):
        while position < len(actual) and not test(want, actual[position]):
            position += 1
        if position >= len(actual):
            out.append(
                Mismatch(f"{path}[{index}]", want, MISSING, "not found after the previous match")
            )
            return
        position += 1


def _matches(want: Any, got: Any) -> bool:
    found: list[Mismatch] = []
    match(want, got, "", found)
    return not found


def _check_turn(turn: ConversationTurn, report: TurnReport) -> list[Mismatch]:
    out: list[Mismatch] = []
    result = report.result.model_dump(mode="json")
    if turn.expect is not None:
        want = dict(turn.expect)
        contains = want.pop("reply_contains", None)
        excludes = want.pop("reply_excludes", None)
        match(want, result, "result", out)
        reply = result.get("reply") or ""
        for text in [contains] if isinstance(contains, str) else contains or []:
            if text not in reply:
                out.append(Mismatch("result.reply", f"contains {text!r}", reply))
        for text in [excludes] if isinstance(excludes, str) else excludes or []:
            if text in reply:
                out.append(Mismatch("result.reply", f"does not contain {text!r}", reply))
    hooks = report.result.hooks
    if turn.expect_hooks is not None:
        _subsequence(turn.expect_hooks, hooks, "hooks", out, lambda a, b: a == b)
        if out and out[-1].path.startswith("hooks"):
            out[-1].note = f"{out[-1].note}; dispatched: {', '.join(hooks)}"
    for hook in turn.expect_no_hooks or []:
        if hook in hooks:
            out.append(Mismatch("hooks", f"no {hook}", hooks, f"{hook} was dispatched"))
    entries = report.result.trace
    for hook, want in (turn.expect_decisions or {}).items():
        decisions = [
            e.get("decision", {}) for e in entries if e.get("kind") == "hook" and e["name"] == hook
        ]
        patterns = want if isinstance(want, list) else [want]
        _subsequence(patterns, decisions, f"decisions[{json.dumps(hook)}]", out, _matches)
        if out and out[-1].path.startswith(f"decisions[{json.dumps(hook)}]"):
            out[-1].note = f"{out[-1].note}; decisions of {hook}: {json.dumps(decisions)}"
    for tool, want in (turn.expect_tools or {}).items():
        gate = [
            e.get("decision", {}) for e in entries if e.get("kind") == "tool" and e["name"] == tool
        ]
        patterns = want if isinstance(want, list) else [want]
        _subsequence(patterns, gate, f"tools[{json.dumps(tool)}]", out, _matches)
    if turn.expect_model_saw is not None:
        first = report.requests[0]["messages"] if report.requests else []
        system = "\n".join(str(m.get("content")) for m in first if m.get("role") == "system")
        prompt = next(
            (str(m.get("content")) for m in reversed(first) if m.get("role") == "user"), ""
        )
        saw = turn.expect_model_saw
        for text in saw.get("prompt_contains", []):
            if text not in prompt:
                out.append(Mismatch("model_saw.prompt", f"contains {text!r}", prompt))
        for text in saw.get("prompt_excludes", []):
            if text in prompt:
                out.append(Mismatch("model_saw.prompt", f"does not contain {text!r}", prompt))
        for text in saw.get("system_contains", []):
            if text not in system:
                out.append(Mismatch("model_saw.system", f"contains {text!r}", system))
    if turn.expect_transcript is not None:
        _subsequence(turn.expect_transcript, result["transcript"], "transcript", out, _matches)
    if turn.expect_delivery is not None:
        match(turn.expect_delivery, result.get("delivery") or {}, "delivery", out)
    return out


def check_conversation(scenario: Scenario, reports: list[TurnReport]) -> list[StepFailure]:
    """Every turn (of those that ran) that missed its expectations, in order."""
    failures: list[StepFailure] = []
    for turn, report in zip(scenario.conversation, reports, strict=False):
        mismatches = _check_turn(turn, report)
        if mismatches:
            expectation = StepExpectation(
                index=report.index,
                label=turn_label(report.index, turn.name),
                hook="turn",
                name=turn.name,
            )
            failures.append(StepFailure(expectation, "turn", mismatches))
    return failures


def turn_has_expectations(turn: ConversationTurn) -> bool:
    """Whether the turn checks anything."""
    return any(
        getattr(turn, name) is not None
        for name in ConversationTurn.model_fields
        if name.startswith("expect")
    )


async def run_conversation_checked(
    scenario: Scenario, host: PluginHost, *, source: str | None = None, interactive: bool = False
) -> list[TurnReport]:
    """:func:`run_conversation`; a crash is re-raised as a
    :class:`~agentplug.testing.scenario_check.ScenarioRunError` naming the turn."""
    from agentplug.testing.scenario_check import ScenarioRunError

    current: list[int] = []
    try:
        return await run_conversation(
            scenario, host, interactive=interactive, on_turn=current.append
        )
    except Exception as exc:
        index = current[-1] if current else None
        where = "before the first turn"
        if index is not None:
            where = f"at {turn_label(index, scenario.conversation[index].name)}"
        detail = f"running the conversation failed {where}: {type(exc).__name__}: {exc}"
        raise ScenarioRunError(detail, source, index=index) from exc
    finally:
        await host.aclose(1.0)
