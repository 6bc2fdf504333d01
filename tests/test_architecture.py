"""The shape of the runtime: layers that import downwards only, and no import circle.

The layer order itself is an import-linter contract in ``pyproject.toml`` (``make test``
runs ``lint-imports``); these tests guard what the contract cannot say.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from collections.abc import Iterator

import grimp
import pytest


@pytest.fixture(scope="module")
def graph() -> grimp.ImportGraph:
    # Every import counts: module level, inside functions and under TYPE_CHECKING.
    return grimp.build_graph("agentplug", exclude_type_checking_imports=False)


def _cycles(graph: grimp.ImportGraph) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    found: list[list[str]] = []
    counter = 0

    def imported(module: str) -> Iterator[str]:
        return iter(sorted(graph.find_modules_directly_imported_by(module)))

    for root in sorted(graph.modules):
        if root in index:
            continue
        work = [(root, imported(root))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            advanced = False
            for child in children:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append(
                        (child, iter(sorted(graph.find_modules_directly_imported_by(child))))
                    )
                    advanced = True
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            if advanced:
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_no_import_circle_inside_agentplug(graph: grimp.ImportGraph) -> None:
    assert _cycles(graph) == []


def test_the_core_imports_nothing_above_it(graph: grimp.ImportGraph) -> None:
    core = {m for m in graph.modules if m.startswith("agentplug.core")}
    outside = {
        (module, imported)
        for module in core
        for imported in graph.find_modules_directly_imported_by(module)
        if imported.startswith("agentplug") and imported not in core
    }
    assert outside == set()


def test_importing_agentplug_and_dispatching_loads_only_the_core_and_the_hosts_module() -> None:
    code = textwrap.dedent(
        """
        import asyncio, sys
        import agentplug
        host = agentplug.PluginHost()
        asyncio.run(host.dispatch("before_tool_call", {"tool_name": "exec", "params": {}}))
        host.sync.dispatch("message_received", {"content": "hi"})
        print(sorted(m for m in sys.modules
                     if m.startswith("agentplug.") and not m.startswith("agentplug.core")))
        """
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    # The public host lives beside the gateway (which it builds only on demand) and
    # brings the exec-env filter its reduction needs; nothing else.
    assert out.strip() == str(
        [
            "agentplug.gateway",
            "agentplug.gateway.assembly",
            "agentplug.security",
            "agentplug.security.execenv",
        ]
    )


def test_a_gateway_builds_each_part_once_and_its_host_knows_it() -> None:
    from agentplug import Gateway
    from agentplug.services.sessions import SessionServices
    from agentplug.store import MemoryStore

    store = MemoryStore()
    gateway = Gateway(store=store)
    assert gateway.store is store
    assert isinstance(gateway.sessions, SessionServices) and gateway.sessions.store is store
    assert gateway.approvals.store is store and gateway.tool_calls.gate.broker is gateway.approvals
    assert gateway.runner.pipeline.gate is gateway.tool_calls.gate
    assert gateway.host.gateway is gateway


def test_the_hook_host_knows_no_service() -> None:
    from agentplug.core.host import HookHost

    host = HookHost()
    for shortcut in ("store", "sessions", "actions", "trusted_policies", "services"):
        assert not hasattr(host, shortcut), shortcut


def test_no_runtime_or_contract_module_is_over_600_lines() -> None:
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    too_long = {
        str(path.relative_to(root)): lines
        for folder in ("framework", "hookspecs")
        for path in (root / folder).rglob("*.py")
        if (lines := len(path.read_text(encoding="utf-8").splitlines())) > 600
    }
    assert too_long == {}
