"""security.install_policy first, then before_install (fail closed)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from agentplug import PluginApi, PluginHost
from agentplug.services.install import (
    InstallDecision,
    InstallPolicy,
    check_install,
    evaluate_policy,
    policy_from_config,
)


def on(hook: str, fn: Any, **kw: Any) -> Any:
    def register(api: PluginApi) -> None:
        api.on(hook, fn, **kw)

    return register


def host_with(policy: Any = None, *, camel: bool = False) -> PluginHost:
    security = {} if policy is None else {"installPolicy" if camel else "install_policy": policy}
    return PluginHost({"security": security})


def check(host: PluginHost, **event: Any) -> InstallDecision:
    return asyncio.run(check_install(host, {"name": "agentplug-audit-log", **event}))


RULES = {
    "enabled": True,
    "rules": [
        {"action": "block", "name": "evil-*"},
        {"action": "allow", "name": "agentplug-*", "version": ">=1.0,<2"},
        {"action": "allow", "name": "internal-*", "source": "https://pypi.corp/*"},
    ],
    "default": "block",
}


def test_without_a_policy_installs_are_allowed_and_before_install_runs() -> None:
    host = host_with()
    ran: list[str] = []
    host.register(on("before_install", lambda event: ran.append(event.name)), "observer")
    decision = check(host)
    assert decision.allowed and ran == ["agentplug-audit-log"]
    assert decision.policy.reason == "install policy disabled"


@pytest.mark.parametrize(
    ("event", "allowed", "rule"),
    [
        ({"name": "evil-tool"}, False, 0),
        ({"name": "Evil_Tool"}, False, 0),  # PEP 503 normalisation
        ({"name": "agentplug-x", "version": "1.4.0"}, True, 1),
        ({"name": "agentplug-x", "version": "2.0"}, False, None),  # falls to default block
        ({"name": "internal-x", "source": "https://pypi.corp/simple"}, True, 2),
        ({"name": "internal-x", "source": "https://pypi.org/simple"}, False, None),
        ({"name": "something-else"}, False, None),
    ],
)
def test_rules_apply_in_order_then_the_default(
    event: dict[str, Any], allowed: bool, rule: int | None
) -> None:
    decision = evaluate_policy(
        InstallPolicy.model_validate(RULES),
        event.get("name"),
        event.get("version"),
        event.get("source"),
    )
    assert decision.allowed is allowed and decision.rule == rule and decision.evaluable


def test_a_policy_block_is_final_and_before_install_does_not_run() -> None:
    host = host_with(RULES)
    ran: list[str] = []
    host.register(on("before_install", lambda: ran.append("x")), "observer")
    decision = check(host, name="evil-tool")
    assert not decision.allowed and decision.blocked_by == "security.install_policy"
    assert ran == []


def test_camel_case_config_is_accepted() -> None:
    host = host_with({**RULES, "default": "allow"}, camel=True)
    assert not check(host, name="evil-x").allowed
    assert check(host, name="fine").allowed


@pytest.mark.parametrize(
    "policy",
    [
        {"enabled": True, "rules": [{"action": "maybe", "name": "x"}]},
        {"enabled": True, "rules": [{"action": "allow", "name": "x", "version": "not a spec"}]},
        {"enabled": True, "rules": [{"action": "allow"}]},
        {"enabled": True, "default": "perhaps"},
        {"enabled": True, "unknown_key": 1},
        {"rules": "not-a-list"},  # enabled unreadable: counts as enabled
        "not-an-object",
    ],
)
def test_an_enabled_policy_that_cannot_be_evaluated_blocks(policy: Any) -> None:
    decision = check(host_with(policy))
    assert not decision.allowed and decision.blocked_by == "security.install_policy"
    assert decision.policy.evaluable is False
    assert decision.reason is not None and "cannot be evaluated" in decision.reason


def test_an_invalid_but_disabled_policy_does_not_block() -> None:
    assert check(host_with({"enabled": False, "rules": "garbage"})).allowed


@pytest.mark.parametrize(
    "event",
    [
        {"name": "agentplug-x"},  # a version rule, but no version
        {"name": "agentplug-x", "version": "banana"},  # not PEP 440
        {"name": "internal-x"},  # a source rule, but no source
    ],
)
def test_missing_or_invalid_request_data_blocks(event: dict[str, Any]) -> None:
    decision = check(host_with(RULES), **event)
    assert not decision.allowed and decision.policy.evaluable is False


def test_an_evaluation_error_blocks() -> None:
    not_a_rule: Any = object()
    broken = InstallPolicy.model_construct(enabled=True, rules=[not_a_rule], default="allow")
    decision = evaluate_policy(broken, "x", None, None)
    assert not decision.allowed and not decision.evaluable


def test_policy_from_config_reports_the_offending_key() -> None:
    problem = policy_from_config({"install_policy": {"enabled": True, "rules": [{"name": "x"}]}})
    assert isinstance(problem, str) and "security.install_policy.rules.0.action" in problem


def test_before_install_findings_accumulate_in_priority_order() -> None:
    host = host_with({"enabled": True, "default": "allow"})
    host.register(
        on("before_install", lambda: {"findings": [{"message": "second"}]}, priority=1), "low"
    )
    host.register(
        on("before_install", lambda: {"findings": [{"message": "first"}]}, priority=9), "high"
    )
    decision = check(host)
    assert decision.allowed
    assert [(f.message, f.plugin_id) for f in decision.findings] == [
        ("first", "high"),
        ("second", "low"),
    ]


def test_before_install_can_block() -> None:
    host = host_with()
    host.register(
        on("before_install", lambda: {"block": True, "block_reason": "unsigned wheel"}), "sig"
    )
    decision = check(host)
    assert not decision.allowed
    assert decision.blocked_by == "sig" and decision.reason == "unsigned wheel"


def test_a_failing_before_install_handler_blocks() -> None:
    host = host_with()

    def broken() -> None:
        raise OSError("scanner unavailable")

    host.register(on("before_install", broken), "scanner")
    decision = check(host)
    assert not decision.allowed and decision.blocked_by == "scanner"


def test_builtin_scan_is_always_an_empty_ok_result() -> None:
    host = host_with()
    seen: list[Any] = []
    host.register(on("before_install", lambda event: seen.append(event.builtin_scan)), "spy")
    check(host, builtin_scan={"status": "ok", "findings": [{"fake": "finding"}]})
    assert seen[0].status == "ok" and seen[0].findings == []


def test_an_invalid_install_request_is_blocked() -> None:
    decision = asyncio.run(check_install(host_with(), {"version": "1.0"}))
    assert not decision.allowed and decision.reason is not None
    assert "invalid install request" in decision.reason
