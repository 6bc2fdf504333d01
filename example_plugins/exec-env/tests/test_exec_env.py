"""exec-env, exercised through a real PluginHost loading its entry point."""

from __future__ import annotations

import asyncio
from typing import Any

from agentplug import PluginHost
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


def make_host(config: dict[str, Any]) -> PluginHost:
    entries = {PLUGIN_ID: {"config": config}}
    host = PluginHost({"plugins": {"allow": [PLUGIN_ID], "entries": entries}})
    host.load_installed()
    assert host.load_errors == []
    return host


def resolve(config: dict[str, Any], exec_host: str = "gateway") -> ExecEnvOutcome:
    host = make_host(config)
    event = {"session_key": "agent:main", "tool_name": "exec", "host": exec_host}
    return asyncio.run(host.hooks.resolve_exec_env(event)).outcome


def test_loads_from_its_entry_point_as_a_resolve_exec_env_handler() -> None:
    (record,) = make_host({}).plugins
    assert (record.plugin_id, record.hooks) == (PLUGIN_ID, ["resolve_exec_env"])


def test_configured_variables_are_contributed() -> None:
    outcome = resolve({"env": {"GIT_AUTHOR_NAME": "agent", "TZ": "UTC"}})
    assert outcome.env == {"GIT_AUTHOR_NAME": "agent", "TZ": "UTC"}
    assert outcome.contributors == {"GIT_AUTHOR_NAME": PLUGIN_ID, "TZ": PLUGIN_ID}
    assert outcome.dropped == []


def test_numbers_and_booleans_become_strings_and_other_values_are_skipped() -> None:
    outcome = resolve({"env": {"RETRIES": 3, "DEBUG": True, "NESTED": {"a": 1}}})
    assert outcome.env == {"RETRIES": "3", "DEBUG": "true"}


def test_hostile_keys_it_contributes_are_dropped_by_the_runtime_filter() -> None:
    outcome = resolve({"env": {"TZ": "UTC", **HOSTILE}})
    assert outcome.env == {"TZ": "UTC"}
    assert sorted(d.key for d in outcome.dropped) == sorted(HOSTILE)
    assert {d.plugin_id for d in outcome.dropped} == {PLUGIN_ID}


def test_each_dropped_key_says_why_and_never_carries_its_value() -> None:
    outcome = resolve({"env": HOSTILE})
    reasons = {d.key: d.reason for d in outcome.dropped}
    assert "PATH is never taken from plugins" in reasons["PATH"]
    assert all(reasons.values())
    dumped = outcome.model_dump_json()
    assert not any(value in dumped for value in HOSTILE.values())


def test_invalid_variable_names_are_dropped() -> None:
    outcome = resolve({"env": {"BAD-NAME": "x", "GOOD_NAME": "y"}})
    assert outcome.env == {"GOOD_NAME": "y"}
    assert [d.key for d in outcome.dropped] == ["BAD-NAME"]


def test_hosts_limits_the_contribution_to_the_listed_exec_hosts() -> None:
    config = {"env": {"TZ": "UTC"}, "hosts": ["sandbox"]}
    assert resolve(config, "sandbox").env == {"TZ": "UTC"}
    assert resolve(config, "gateway").env == {}


def test_without_env_config_nothing_is_contributed() -> None:
    outcome = resolve({})
    assert (outcome.env, outcome.dropped) == ({}, [])
