"""Trusted tool policies: registration contract, order, combination with before_tool_call."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest
from agentplug import PluginApi, PluginHost, PluginLoadError
from agentplug.services.approvals import ApprovalBroker, ProgrammaticResolver
from agentplug.services.policies import PolicyOutcome, TrustedPolicyError
from agentplug.services.toolcalls import ToolCallDecision, ToolCallGate


def installed_config(*entries: tuple[str, list[str]], **extra: Any) -> dict[str, Any]:
    return {
        "plugins": {
            "entries": {
                pid: {"enabled": True, "contracts": {"trusted_tool_policies": ids}, **extra}
                for pid, ids in entries
            }
        }
    }


def policy_plugin(
    log: list[str] | None = None,
    *policies: tuple[str, Callable[..., Any]],
) -> Callable[[PluginApi], None]:
    def register(api: PluginApi) -> None:
        for policy_id, evaluate in policies:

            def wrapped(
                event: Any, ctx: Any, _id: str = policy_id, _f: Callable[..., Any] = evaluate
            ) -> Any:
                if log is not None:
                    log.append(f"{api.plugin_id}/{_id}")
                return _f(event, ctx)

            api.register_trusted_tool_policy(policy_id, wrapped, description=f"{policy_id} test")

    return register


def hook_plugin(log: list[str], result: Any = None, name: str = "hook") -> Callable[..., Any]:
    def register(api: PluginApi) -> None:
        def before_tool_call(event: Any) -> Any:
            log.append(f"{name}:{dict(event.params)}")
            return result

        api.on("before_tool_call", before_tool_call)

    return register


def passes(event: Any, ctx: Any) -> None:
    return None


def evaluate(host: PluginHost, tool: str = "exec", **params: Any) -> PolicyOutcome:
    outcome = asyncio.run(
        host.gateway.policies.evaluate_all({"tool_name": tool, "params": params}, {})
    )
    assert isinstance(outcome, PolicyOutcome)
    return outcome


def gate_check(host: PluginHost, resolver: Any = None, **params: Any) -> ToolCallDecision:
    gate = ToolCallGate(
        host, host.gateway.policies, ApprovalBroker(resolver, store=host.gateway.store)
    )
    return asyncio.run(
        gate.check({"tool_name": "web_fetch", "params": params or {"url": "https://x"}})
    )


# -- registration contract ----------------------------------------------------------------


def test_an_installed_plugin_registering_an_undeclared_policy_id_is_rejected() -> None:
    host = PluginHost(installed_config(("budgeter", ["budget"])))
    with pytest.raises(TrustedPolicyError) as info:
        host.register(policy_plugin(None, ("workspace", passes)), "budgeter", bundled=False)
    message = str(info.value)
    assert "budgeter" in message
    assert "'workspace'" in message
    assert "plugins.entries.budgeter.contracts.trusted_tool_policies" in message
    assert isinstance(info.value, PluginLoadError)
    # rejected before registration: nothing is left behind
    assert host.gateway.policies.policies == []
    assert [p.plugin_id for p in host.plugins] == []


def test_an_undeclared_policy_is_rejected_even_when_the_plugin_catches_the_error() -> None:
    host = PluginHost(installed_config(("sly", ["budget"])))
    errors: list[str] = []

    def register(api: PluginApi) -> None:
        api.register_trusted_tool_policy("budget", passes)
        try:
            api.register_trusted_tool_policy("allow-everything", lambda e, c: None)
        except TrustedPolicyError as exc:
            errors.append(str(exc))

    host.register(register, "sly", bundled=False)
    assert len(errors) == 1
    assert [p.policy_id for p in host.gateway.policies.policies] == ["budget"]


def test_an_installed_plugin_must_be_explicitly_enabled_to_register_a_policy() -> None:
    no_entry = PluginHost({})
    with pytest.raises(TrustedPolicyError, match=r"plugins\.entries\.quiet\.enabled = true"):
        no_entry.register(policy_plugin(None, ("budget", passes)), "quiet", bundled=False)
    implicit = PluginHost(
        {"plugins": {"entries": {"quiet": {"contracts": {"trusted_tool_policies": ["budget"]}}}}}
    )
    with pytest.raises(TrustedPolicyError, match="explicitly enabled"):
        implicit.register(policy_plugin(None, ("budget", passes)), "quiet", bundled=False)
    assert implicit.trusted_policies.policies == []


def test_an_installed_plugin_loaded_from_an_entry_point_follows_the_contract(
    fake_dist: Any,
) -> None:
    source = """
    def register(api):
        api.register_trusted_tool_policy("budget", lambda event, ctx: None)
        api.register_trusted_tool_policy("undeclared", lambda event, ctx: None)
    """
    fake_dist("fakeplug-policy", "fakeplug_policy", source)
    host = PluginHost(installed_config(("fakeplug-policy", ["budget"])))
    host.load_installed(use_cache=False)
    assert [e.plugin_id for e in host.load_errors if e.plugin_id.startswith("fakeplug")] == [
        "fakeplug-policy"
    ]
    assert "undeclared" in next(
        e.cause for e in host.load_errors if e.plugin_id == "fakeplug-policy"
    )
    assert host.gateway.policies.policies == []  # the half-registered plugin left nothing


def test_a_declared_policy_of_an_enabled_installed_plugin_is_registered(fake_dist: Any) -> None:
    source = """
    def register(api):
        api.register_trusted_tool_policy(
            "budget", lambda event, ctx: {"block": True, "block_reason": "over budget"},
            description="spend cap",
        )
    """
    fake_dist("fakeplug-budget", "fakeplug_budget", source)
    host = PluginHost(installed_config(("fakeplug-budget", ["budget"])))
    host.load_installed(use_cache=False)
    [policy] = host.gateway.policies.policies
    assert (policy.plugin_id, policy.policy_id, policy.description) == (
        "fakeplug-budget",
        "budget",
        "spend cap",
    )
    outcome = evaluate(host)
    assert outcome.blocked and outcome.block_reason == "over budget"


def test_bundled_plugins_need_no_declaration() -> None:
    host = PluginHost({})
    host.register(policy_plugin(None, ("workspace", passes)), "core")
    assert [p.qualified_id for p in host.gateway.policies.policies] == ["core/workspace"]


def test_policy_ids_are_scoped_per_plugin() -> None:
    host = PluginHost(installed_config(("a", ["budget"]), ("b", ["budget"])))
    host.register(policy_plugin(None, ("budget", passes)), "a", bundled=False)
    host.register(policy_plugin(None, ("budget", passes)), "b", bundled=False)
    assert [p.qualified_id for p in host.gateway.policies.policies] == ["a/budget", "b/budget"]


def test_the_same_plugin_registering_the_same_policy_id_twice_is_an_error() -> None:
    host = PluginHost({})
    with pytest.raises(TrustedPolicyError, match="already registered"):
        host.register(policy_plugin(None, ("budget", passes), ("budget", passes)), "core")


@pytest.mark.parametrize("bad", ["", "has space", "x" * 129, "../escape"])
def test_malformed_policy_ids_are_rejected(bad: str) -> None:
    host = PluginHost({})
    with pytest.raises(TrustedPolicyError, match="policy id"):
        host.register(policy_plugin(None, (bad, passes)), "core")


def test_a_plugin_that_is_unregistered_leaves_no_policy_behind() -> None:
    host = PluginHost({})
    host.register(policy_plugin(None, ("budget", lambda e, c: {"block": True})), "core")
    host.unregister("core")
    assert host.gateway.policies.policies == []
    assert not evaluate(host).blocked


# -- order --------------------------------------------------------------------------------


def test_bundled_policies_run_first_then_installed_in_load_order_then_ordinary_hooks() -> None:
    log: list[str] = []
    host = PluginHost(installed_config(("inst-1", ["p"]), ("inst-2", ["p", "q"])))
    host.register(policy_plugin(log, ("p", passes)), "inst-1", bundled=False)
    host.register(hook_plugin(log), "hooks")
    host.register(policy_plugin(log, ("p", passes), ("q", passes)), "inst-2", bundled=False)
    host.register(policy_plugin(log, ("core", passes)), "bundled-core")
    decision = gate_check(host)
    assert decision.allowed
    assert log == [
        "bundled-core/core",
        "inst-1/p",
        "inst-2/p",
        "inst-2/q",
        "hook:{'url': 'https://x'}",
    ]
    assert [(t.plugin_id, t.policy_id, t.status) for t in decision.policy_trace] == [
        ("bundled-core", "core", "pass"),
        ("inst-1", "p", "pass"),
        ("inst-2", "p", "pass"),
        ("inst-2", "q", "pass"),
    ]


# -- combination with the ordinary hook ---------------------------------------------------


def test_a_policy_block_is_terminal_and_ordinary_hooks_do_not_run() -> None:
    log: list[str] = []
    host = PluginHost({})
    host.register(
        policy_plugin(
            log,
            ("deny-fetch", lambda e, c: {"block": True, "block_reason": "fetch is off"}),
            ("later", passes),
        ),
        "core",
    )
    host.register(hook_plugin(log), "hooks")
    decision = gate_check(host)
    assert not decision.allowed
    assert decision.reason == "fetch is off"
    assert (decision.blocked_by, decision.blocked_by_policy) == ("core", "deny-fetch")
    assert log == ["core/deny-fetch"]
    assert decision.handlers == []
    assert [t.status for t in decision.policy_trace] == ["block", "skipped"]


def test_block_false_from_a_policy_is_no_decision() -> None:
    host = PluginHost({})
    host.register(policy_plugin(None, ("p", lambda e, c: {"block": False})), "core")
    assert gate_check(host).allowed


def test_policy_params_rewrites_feed_into_the_ordinary_hooks() -> None:
    log: list[str] = []
    host = PluginHost({})
    host.register(
        policy_plugin(
            log,
            ("pin", lambda e, c: {"params": {**e.params, "timeout": 5}}),
            ("sees", lambda e, c: log.append(f"policy2 saw {sorted(e.params)}")),
        ),
        "core",
    )
    host.register(hook_plugin(log), "hooks")
    decision = gate_check(host)
    assert decision.allowed
    assert decision.params == {"url": "https://x", "timeout": 5}
    assert "policy2 saw ['timeout', 'url']" in log
    assert log[-1] == "hook:{'url': 'https://x', 'timeout': 5}"
    assert decision.policy_trace[0].status == "params"


def test_a_policy_approval_request_counts_as_the_first_approval_and_freezes_params() -> None:
    log: list[str] = []
    host = PluginHost({})
    approval = {"require_approval": {"title": "Workspace policy", "description": "fetch"}}
    host.register(policy_plugin(log, ("ask", lambda e, c: approval)), "core")
    hook_approval = {
        "params": {"url": "https://evil"},
        "require_approval": {"title": "Hook asks", "description": "d"},
    }
    host.register(hook_plugin(log, hook_approval), "hooks")
    resolver = ProgrammaticResolver()
    asked: list[Any] = []

    def person(p: Any) -> None:
        asked.append(p)
        resolver.resolve(p.id, "allow-once")

    resolver.on_pending = person
    decision = gate_check(host, resolver)
    assert decision.allowed
    assert len(asked) == 1
    assert asked[0].request.title == "Workspace policy"
    assert asked[0].plugin_id == "core"
    assert decision.params == {"url": "https://x"}  # the hook's rewrite came too late
    assert asked[0].params == {"url": "https://x"}


def test_an_ordinary_block_still_blocks_after_a_policy_asked_for_approval() -> None:
    host = PluginHost({})
    approval = {"require_approval": {"title": "Workspace policy", "description": "fetch"}}
    host.register(policy_plugin(None, ("ask", lambda e, c: approval)), "core")
    host.register(hook_plugin([], {"block": True, "block_reason": "hook says no"}), "hooks")
    resolver = ProgrammaticResolver()
    decision = gate_check(host, resolver)
    assert not decision.allowed
    assert (decision.reason, decision.blocked_by) == ("hook says no", "hooks")
    assert decision.approval_resolution is None


def test_a_later_policy_block_still_blocks_after_an_earlier_policy_asked_for_approval() -> None:
    host = PluginHost({})
    approval = {"require_approval": {"title": "t", "description": "d"}}
    host.register(policy_plugin(None, ("ask", lambda e, c: approval)), "a")
    host.register(policy_plugin(None, ("no", lambda e, c: {"block": True})), "b")
    outcome = evaluate(host)
    assert outcome.blocked and outcome.blocked_by == "b"
    assert outcome.block_reason == "blocked by trusted tool policy 'b/no'"


@pytest.mark.parametrize(
    "failure",
    [
        lambda e, c: 1 / 0,
        lambda e, c: {"allow": True},
        lambda e, c: {"block": "yes please"},
        lambda e, c: "allow-always",
    ],
    ids=["raises", "allow-shape", "bad-block", "string"],
)
def test_a_failing_policy_blocks_the_call_fail_closed(failure: Callable[..., Any]) -> None:
    log: list[str] = []
    host = PluginHost({})
    host.register(policy_plugin(log, ("broken", failure)), "core")
    host.register(hook_plugin(log), "hooks")
    decision = gate_check(host)
    assert not decision.allowed
    assert decision.blocked_by_policy == "broken"
    assert "trusted tool policy 'core/broken' failed" in decision.reason
    assert decision.policy_trace[0].status == "error"
    assert log == ["core/broken"]


def test_a_policy_that_never_answers_times_out_and_blocks() -> None:
    async def slow(event: Any, ctx: Any) -> None:
        await asyncio.sleep(3600)

    host = PluginHost(
        {"plugins": {"entries": {"core": {"hooks": {"timeouts": {"before_tool_call": 50}}}}}}
    )
    host.register(policy_plugin(None, ("slow", slow)), "core")

    async def main() -> PolicyOutcome:
        outcome = await host.gateway.policies.evaluate_all({"tool_name": "x"}, {})
        assert isinstance(outcome, PolicyOutcome)
        assert host.tracker.pending == ["core:policy:slow"]  # tracked, not cancelled
        await host.aclose(0.01)
        return outcome

    outcome = asyncio.run(main())
    assert outcome.blocked
    assert outcome.trace[0].status == "timeout"
    assert "timed out after 50 ms" in (outcome.block_reason or "")


def test_async_policies_are_awaited_and_see_their_plugin_config() -> None:
    seen: list[Any] = []

    async def configured(event: Any, ctx: Any) -> dict[str, Any] | None:
        await asyncio.sleep(0)
        seen.append(dict(event.context.plugin_config))
        if event.params.get("cost", 0) > event.context.plugin_config["cap"]:
            return {"block": True, "block_reason": "over budget"}
        return None

    config = installed_config(("budgeter", ["budget"]), config={"cap": 10})
    host = PluginHost(config)
    host.register(policy_plugin(None, ("budget", configured)), "budgeter", bundled=False)
    assert not evaluate(host, cost=5).blocked
    assert evaluate(host, cost=50).block_reason == "over budget"
    assert seen == [{"cap": 10}, {"cap": 10}]


def test_a_policy_cannot_change_the_event_other_policies_see_except_by_its_result() -> None:
    def mutate(event: Any, ctx: Any) -> None:
        with pytest.raises(TypeError):
            event.params["url"] = "https://evil"

    host = PluginHost({})
    host.register(policy_plugin(None, ("m", mutate)), "core")
    assert evaluate(host, url="https://x").params == {"url": "https://x"}


def test_a_policy_cannot_claim_another_plugins_identity_on_its_approval_request() -> None:
    def claims(event: Any, ctx: Any) -> dict[str, Any]:
        return {"require_approval": {"title": "t", "description": "d", "plugin_id": "core"}}

    host = PluginHost(installed_config(("budgeter", ["budget"])))
    host.register(policy_plugin(None, ("budget", claims)), "budgeter", bundled=False)
    outcome = evaluate(host)
    assert outcome.approval is not None
    assert outcome.approval.plugin_id == "budgeter"
    assert outcome.approval_policy == "budget"


# -- evaluate's signature -------------------------------------------------------------------


def _register_direct(host: PluginHost, policy_id: str, evaluate: Callable[..., Any]) -> None:
    host.register(
        lambda api: api.register_trusted_tool_policy(policy_id, evaluate, description="t"), "core"
    )


def test_a_one_argument_policy_is_called_with_the_event_and_decides_normally() -> None:
    host = PluginHost({})
    _register_direct(
        host,
        "no-rm",
        lambda event: (
            {"block": True, "block_reason": "no rm"} if event.params.get("cmd") == "rm" else None
        ),
    )
    assert evaluate(host, cmd="ls").blocked is False
    blocked = evaluate(host, cmd="rm")
    assert blocked.blocked and blocked.block_reason == "no rm"
    assert [t.status for t in blocked.trace] == ["block"]


def test_a_policy_taking_only_ctx_or_nothing_is_accepted() -> None:
    seen: list[str] = []
    host = PluginHost({})
    host.register(
        lambda api: (
            api.register_trusted_tool_policy(
                "ctx-only", lambda ctx: seen.append(type(ctx).__name__)
            ),
            api.register_trusted_tool_policy("no-args", lambda: seen.append("none")),
        ),
        "core",
    )
    outcome = evaluate(host, cmd="ls")
    assert not outcome.blocked and seen == ["ToolContext", "none"]


def test_a_policy_with_a_defaulted_second_parameter_keeps_its_bound_value() -> None:
    seen: list[tuple[str, Any]] = []
    host = PluginHost({})

    def register(api: PluginApi) -> None:
        for name in ("first", "second"):
            api.register_trusted_tool_policy(
                name, lambda event, pid=name: seen.append((event.tool_name, pid))
            )

    host.register(register, "core")
    evaluate(host, cmd="ls")
    assert seen == [("exec", "first"), ("exec", "second")]


def test_a_policy_with_an_unusable_signature_is_rejected_at_registration_naming_it() -> None:
    host = PluginHost({})
    with pytest.raises(TrustedPolicyError, match=r"'core'.*'three'.*\['extra'\]"):
        _register_direct(host, "three", lambda event, ctx, extra: None)
    assert host.gateway.policies.policies == []
