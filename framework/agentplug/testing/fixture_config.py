"""The operator config of the ``agentplug_host`` fixture: the fixture value merged
(deeply) with the ``agentplug_config`` / ``agentplug_plugin_config`` markers."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any, cast

import pytest

__all__ = ["config_mapping", "config_with_markers"]


def _deep_merge(base: Mapping[str, Any], extra: Mapping[str, Any]) -> dict[str, Any]:
    merged = dict(base)
    for key, value in extra.items():
        current = merged.get(key)
        if isinstance(current, Mapping) and isinstance(value, Mapping):
            merged[key] = _deep_merge(current, value)
        else:
            merged[key] = copy.deepcopy(value)
    return merged


def _marker_config(marker: pytest.Mark) -> dict[str, Any]:
    if len(marker.args) > 1 or (marker.args and not isinstance(marker.args[0], Mapping)):
        pytest.fail(
            "@pytest.mark.agentplug_config takes one dict (and/or keyword arguments), "
            f"got {marker.args!r}",
            pytrace=False,
        )
    data: dict[str, Any] = dict(marker.args[0]) if marker.args else {}
    data.update(marker.kwargs)
    return data


def _plugin_marker_config(marker: pytest.Mark) -> dict[str, Any]:
    if (
        len(marker.args) != 2
        or not isinstance(marker.args[0], str)
        or not isinstance(marker.args[1], Mapping)
    ):
        pytest.fail(
            "@pytest.mark.agentplug_plugin_config takes a plugin id and a dict, "
            f"got {marker.args!r}",
            pytrace=False,
        )
    plugin_id, config = marker.args
    return {"plugins": {"entries": {plugin_id: {"config": dict(config)}}}}


def config_with_markers(
    base: Mapping[str, Any], node: pytest.Item | pytest.Collector
) -> dict[str, Any]:
    """``base`` deeply merged with the config markers of ``node`` (the closest wins)."""
    result = copy.deepcopy(dict(base))
    # iter_markers yields the closest marker first; merge the farthest first.
    for marker in reversed(list(node.iter_markers("agentplug_config"))):
        result = _deep_merge(result, _marker_config(marker))
    for marker in reversed(list(node.iter_markers("agentplug_plugin_config"))):
        result = _deep_merge(result, _plugin_marker_config(marker))
    return result


def config_mapping(value: object) -> Mapping[str, Any]:
    """The ``agentplug_config`` fixture value as a mapping (a dict, a model, or ``None``)."""
    if isinstance(value, Mapping):
        return value
    dump = getattr(value, "model_dump", None)  # an AgentplugConfig
    if callable(dump):
        return cast("Mapping[str, Any]", dump())
    if value is None:
        return {}
    raise TypeError(f"agentplug_config must be a dict, got {type(value).__name__}")
