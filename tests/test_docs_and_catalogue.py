"""The catalogue is complete, documented, and the generated files are up to date."""

from __future__ import annotations

import re
from pathlib import Path

from agentplug.cli.codegen import FACADE_PATH, render_facade
from agentplug.cli.reference import render_hook_reference
from agentplug_hookspecs import builtin_declarations

ROOT = Path(__file__).resolve().parents[1]

# Every hook named in HOOKS.md §3 (kept here as data: the product never reads the spec).
SPEC_HOOKS = [
    "before_model_resolve",
    "agent_turn_prepare",
    "before_prompt_build",
    "before_agent_start",
    "before_agent_run",
    "before_agent_reply",
    "before_agent_finalize",
    "agent_end",
    "heartbeat_prompt_contribution",
    "model_call_started",
    "model_call_ended",
    "llm_input",
    "llm_output",
    "before_tool_call",
    "after_tool_call",
    "resolve_exec_env",
    "tool_result_persist",
    "before_message_write",
    "inbound_claim",
    "channel_pairing_requested",
    "message_received",
    "message_sending",
    "reply_payload_sending",
    "message_sent",
    "before_dispatch",
    "reply_dispatch",
    "session_start",
    "session_end",
    "before_compaction",
    "after_compaction",
    "before_reset",
    "subagent_spawned",
    "subagent_ended",
    "subagent_delivery_target",
    "subagent_spawning",
    "gateway_start",
    "gateway_stop",
    "deactivate",
    "cron_reconciled",
    "cron_changed",
    "before_install",
]


def test_every_spec_hook_is_declared() -> None:
    missing = set(SPEC_HOOKS) - set(builtin_declarations())
    assert not missing, f"hooks of HOOKS.md without a hookspec: {sorted(missing)}"


def test_every_hookspec_has_a_docstring() -> None:
    undocumented = [name for name, decl in builtin_declarations().items() if len(decl.doc) < 20]
    assert not undocumented


def test_every_hook_has_a_reference_entry_in_docs() -> None:
    text = (ROOT / "docs" / "hooks.md").read_text(encoding="utf-8")
    headings = set(re.findall(r"^### (\w+)$", text, flags=re.M))
    missing = set(builtin_declarations()) - headings
    assert not missing, f"run `agentplug docs hooks --write docs/hooks.md`; missing: {missing}"


def test_hook_reference_is_up_to_date() -> None:
    current = (ROOT / "docs" / "hooks.md").read_text(encoding="utf-8")
    assert current == render_hook_reference(builtin_declarations()), (
        "docs/hooks.md is stale: run `agentplug docs hooks --write docs/hooks.md`"
    )


def test_typed_facade_is_up_to_date() -> None:
    assert FACADE_PATH.read_text(encoding="utf-8") == render_facade(), (
        "facade.py is stale: run `agentplug dev codegen`"
    )


def test_claim_hooks_are_firstresult_hookspecs() -> None:
    for decl in builtin_declarations().values():
        module = __import__(decl.event.__module__, fromlist=["x"])
        spec_opts = getattr(module, decl.name).agentplug_spec
        assert spec_opts["firstresult"] is (decl.kind.value == "claim"), decl.name


def test_every_public_name_resolves_and_is_documented() -> None:
    import inspect

    import agentplug

    for name in agentplug.__all__:
        value = getattr(agentplug, name)
        if inspect.isclass(value) or inspect.isfunction(value):
            assert (value.__doc__ or "").strip(), f"agentplug.{name} has no docstring"


def _hook_models() -> dict[str, type]:
    models: dict[str, type] = {}
    for decl in builtin_declarations().values():
        for role, model in (
            ("event", decl.event),
            ("context", decl.ctx),
            ("result", decl.result),
            ("outcome", decl.outcome),
        ):
            if model is not None:
                models.setdefault(f"{model.__name__} ({role} of {decl.name})", model)
    return models


def test_every_event_context_result_and_outcome_field_has_a_description() -> None:
    empty = [
        f"{where}.{name}"
        for where, model in _hook_models().items()
        for name, info in model.model_fields.items()  # type: ignore[attr-defined]
        if not (info.description or "").strip()
    ]
    assert empty == [], "write a docstring under each field of the hookspec model"


def test_field_types_render_in_full() -> None:
    from typing import Any, Literal

    from agentplug.cli.reference import type_text

    assert type_text(list[str] | None) == "list[str] | None"
    assert type_text(dict[str, Any]) == "dict[str, Any]"
    assert type_text(Literal["a", "b"] | None) == "Literal['a', 'b'] | None"
    table_types = re.findall(
        r"^\| `[a-z_]+` \(`\w+`\) \| `([^`]+)` \|", (ROOT / "docs" / "hooks.md").read_text(), re.M
    )
    assert len(table_types) > 300
    bare = {"Optional", "Literal", "list", "dict", "Union", "Callable"}
    assert [t for t in table_types if t.replace("\\|", "|").split(" | ")[0] in bare] == []
