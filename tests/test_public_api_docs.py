"""Every public name hosts and plugin authors use is documented: a docstring of its own and
a mention in docs/ (``agentplug.__all__``, and the members of ``PluginHost``)."""

from __future__ import annotations

import inspect
import re
from pathlib import Path

import agentplug

ROOT = Path(__file__).resolve().parents[1]
HOST_NAMED = ["sessions", "plan"]  # named in the issue that asked for this test


def _docs() -> str:
    return "\n".join(p.read_text(encoding="utf-8") for p in sorted((ROOT / "docs").glob("*.md")))


def _own_docstring(obj: object) -> str:
    if inspect.isclass(obj):
        return str(obj.__dict__.get("__doc__") or "")
    return str(getattr(obj, "__doc__", "") or "")


def test_every_name_in_agentplug_all_has_a_docstring_and_is_mentioned_in_docs() -> None:
    docs = _docs()
    undocumented, unmentioned = [], []
    for name in agentplug.__all__:
        obj = getattr(agentplug, name)
        if not name.startswith("__") and not _own_docstring(obj).strip():
            undocumented.append(name)
        if not re.search(rf"(?<![\w.]){re.escape(name)}(?!\w)", docs):
            unmentioned.append(name)
    assert undocumented == [], "give these a docstring"
    assert unmentioned == [], "mention these in docs/ (docs/api.md lists every public name)"


def test_the_front_door_has_at_most_thirty_names() -> None:
    assert len(agentplug.__all__) <= 30


def test_a_name_that_left_the_front_door_still_imports_with_a_warning_naming_its_place() -> None:
    import pytest

    with pytest.warns(DeprecationWarning, match=r"agentplug\.ShutdownFinalizer .*gateway\.stop"):
        moved = agentplug.ShutdownFinalizer
    from agentplug.services.lifecycle import ShutdownFinalizer

    assert moved is ShutdownFinalizer


def test_an_unknown_root_name_is_an_attribute_error() -> None:
    import pytest

    with pytest.raises(AttributeError, match="no attribute 'Nope'"):
        _ = agentplug.Nope


def test_every_public_member_of_the_host_is_documented() -> None:
    docs = _docs()
    host = agentplug.PluginHost()
    names = {n for n in dir(agentplug.PluginHost) if not n.startswith("_")}
    names |= {n for n in vars(host) if not n.startswith("_")}
    assert set(HOST_NAMED) <= names
    missing_doc = [
        n
        for n in sorted(names)
        if n in dir(agentplug.PluginHost)
        and not inspect.getdoc(inspect.getattr_static(agentplug.PluginHost, n))
    ]
    unmentioned = [n for n in sorted(names) if not re.search(rf"host\.{n}\b", docs)]
    assert missing_doc == []
    assert unmentioned == []
