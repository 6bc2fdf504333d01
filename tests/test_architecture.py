"""The shape of the runtime: layers that import downwards only, no import circle, and no
module reaching into another module's private names.

The layer order itself is an import-linter contract in ``pyproject.toml`` (``make test``
runs ``lint-imports``); these tests guard what the contract cannot say.
"""

from __future__ import annotations

import ast
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import grimp
import pytest

ROOT = Path(__file__).resolve().parent.parent


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
    below = {m for m in graph.modules if m.startswith("agentplug.config")}
    outside = {
        (module, imported)
        for module in core
        for imported in graph.find_modules_directly_imported_by(module)
        if imported.startswith("agentplug") and imported not in core | below
    }
    assert outside == set()


def test_the_config_layer_imports_only_the_contract_pydantic_and_the_standard_library() -> None:
    # The lowest layer: reading the operator's files needs no hook runtime.
    allowed_roots = {"agentplug", "agentplug_hookspecs", "pydantic", "pydantic_core"}
    allowed_roots |= set(sys.stdlib_module_names) | {"__future__"}
    found = set()
    for path in sorted((ROOT / "framework" / "agentplug" / "config").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            for name in names:
                inside = name == "agentplug" or name.startswith(
                    ("agentplug.config", "agentplug_hookspecs")
                )
                if name.split(".")[0] not in allowed_roots or (
                    name.startswith("agentplug") and not inside
                ):
                    found.add((path.name, name))
    assert found == set()


def test_importing_agentplug_and_dispatching_loads_the_core_its_config_and_the_host() -> None:
    code = textwrap.dedent(
        """
        import asyncio, sys
        import agentplug
        host = agentplug.PluginHost()
        asyncio.run(host.dispatch("before_tool_call", {"tool_name": "exec", "params": {}}))
        host.sync.dispatch("message_received", {"content": "hi"})
        print(sorted(m for m in sys.modules if m.startswith("agentplug.")
                     and not m.startswith(("agentplug.core", "agentplug.config"))))
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


# -- private names stay in their module ---------------------------------------------------

# Where the rule holds: the runtime, the contract and the example plugins (their tests too).
PRIVATE_NAME_ROOTS = ("framework/agentplug", "hookspecs/agentplug_hookspecs", "example_plugins")


def _is_private(name: str) -> bool:
    """``_x``, not ``__x__`` (dunders are the language's names, not a module's own)."""
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _module_name(path: Path) -> str:
    """The dotted name ``path`` is imported as (its package is the folders with an
    ``__init__.py`` above it)."""
    parts = [] if path.name == "__init__.py" else [path.stem]
    folder = path.parent
    while (folder / "__init__.py").is_file():
        parts.insert(0, folder.name)
        folder = folder.parent
    return ".".join(parts)


def _rule_modules() -> list[tuple[str, Path]]:
    """Every module the rule covers, with its dotted name (build output and caches left
    out; the example plugins' test modules may share a name, e.g. ``conftest``)."""
    found: list[tuple[str, Path]] = []
    for folder in PRIVATE_NAME_ROOTS:
        for path in sorted((ROOT / folder).rglob("*.py")):
            rel = path.relative_to(ROOT).parts
            if any(part in ("build", "dist") or part.startswith(".") for part in rel):
                continue
            found.append((_module_name(path), path))
    return found


def _imported_from(module: str, is_package: bool, node: ast.ImportFrom) -> str:
    """The absolute name of the module ``node`` imports from (relative imports resolved)."""
    if node.level == 0:
        return node.module or ""
    base = module.split(".") if is_package else module.split(".")[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join([*base, *([node.module] if node.module else [])])


def _private_uses(module: str, path: Path, known: set[str]) -> set[tuple[str, str, str]]:
    """(module, private name, module that defines it) for every private name ``module``
    takes from another first-party module: ``from X import _name``, or ``X._name`` where
    ``X`` is bound to a module by ``import X``, ``import X as Y`` or ``from P import X``."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    is_package = path.name == "__init__.py"
    first_party = {name.split(".")[0] for name in known}
    found: set[tuple[str, str, str]] = set()
    bound: dict[str, str] = {}  # local name -> the first-party module it is bound to
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname:
                    bound[alias.asname] = alias.name
                else:
                    bound[alias.name.split(".")[0]] = alias.name.split(".")[0]
        elif isinstance(node, ast.ImportFrom):
            source = _imported_from(module, is_package, node)
            if source.split(".")[0] not in first_party:
                continue
            for alias in node.names:
                submodule = f"{source}.{alias.name}"
                if submodule in known:
                    bound[alias.asname or alias.name] = submodule
                    # A package's private submodule, imported inside that package.
                    if module == source or module.startswith(source + "."):
                        continue
                if _is_private(alias.name) and source != module:
                    found.add((module, alias.name, source))
    for node in ast.walk(tree):
        if not isinstance(node, ast.Attribute):
            continue
        chain: list[str] = []
        base: ast.expr = node
        while isinstance(base, ast.Attribute):
            chain.insert(0, base.attr)
            base = base.value
        if not isinstance(base, ast.Name) or bound.get(base.id) not in known:
            continue
        current = bound[base.id]
        for attr in chain:  # a.b.c._x: follow the submodules, then look at the name
            if f"{current}.{attr}" in known:
                current = f"{current}.{attr}"
                continue
            if _is_private(attr) and current != module:
                found.add((module, attr, current))
            break
    return found


@pytest.fixture(scope="module")
def private_uses() -> set[tuple[str, str, str]]:
    modules = _rule_modules()
    known = {name for name, _ in modules}
    return {use for name, path in modules for use in _private_uses(name, path, known)}


def test_no_module_imports_another_modules_private_name(
    private_uses: set[tuple[str, str, str]],
) -> None:
    # A name with a leading underscore is its module's own business. Another module that
    # needs it makes it public (no underscore, listed in __all__, with a docstring), or the
    # code moves to the one module that uses it.
    offending = sorted(f"{module}: {name} from {source}" for module, name, source in private_uses)
    assert offending == [], "private names used by another module:\n" + "\n".join(offending)


def test_the_framework_calls_hooks_through_the_typed_facade_not_by_string_name() -> None:
    # ``host.hooks.<name>(...)`` lets mypy check the hook's name and payload; a string
    # ``host.dispatch("name", ...)`` is for hooks added at run time (the core's own API and
    # its tests, the scenario runner's steps, which name their hook in data).
    import ast
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent / "framework" / "agentplug"
    found = []
    for path in root.rglob("*.py"):
        if path.relative_to(root).parts[0] == "core":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr in ("dispatch", "call_sync", "emit")
                and node.args
                and isinstance(node.args[0], ast.Constant)
                and isinstance(node.args[0].value, str)
            ):
                found.append(f"{path.relative_to(root)}:{node.lineno}: {node.func.attr}")
    assert found == [], "call these hooks as host.hooks.<name>(...):\n" + "\n".join(found)


PUBLIC_PACKAGES = (
    "agentplug_hookspecs",
    "agentplug.actions",
    "agentplug.agent",
    "agentplug.store",
    "agentplug.testing",
    "agentplug.adapters",
)


def test_example_plugins_import_only_public_names() -> None:
    # The examples are what plugin authors copy: the front door, the contract and the
    # declared public subpackages only (docs/api.md).
    import ast
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent / "example_plugins"
    found = []
    for path in root.glob("*/src/**/*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            modules = []
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                modules = [node.module]
            elif isinstance(node, ast.Import):
                modules = [alias.name for alias in node.names]
            for module in modules:
                if not module.startswith("agentplug") or module == "agentplug":
                    continue
                if not module.startswith(PUBLIC_PACKAGES) and not module.startswith("agentplug_"):
                    found.append(f"{path.relative_to(root)}: {module}")
    assert found == [], "import these from a public place:\n" + "\n".join(found)
