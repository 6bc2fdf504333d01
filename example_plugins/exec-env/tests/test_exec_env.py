"""exec-env, loaded from its installed entry point with agentplug's pytest fixtures."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from agentplug import PluginHost, PluginRecord
from agentplug.testing.pytest_plugin import Dispatcher, PluginLoader
from agentplug_hookspecs.tools import ExecEnvOutcome

PLUGIN_ID = "exec-env"
HOSTILE = {
    "LD_PRELOAD": "/tmp/evil.so",
    "PATH": "/tmp/evil-bin",
    "HTTPS_PROXY": "http://attacker.example:8080",
    "https_proxy": "http://attacker.example:8080",
    "NODE_OPTIONS": "--require /tmp/evil.js",
    "PYTHONPATH": "/tmp/evil-py",
    "SSL_CERT_FILE": "/tmp/evil-ca.pem",
}

Resolve = Callable[..., ExecEnvOutcome]


def exec_env_config(**config: Any) -> pytest.MarkDecorator:
    """``plugins.entries.exec-env.config`` for the test's host."""
    return pytest.mark.agentplug_config({"plugins": {"entries": {PLUGIN_ID: {"config": config}}}})


@pytest.fixture(autouse=True)
def exec_env(agentplug_load: PluginLoader) -> PluginRecord:
    """The plugin, registered from its entry point like an installed plugin (not bundled)."""
    return agentplug_load(PLUGIN_ID)


@pytest.fixture
def resolve(agentplug_dispatch: Dispatcher) -> Resolve:
    """``resolve(exec_host="gateway")``: dispatch ``resolve_exec_env`` for an ``exec`` call."""

    def resolve(exec_host: str = "gateway") -> ExecEnvOutcome:
        event = {"session_key": "agent:main", "tool_name": "exec", "host": exec_host}
        outcome: ExecEnvOutcome = agentplug_dispatch("resolve_exec_env", event).outcome
        return outcome

    return resolve


def test_loads_from_its_entry_point_as_a_resolve_exec_env_handler(
    exec_env: PluginRecord, agentplug_host: PluginHost
) -> None:
    assert agentplug_host.plugins == [exec_env]
    assert (exec_env.plugin_id, exec_env.bundled, exec_env.hooks) == (
        PLUGIN_ID,
        False,
        ["resolve_exec_env"],
    )


@exec_env_config(env={"GIT_AUTHOR_NAME": "agent", "TZ": "UTC"})
def test_configured_variables_are_contributed(resolve: Resolve) -> None:
    outcome = resolve()
    assert outcome.env == {"GIT_AUTHOR_NAME": "agent", "TZ": "UTC"}
    assert outcome.contributors == {"GIT_AUTHOR_NAME": PLUGIN_ID, "TZ": PLUGIN_ID}
    assert outcome.dropped == []


@exec_env_config(env={"RETRIES": 3, "DEBUG": True, "NESTED": {"a": 1}})
def test_numbers_and_booleans_become_strings_and_other_values_are_skipped(
    resolve: Resolve,
) -> None:
    assert resolve().env == {"RETRIES": "3", "DEBUG": "true"}


@exec_env_config(env={"TZ": "UTC", **HOSTILE})
def test_hostile_keys_it_contributes_are_dropped_by_the_runtime_filter(resolve: Resolve) -> None:
    outcome = resolve()
    assert outcome.env == {"TZ": "UTC"}
    assert sorted(d.key for d in outcome.dropped) == sorted(HOSTILE)
    assert {d.plugin_id for d in outcome.dropped} == {PLUGIN_ID}


@exec_env_config(env=HOSTILE)
def test_each_dropped_key_says_why_and_never_carries_its_value(resolve: Resolve) -> None:
    outcome = resolve()
    reasons = {d.key: d.reason for d in outcome.dropped}
    assert "PATH is never taken from plugins" in reasons["PATH"]
    assert all(reasons.values())
    dumped = outcome.model_dump_json()
    assert not any(value in dumped for value in HOSTILE.values())


@exec_env_config(env={"BAD-NAME": "x", "GOOD_NAME": "y"})
def test_invalid_variable_names_are_dropped(resolve: Resolve) -> None:
    outcome = resolve()
    assert outcome.env == {"GOOD_NAME": "y"}
    assert [d.key for d in outcome.dropped] == ["BAD-NAME"]


@exec_env_config(env={"TZ": "UTC"}, hosts=["sandbox"])
def test_hosts_limits_the_contribution_to_the_listed_exec_hosts(resolve: Resolve) -> None:
    assert resolve("sandbox").env == {"TZ": "UTC"}
    assert resolve("gateway").env == {}


def test_without_env_config_nothing_is_contributed(resolve: Resolve) -> None:
    outcome = resolve()
    assert (outcome.env, outcome.dropped) == ({}, [])
