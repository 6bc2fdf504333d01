"""Session extensions, next-turn injections and cleanup, through real plugins on a host."""

from __future__ import annotations

import logging
import warnings
from pathlib import Path
from typing import Any

import pytest
from agentplug import PluginApi, PluginHost
from agentplug.services.sessions import (
    MAX_INJECTION_TEXT_BYTES,
    MAX_PENDING_PER_PLUGIN,
    InjectionQueueFull,
    SessionExtension,
    SessionStateError,
    UnknownExtensionError,
)

S1, S2 = "agent:main:s1", "agent:main:s2"


class Workflow:
    """A workflow plugin: one extension, injections, cleanup callbacks."""

    def __init__(self, plugin_id: str = "workflow") -> None:
        self.plugin_id = plugin_id
        self.api: PluginApi | None = None
        self.ext: SessionExtension | None = None
        self.cleanups: list[tuple[str, str | None]] = []

    def register(self, api: PluginApi) -> None:
        self.api = api
        self.ext = api.session.state.register_session_extension(
            "approvals", default={"pending": 0}, description="Pending approvals"
        )
        api.session.on_cleanup(lambda reason, key: self.cleanups.append((reason, key)))

    def enqueue(self, session_key: str, text: str, **kw: Any) -> Any:
        assert self.api is not None
        return self.api.session.workflow.enqueue_next_turn_injection(session_key, text, **kw)


def make_host(*plugins: Workflow, config: dict[str, Any] | None = None, **kw: Any) -> PluginHost:
    host = PluginHost(config, **kw)
    for plugin in plugins:
        host.register(plugin, plugin.plugin_id)
    return host


def texts(entries: list[dict[str, Any]]) -> list[str]:
    return [e["text"] for e in entries]


# -- extensions ----------------------------------------------------------------------


def test_session_row_projects_a_registered_extension_with_its_default() -> None:
    host = make_host(Workflow())
    assert host.gateway.sessions.session_row(S1) == {
        "session_key": S1,
        "plugin_extensions": {"workflow": {"approvals": {"pending": 0}}},
    }


def test_host_patch_is_a_json_merge_patch() -> None:
    host = make_host(Workflow())
    host.gateway.sessions.patch(S1, "workflow", "approvals", {"pending": 2, "last": {"id": "a"}})
    state = host.gateway.sessions.patch(
        S1, "workflow", "approvals", {"last": {"by": "op"}, "pending": None}
    )
    assert state == {"last": {"id": "a", "by": "op"}}
    assert (
        host.gateway.sessions.session_row(S1)["plugin_extensions"]["workflow"]["approvals"] == state
    )


def test_patches_are_per_session() -> None:
    host = make_host(Workflow())
    host.gateway.sessions.patch(S1, "workflow", "approvals", {"pending": 5})
    assert host.gateway.sessions.session_row(S2)["plugin_extensions"]["workflow"]["approvals"] == {
        "pending": 0
    }


def test_the_plugin_reads_and_patches_through_its_handle() -> None:
    plugin = Workflow()
    make_host(plugin)
    assert plugin.ext is not None
    plugin.ext.patch(S1, {"pending": 1})
    assert plugin.ext.get(S1) == {"pending": 1}


def test_patching_an_unknown_extension_is_an_error() -> None:
    host = make_host(Workflow())
    with pytest.raises(UnknownExtensionError, match="registered no session extension 'nope'"):
        host.gateway.sessions.patch(S1, "workflow", "nope", {"a": 1})
    with pytest.raises(UnknownExtensionError):
        host.gateway.sessions.patch(S1, "other-plugin", "approvals", {"a": 1})


@pytest.mark.parametrize(
    "patch",
    [{"when": object()}, {"n": float("nan")}, {"s": {1, 2}}, {"b": b"bytes"}],
)
def test_a_non_json_patch_is_rejected_and_nothing_changes(patch: dict[str, Any]) -> None:
    host = make_host(Workflow())
    with pytest.raises(SessionStateError, match="JSON"):
        host.gateway.sessions.patch(S1, "workflow", "approvals", patch)
    assert host.gateway.sessions.session_row(S1)["plugin_extensions"]["workflow"]["approvals"] == {
        "pending": 0
    }


def test_a_patch_must_be_an_object() -> None:
    host = make_host(Workflow())
    with pytest.raises(SessionStateError, match="JSON object"):
        host.gateway.sessions.patch(S1, "workflow", "approvals", ["x"])


def test_state_is_size_bounded() -> None:
    host = make_host(Workflow())
    with pytest.raises(SessionStateError, match="limit"):
        host.gateway.sessions.patch(S1, "workflow", "approvals", {"blob": "x" * 20_000})


def test_registration_validates_the_default_and_the_name() -> None:
    def plugin(api: PluginApi) -> None:
        api.session.state.register_session_extension("bad", default={"t": object()})

    host = PluginHost()
    with pytest.raises(Exception, match="JSON-compatible"):
        host.register(plugin, "bad-default")
    with pytest.raises(SessionStateError, match="name"):
        host.gateway.sessions.register_extension("p", "has space")


def test_registering_the_same_extension_twice_is_an_error() -> None:
    host = make_host(Workflow())
    with pytest.raises(SessionStateError, match="already registered"):
        host.gateway.sessions.register_extension("workflow", "approvals")


def test_deprecated_top_level_aliases_work_and_warn() -> None:
    seen: dict[str, Any] = {}

    def plugin(api: PluginApi) -> None:
        seen["ext"] = api.register_session_extension("legacy", default={"v": 1})
        seen["receipt"] = api.enqueue_next_turn_injection(S1, "legacy text")

    host = PluginHost()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        host.register(plugin, "legacy")
    messages = [str(w.message) for w in caught if issubclass(w.category, DeprecationWarning)]
    assert any("api.session.state.register_session_extension" in m for m in messages)
    assert any("api.session.workflow.enqueue_next_turn_injection" in m for m in messages)
    assert host.gateway.sessions.session_row(S1)["plugin_extensions"]["legacy"] == {
        "legacy": {"v": 1}
    }
    assert texts(host.gateway.sessions.drain_injections(S1)) == ["legacy text"]


def test_state_and_injections_survive_a_restart_with_the_sqlite_store(tmp_path: Path) -> None:
    plugin = Workflow()
    first = make_host(plugin, state_dir=tmp_path)
    first.sessions.patch(S1, "workflow", "approvals", {"pending": 3})
    plugin.enqueue(S1, "resume deploy #12", idempotency_key="deploy-12")
    first.store.close()

    second = make_host(Workflow(), state_dir=tmp_path)
    assert second.sessions.session_row(S1)["plugin_extensions"]["workflow"]["approvals"] == {
        "pending": 3
    }
    assert texts(second.sessions.drain_injections(S1)) == ["resume deploy #12"]
    second.store.close()

    third = make_host(Workflow(), state_dir=tmp_path)
    assert third.sessions.drain_injections(S1) == []  # delivered once, across restarts
    replay = third.sessions.api_for("workflow").workflow.enqueue_next_turn_injection(
        S1, "resume deploy #12", idempotency_key="deploy-12"
    )
    assert replay.duplicate and third.sessions.drain_injections(S1) == []
    third.store.close()


# -- next-turn injections --------------------------------------------------------------


def test_an_injection_is_delivered_exactly_once() -> None:
    plugin = Workflow()
    host = make_host(plugin)
    receipt = plugin.enqueue(S1, "Approval granted.", placement="append", metadata={"k": 1})
    assert receipt.accepted and receipt.id
    [entry] = host.gateway.sessions.drain_injections(S1)
    assert entry["text"] == "Approval granted."
    assert entry["placement"] == "append"
    assert entry["plugin_id"] == "workflow"
    assert entry["metadata"] == {"k": 1}
    assert host.gateway.sessions.drain_injections(S1) == []


def test_injections_are_per_session_and_in_queue_order() -> None:
    plugin = Workflow()
    host = make_host(plugin)
    plugin.enqueue(S1, "one")
    plugin.enqueue(S2, "other session")
    plugin.enqueue(S1, "two")
    assert texts(host.gateway.sessions.drain_injections(S1)) == ["one", "two"]
    assert texts(host.gateway.sessions.drain_injections(S2)) == ["other session"]


def test_expired_injections_are_dropped() -> None:
    plugin = Workflow()
    host = make_host(plugin)
    now = [1_000.0]
    host.gateway.sessions.clock = lambda: now[0]
    plugin.enqueue(S1, "short-lived", ttl_ms=500)
    plugin.enqueue(S1, "long-lived", ttl_ms=60_000)
    plugin.enqueue(S1, "forever")
    now[0] += 1.0
    assert texts(host.gateway.sessions.drain_injections(S1)) == ["long-lived", "forever"]


def test_duplicates_by_idempotency_key_collapse_to_the_first() -> None:
    plugin = Workflow()
    host = make_host(plugin)
    first = plugin.enqueue(S1, "first", idempotency_key="approval-12")
    again = plugin.enqueue(S1, "second", idempotency_key="approval-12")
    assert again.duplicate and again.id == first.id
    assert texts(host.gateway.sessions.drain_injections(S1)) == ["first"]


def test_a_duplicate_enqueued_after_delivery_is_never_delivered() -> None:
    plugin = Workflow()
    host = make_host(plugin)
    plugin.enqueue(S1, "resume", idempotency_key="k")
    assert texts(host.gateway.sessions.drain_injections(S1)) == ["resume"]
    replay = plugin.enqueue(S1, "resume (replayed)", idempotency_key="k")
    assert replay.duplicate
    assert host.gateway.sessions.drain_injections(S1) == []


def test_idempotency_keys_are_scoped_per_plugin() -> None:
    a, b = Workflow("wf-a"), Workflow("wf-b")
    host = make_host(a, b)
    a.enqueue(S1, "from a", idempotency_key="same")
    b.enqueue(S1, "from b", idempotency_key="same")
    assert texts(host.gateway.sessions.drain_injections(S1)) == ["from a", "from b"]


def test_duplicates_appended_concurrently_are_collapsed_at_drain() -> None:
    # Two processes may both append before either sees the other's entry.
    plugin = Workflow()
    host = make_host(plugin)
    for text in ("first", "racing twin"):
        host.gateway.store.append(
            "session.injections",
            S1,
            {"id": text, "plugin_id": "workflow", "text": text, "placement": "prepend",
             "idempotency_key": "k", "expires_at_ms": None},
        )  # fmt: skip
    assert texts(host.gateway.sessions.drain_injections(S1)) == ["first"]


def test_the_per_plugin_queue_cap_rejects_the_newest_entry() -> None:
    plugin, other = Workflow(), Workflow("other")
    host = make_host(plugin, other)
    for i in range(MAX_PENDING_PER_PLUGIN):
        plugin.enqueue(S1, f"n{i}")
    with pytest.raises(InjectionQueueFull, match="limit 32"):
        plugin.enqueue(S1, "one too many")
    assert other.enqueue(S1, "another plugin is not affected").accepted
    drained = host.gateway.sessions.drain_injections(S1)
    assert texts(drained)[:2] == ["n0", "n1"] and "one too many" not in texts(drained)
    assert plugin.enqueue(S1, "room again after the drain").accepted


def test_expired_entries_do_not_count_against_the_cap() -> None:
    plugin = Workflow()
    host = make_host(plugin)
    now = [0.0]
    host.gateway.sessions.clock = lambda: now[0]
    for i in range(MAX_PENDING_PER_PLUGIN):
        plugin.enqueue(S1, f"n{i}", ttl_ms=10)
    now[0] = 1.0
    assert plugin.enqueue(S1, "fits").accepted


def test_injection_text_is_bounded() -> None:
    plugin = Workflow()
    make_host(plugin)
    with pytest.raises(SessionStateError, match="limit"):
        plugin.enqueue(S1, "x" * (MAX_INJECTION_TEXT_BYTES + 1))
    assert plugin.enqueue(S1, "x" * MAX_INJECTION_TEXT_BYTES).accepted


@pytest.mark.parametrize(
    "kwargs",
    [{"text": ""}, {"placement": "middle"}, {"ttl_ms": 0}, {"metadata": {"x": object()}}],
)
def test_invalid_injections_are_rejected(kwargs: dict[str, Any]) -> None:
    plugin = Workflow()
    make_host(plugin)
    args: dict[str, Any] = {"text": "ok", **kwargs}
    with pytest.raises(SessionStateError):
        plugin.enqueue(S1, **args)


def gated(plugin_id: str) -> dict[str, Any]:
    return {"plugins": {"entries": {plugin_id: {"hooks": {"allow_prompt_injection": False}}}}}


def test_the_prompt_injection_gate_stops_enqueueing(caplog: pytest.LogCaptureFixture) -> None:
    plugin, other = Workflow(), Workflow("other")
    host = make_host(plugin, other, config=gated("workflow"))
    with caplog.at_level(logging.WARNING):
        receipt = plugin.enqueue(S1, "should not be queued")
    assert receipt.accepted is False and receipt.reason == "prompt_injection_disabled"
    assert "allow_prompt_injection" in caplog.text
    other.enqueue(S1, "allowed plugin")
    assert texts(host.gateway.sessions.drain_injections(S1)) == ["allowed plugin"]


def test_the_gate_also_stops_delivery_of_entries_queued_before(tmp_path: Path) -> None:
    before = make_host(Workflow(), state_dir=tmp_path)
    before.sessions.api_for("workflow").workflow.enqueue_next_turn_injection(S1, "old entry")
    before.store.close()
    after = make_host(Workflow(), config=gated("workflow"), state_dir=tmp_path)
    assert after.sessions.drain_injections(S1) == []
    after.store.close()


# -- cleanup ---------------------------------------------------------------------------


def seeded() -> tuple[PluginHost, Workflow, Workflow]:
    a, b = Workflow("wf-a"), Workflow("wf-b")
    host = make_host(a, b)
    for plugin in (a, b):
        for key in (S1, S2):
            host.gateway.sessions.patch(key, plugin.plugin_id, "approvals", {"pending": 9})
            plugin.enqueue(key, f"{plugin.plugin_id}@{key}")
    return host, a, b


def state(host: PluginHost, key: str, plugin_id: str) -> Any:
    return host.gateway.sessions.session_row(key)["plugin_extensions"][plugin_id]["approvals"]


@pytest.mark.parametrize("reason", ["reset", "delete"])
def test_reset_and_delete_clear_that_session_only(reason: Any) -> None:
    host, a, b = seeded()
    host.gateway.sessions.cleanup(S1, reason)
    assert a.cleanups == [(reason, S1)] and b.cleanups == [(reason, S1)]
    assert state(host, S1, "wf-a") == {"pending": 0}  # back to the default
    assert host.gateway.sessions.drain_injections(S1) == []
    assert state(host, S2, "wf-a") == {"pending": 9}
    assert texts(host.gateway.sessions.drain_injections(S2)) == ["wf-a@" + S2, "wf-b@" + S2]


def test_disable_clears_that_plugin_everywhere_and_nothing_else() -> None:
    host, a, b = seeded()
    host.gateway.sessions.cleanup_plugin("wf-a", "disable")
    assert a.cleanups == [("disable", None)] and b.cleanups == []
    for key in (S1, S2):
        assert "wf-a" not in host.gateway.sessions.session_row(key)["plugin_extensions"]
        assert state(host, key, "wf-b") == {"pending": 9}
        assert texts(host.gateway.sessions.drain_injections(key)) == [f"wf-b@{key}"]
    host.unregister("wf-a")
    again = Workflow("wf-a")
    host.register(again, "wf-a")  # re-enabled: registers its extension afresh
    assert state(host, S1, "wf-a") == {"pending": 0}


def test_reregistering_a_plugin_replaces_its_declarations_and_keeps_its_state() -> None:
    host = make_host(Workflow())
    host.gateway.sessions.patch(S1, "workflow", "approvals", {"pending": 4})
    host.unregister("workflow")
    reloaded = Workflow()
    host.register(reloaded, "workflow")
    assert state(host, S1, "workflow") == {"pending": 4}
    host.gateway.sessions.cleanup(S1, "reset")
    assert reloaded.cleanups == [("reset", S1)]


def test_restart_calls_back_and_keeps_state_and_injections() -> None:
    host, a, _ = seeded()
    host.gateway.sessions.restart()
    host.gateway.sessions.cleanup(S1, "restart")
    assert a.cleanups == [("restart", None), ("restart", S1)]
    assert state(host, S1, "wf-a") == {"pending": 9}
    assert len(host.gateway.sessions.drain_injections(S1)) == 2


def test_a_failing_cleanup_callback_is_logged_and_the_others_run(
    caplog: pytest.LogCaptureFixture,
) -> None:
    got: list[str] = []

    def plugin(api: PluginApi) -> None:
        api.session.state.register_session_extension(
            "x", default={}, cleanup=lambda reason, key: got.append(f"ext:{reason}")
        )

        def broken(reason: str) -> None:
            raise RuntimeError("confidential detail")

        api.session.on_cleanup(broken)

        api.session.on_cleanup(lambda reason: got.append(reason))

    host = PluginHost()
    host.register(plugin, "cleaner")
    with caplog.at_level(logging.WARNING):
        host.gateway.sessions.cleanup(S1, "reset")
    assert got == ["reset", "ext:reset"]
    assert "RuntimeError" in caplog.text and "confidential detail" not in caplog.text


def test_a_cleanup_callback_with_a_defaulted_second_parameter_keeps_its_bound_value() -> None:
    got: list[tuple[str, str]] = []

    def plugin(api: PluginApi) -> None:
        for name in ("first", "second"):
            api.session.on_cleanup(lambda reason, tag=name: got.append((reason, tag)))

    host = PluginHost()
    host.register(plugin, "cleaner")
    host.gateway.sessions.cleanup(S1, "reset")
    assert got == [("reset", "first"), ("reset", "second")]


def test_cleanup_rejects_unknown_reasons() -> None:
    host = make_host(Workflow())
    with pytest.raises(ValueError):
        host.gateway.sessions.cleanup(S1, "disable")
    with pytest.raises(ValueError):
        host.gateway.sessions.cleanup_plugin("workflow", "explode")
