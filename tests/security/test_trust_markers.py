"""Runtime-only trust markers never reach a handler, at any depth, on any entry path.

``trusted_local_media`` (and its camelCase twin) is granted by the runtime itself after the
hooks ran (``send_reply_payload``). A host passing data through, a scenario file or a
plugin's result must not be able to hand one to a handler: every event and context drops
them at every depth when it is built (issue 13, item 3). Each test below is a real bypass
attempt.
"""

from __future__ import annotations

import asyncio
import json
import pickle
import subprocess
import sys
import textwrap
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from agentplug import PluginHost, hookimpl
from agentplug_hookspecs import TRUST_MARKERS, FrozenDict, FrozenList, deep_freeze

MARKER = "trusted_local_media"
CAMEL = "trustedLocalMedia"


def _markers_in(value: Any) -> list[str]:
    """Every path at which a trust marker key is found inside ``value``."""
    found: list[str] = []

    def walk(node: Any, path: str) -> None:
        if hasattr(node, "model_dump"):
            node = node.model_dump()
        if isinstance(node, Mapping):
            for key, item in node.items():
                if str(key) in TRUST_MARKERS:
                    found.append(f"{path}.{key}")
                walk(item, f"{path}.{key}")
        elif isinstance(node, list | tuple):
            for index, item in enumerate(node):
                walk(item, f"{path}[{index}]")

    walk(value, "$")
    return found


class Spy:
    """A plugin recording, per hook, the markers found in what it was handed."""

    def __init__(self) -> None:
        self.seen: dict[str, list[str]] = {}

    def _look(self, hook: str, event: Any, ctx: Any) -> None:
        extras = {**(event.model_extra or {}), **(ctx.model_extra or {})}
        self.seen[hook] = _markers_in(event) + _markers_in(ctx) + _markers_in(extras)

    @hookimpl
    def before_tool_call(self, event: Any, ctx: Any) -> None:
        self._look("before_tool_call", event, ctx)

    @hookimpl
    def message_sending(self, event: Any, ctx: Any) -> None:
        self._look("message_sending", event, ctx)

    @hookimpl
    def after_tool_call(self, event: Any, ctx: Any) -> None:
        self._look("after_tool_call", event, ctx)

    @hookimpl
    def reply_payload_sending(self, event: Any, ctx: Any) -> None:
        self._look("reply_payload_sending", event, ctx)

    @hookimpl
    def tool_result_persist(self, event: Any, ctx: Any) -> None:
        self._look("tool_result_persist", event, ctx)


def _host() -> tuple[PluginHost, Spy]:
    spy = Spy()
    host = PluginHost()
    host.register(spy, "spy")
    return host, spy


def _nested(depth: int, leaf: Any = True, key: str = MARKER) -> dict[str, Any]:
    node: dict[str, Any] = {key: leaf, "keep": "me"}
    for level in range(depth):
        node = {f"level{level}": node, "items": [{key: leaf}, ({key: 1},)]}
    return node


PAYLOADS = [
    pytest.param({"params": _nested(1)}, id="params-depth-1"),
    pytest.param({"params": _nested(6)}, id="params-depth-6"),
    pytest.param({"params": _nested(3, key=CAMEL)}, id="params-camelCase"),
    pytest.param({"params": {"list": [[{"deep": [{MARKER: "x"}]}]]}}, id="lists-of-lists"),
    pytest.param({"params": {"t": ({MARKER: 1}, [{MARKER: 2}])}}, id="tuples"),
    pytest.param({MARKER: True}, id="top-level-extra-field"),
    pytest.param({CAMEL: True, "extra": {"x": {MARKER: 1}}}, id="nested-in-extra-field"),
    pytest.param({"derived_paths": [{MARKER: True}]}, id="json-list-field"),
]


@pytest.mark.parametrize("extra", PAYLOADS)
def test_markers_are_stripped_from_dict_events_through_host_dispatch(extra: Any) -> None:
    host, spy = _host()
    event = {"tool_name": "exec", **extra}

    asyncio.run(host.dispatch("before_tool_call", event))

    assert spy.seen["before_tool_call"] == []


@pytest.mark.parametrize("extra", PAYLOADS)
def test_markers_are_stripped_from_events_built_by_the_host(extra: Any) -> None:
    host, spy = _host()
    model = host.declarations["before_tool_call"].event
    event = model(tool_name="exec", **extra)

    asyncio.run(host.dispatch("before_tool_call", event))

    assert spy.seen["before_tool_call"] == []


def test_markers_are_stripped_from_the_context_at_any_depth() -> None:
    host, spy = _host()
    ctx = {MARKER: True, "trace": _nested(4), "custom": [{CAMEL: 1}]}

    asyncio.run(host.dispatch("before_tool_call", {"tool_name": "exec"}, ctx))

    assert spy.seen["before_tool_call"] == []


def test_markers_are_stripped_through_the_typed_facade() -> None:
    host, spy = _host()

    asyncio.run(
        host.hooks.message_sending(
            {"content": "hi", "metadata": _nested(3), MARKER: 1}, {"trace": {MARKER: 1}}
        )
    )

    assert spy.seen["message_sending"] == []


def test_markers_are_stripped_through_the_sync_facade() -> None:
    host, spy = _host()
    with host.sync as sync:
        sync.hooks.before_tool_call({"tool_name": "exec", "params": _nested(5)})
        sync.dispatch("after_tool_call", {"tool_name": "x", "result": _nested(2)})

    assert spy.seen["before_tool_call"] == []
    assert spy.seen["after_tool_call"] == []


def test_markers_are_stripped_on_sync_hooks() -> None:
    host, spy = _host()

    host.call_sync("tool_result_persist", {"tool_name": "exec", "message": _nested(3)})

    assert spy.seen["tool_result_persist"] == []


def test_markers_are_stripped_from_untyped_any_fields() -> None:
    host, spy = _host()

    asyncio.run(host.dispatch("after_tool_call", {"tool_name": "x", "result": _nested(4)}))

    assert spy.seen["after_tool_call"] == []


def test_markers_are_stripped_from_nested_reply_payload_maps() -> None:
    host, spy = _host()
    payload = {
        "text": "hi",
        MARKER: True,
        "presentation": _nested(2),
        "delivery": {"x": {CAMEL: 1}},
        "media": [{"url": "file:///tmp/a.png", MARKER: True}],
        "custom": {"deep": {MARKER: 1}},
    }

    asyncio.run(host.dispatch("reply_payload_sending", {"payload": payload}))

    assert spy.seen["reply_payload_sending"] == []


def test_a_marker_hidden_behind_a_non_string_key_is_stripped() -> None:
    class Sneaky:
        def __str__(self) -> str:
            return MARKER

        def __hash__(self) -> int:
            return 1

    host, spy = _host()

    asyncio.run(host.dispatch("after_tool_call", {"tool_name": "x", "result": {Sneaky(): 1}}))

    assert spy.seen["after_tool_call"] == []


def test_a_frozen_dict_built_with_a_marker_never_holds_it() -> None:
    assert MARKER not in FrozenDict({MARKER: True, "a": 1})
    assert FrozenDict({"a": {MARKER: 1}})["a"] == {}
    assert FrozenDict(a={CAMEL: 1}, b=2) == {"a": {}, "b": 2}


def test_a_frozen_list_built_with_a_marker_never_holds_it() -> None:
    frozen = FrozenList([{MARKER: 1, "k": 2}, [{CAMEL: 3}]])
    assert frozen == [{"k": 2}, [{}]]
    assert isinstance(frozen[0], FrozenDict)


def test_a_prebuilt_frozen_dict_passed_as_params_carries_no_marker() -> None:
    host, spy = _host()
    params = FrozenDict({"nested": {MARKER: True}, MARKER: True})

    asyncio.run(host.dispatch("before_tool_call", {"tool_name": "exec", "params": params}))

    assert spy.seen["before_tool_call"] == []


def test_unpickling_a_frozen_dict_cannot_restore_a_marker() -> None:
    class Crafted:  # a pickle that rebuilds a FrozenDict from state holding a marker
        def __reduce__(self) -> tuple[Any, ...]:
            return (FrozenDict, ({MARKER: True, "a": {CAMEL: 1}},))

    restored = pickle.loads(pickle.dumps(Crafted()))
    assert restored == {"a": {}}
    assert type(restored) is FrozenDict


def test_deep_freeze_drops_markers_at_every_depth() -> None:
    frozen = deep_freeze(_nested(8))
    assert _markers_in(frozen) == []
    assert frozen["level7"]["items"][1] == [{}]


def test_a_handler_cannot_pass_a_marker_to_the_next_handler_through_params() -> None:
    host, spy = _host()

    class Smuggler:
        @hookimpl(priority=100)
        def before_tool_call(self, event: Any) -> Any:
            return {"params": {"cmd": "ls", "opts": {MARKER: True}, CAMEL: True}}

    host.register(Smuggler(), "smuggler")

    result = asyncio.run(host.dispatch("before_tool_call", {"tool_name": "exec"}))

    assert spy.seen["before_tool_call"] == []
    assert _markers_in(result.outcome.params) == []


def test_a_handler_cannot_set_a_marker_in_a_message_result() -> None:
    host, _spy = _host()

    class Smuggler:
        @hookimpl(priority=100)
        def message_sending(self, event: Any) -> Any:
            return {"cancel": True, "metadata": {"why": {MARKER: True}, CAMEL: 1}}

    host.register(Smuggler(), "smuggler")

    result = asyncio.run(host.dispatch("message_sending", {"content": "hi"}))

    assert result.outcome.cancelled is True
    assert _markers_in(result.outcome.metadata) == []


SCENARIO_PLUGIN = """
import json
from agentplug import hookimpl


@hookimpl
def before_tool_call(event, ctx):
    print("SEEN " + json.dumps({"event": event.model_dump(mode="json"),
                                "ctx": ctx.model_dump(mode="json")}))
"""


def test_markers_are_stripped_from_scenario_file_events(tmp_path: Path) -> None:
    (tmp_path / "trust_spy.py").write_text(textwrap.dedent(SCENARIO_PLUGIN), encoding="utf-8")
    scenario = {
        "plugins": ["module:trust_spy"],
        "steps": [
            {
                "hook": "before_tool_call",
                "event": {"tool_name": "exec", "params": _nested(4), MARKER: True},
                "ctx": {CAMEL: True, "trace": {"x": {MARKER: 1}}},
            }
        ],
    }
    path = tmp_path / "scenario.json"
    path.write_text(json.dumps(scenario), encoding="utf-8")

    out = subprocess.run(
        [sys.executable, "-m", "agentplug.cli", "run", str(path)],
        capture_output=True,
        text=True,
        cwd=tmp_path.parent,
        timeout=120,
    )

    assert out.returncode == 0, out.stdout + out.stderr
    seen = [json.loads(line[5:]) for line in out.stdout.splitlines() if line.startswith("SEEN ")]
    assert len(seen) == 1
    assert _markers_in(seen[0]) == []
    assert seen[0]["event"]["params"]["level3"]["items"][0] == {}
