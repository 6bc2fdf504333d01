"""``agentplug new plugin NAME``: a plugin package from the template shipped in the wheel.

The new folder holds a package with the entry point (group ``agentplug``), one typed
handler for the chosen hook, a README, a scenario file, pytest tests using agentplug's
fixtures, ``py.typed`` and a Makefile whose ``make check`` runs the tests and
``mypy --strict``. The templates are package data (``agentplug/templates``); see
``templates/README.md`` for how they are filled in.
"""

from __future__ import annotations

import argparse
import json
import keyword
import pprint
import re
import sys
import types
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import Path
from string import Template
from typing import Any, Literal, Union, get_args, get_origin

from agentplug_hookspecs import HookDecl, HookModel
from pydantic import BaseModel, ValidationError

from agentplug.cli.common import EXIT_OK, EXIT_USAGE, error_line
from agentplug.config.suggest import did_you_mean

__all__ = ["PluginSpec", "add_new_command", "plugin_files", "sample_event", "write_plugin"]

DEFAULT_HOOK = "before_tool_call"
_NAME = re.compile(r"[a-z][a-z0-9]*(?:[-_][a-z0-9]+)*")
# Import names a plugin package must not take: they would shadow agentplug itself.
_RESERVED = frozenset({"agentplug", "agentplug_hookspecs", "tests", "test"})


class NewPluginError(ValueError):
    """A name, hook or target folder ``agentplug new plugin`` refuses (one line, the fix)."""


@dataclass(frozen=True)
class PluginSpec:
    """What the template is filled with."""

    name: str
    """The folder, the distribution name and the plugin id (entry-point name)."""
    hook: str
    """The hook the handler implements."""

    @property
    def package(self) -> str:
        """The import name: the name with ``-`` as ``_``."""
        return self.name.replace("-", "_")


def _declarations() -> Mapping[str, HookDecl]:
    from agentplug_hookspecs import builtin_declarations

    return builtin_declarations()


def check_spec(spec: PluginSpec) -> HookDecl:
    """The hook's declaration, or :class:`NewPluginError` naming what is wrong."""
    if not _NAME.fullmatch(spec.name):
        raise NewPluginError(
            f"plugin name {spec.name!r} is not a valid package name; use lowercase letters, "
            "digits and single '-' or '_' between them, starting with a letter (e.g. my-guard)"
        )
    package = spec.package
    if keyword.iskeyword(package) or package in _RESERVED or package in sys.stdlib_module_names:
        raise NewPluginError(
            f"plugin name {spec.name!r} would be imported as {package!r}, which shadows "
            "a module of Python or agentplug; choose another name"
        )
    decls = _declarations()
    decl = decls.get(spec.hook)
    if decl is None:
        hint = did_you_mean(spec.hook, sorted(decls), otherwise=" (see `agentplug hooks`)")
        raise NewPluginError(f"unknown hook {spec.hook!r}{hint}")
    if decl.deprecation is not None:
        raise NewPluginError(
            f"hook {spec.hook!r} is deprecated; use {decl.deprecation.replacement} instead"
        )
    return decl


# -- sample events -----------------------------------------------------------------------


def _sample_value(annotation: Any, depth: int = 0) -> Any:
    """A small value of ``annotation`` (``None`` where none can be made)."""
    origin, args = get_origin(annotation), get_args(annotation)
    if origin is Union or origin is types.UnionType:
        real = [a for a in args if a is not type(None)]
        return _sample_value(real[0], depth) if real and type(None) not in args else None
    if origin is Literal:
        return args[0]
    if annotation is str:
        return "example"
    if annotation is bool:
        return False
    if annotation in (int, float):
        return annotation(1)
    if origin in (list, tuple, set, frozenset) or annotation in (list, tuple):
        return []
    if origin is dict or annotation is dict:
        return {}
    if isinstance(annotation, type) and issubclass(annotation, BaseModel) and depth < 4:
        return _required_fields(annotation, depth + 1)
    return None


def _required_fields(model: type[BaseModel], depth: int = 0) -> dict[str, Any]:
    return {
        name: _sample_value(info.annotation, depth)
        for name, info in model.model_fields.items()
        if info.is_required()
    }


def sample_event(decl: HookDecl) -> dict[str, Any] | None:
    """The smallest event of ``decl`` built from its required fields (validated), or
    ``None`` when no valid one can be made without knowing the host."""
    data = _required_fields(decl.event)
    try:
        decl.event.model_validate(data)
    except ValidationError:
        return None
    return data


# -- rendering ---------------------------------------------------------------------------


def _templates() -> Traversable:
    return resources.files("agentplug").joinpath("templates")


def _snippet(name: str, values: Mapping[str, str]) -> str:
    text = _templates().joinpath("snippets", name).read_text(encoding="utf-8")
    return Template(text).substitute(values)


def _import_lines(models: list[type[HookModel]]) -> list[str]:
    by_module: dict[str, set[str]] = {}
    for model in models:
        by_module.setdefault(model.__module__, set()).add(model.__name__)
    return [
        f"from {module} import {', '.join(sorted(names))}"
        for module, names in sorted(by_module.items())
    ]


def _range(version: str) -> str:
    """A compatible range of ``version`` under semantic versioning (a 0.x minor may break)."""
    major, minor = (int(part) for part in version.split(".")[:2])
    if major == 0:
        return f">=0.{minor},<0.{minor + 1}"
    return f">={major}.{minor},<{major + 1}"


def _values(spec: PluginSpec, decl: HookDecl) -> dict[str, str]:
    import agentplug_hookspecs

    from agentplug import __version__

    summary = decl.doc.splitlines()[0].strip() if decl.doc else decl.name
    models: list[type[HookModel]] = [decl.event, decl.ctx]
    if decl.result is not None:
        models.append(decl.result)
    values = {
        "name": spec.name,
        "distribution": spec.name,
        "plugin_id": spec.name,
        "package": spec.package,
        "hook": decl.name,
        "hook_summary": summary,
        "hookspecs_range": _range(agentplug_hookspecs.__version__),
        "agentplug_range": _range(__version__),
        "gate_note": "",
    }
    if decl.conversation_gate:
        values["gate_note"] = (
            f"\n\n`{decl.name}` sees the conversation: an installed plugin may use it only "
            f"when the operator sets `plugins.entries.{spec.name}.hooks."
            "allow_conversation_access = true` (the scenario file does)."
        )
    imports = ["from agentplug_hookspecs import hookimpl", *_import_lines(models)]
    if decl.name == DEFAULT_HOOK:
        handler = _snippet("handler_before_tool_call.tmpl", values)
        hook_tests = _snippet("tests_before_tool_call.tmpl", values)
        test_imports = "import pytest"
    else:
        returns = "None" if decl.result is None else f"{decl.result.__name__} | None"
        body = (
            "return None  # observation hook: results are ignored"
            if decl.result is None
            else f"return None  # or a {decl.result.__name__}: see the hook reference"
        )
        handler = _snippet(
            "handler_generic.tmpl",
            {
                **values,
                "event": decl.event.__name__,
                "ctx": decl.ctx.__name__,
                "returns": returns,
                "summary": summary.replace('"""', "'''"),
                "body": body,
            },
        )
        sample = sample_event(decl) or {}
        hook_tests = _snippet(
            "tests_generic.tmpl", {**values, "sample_event": pprint.pformat(sample, width=80)}
        )
        test_imports = "from typing import Any\n"
    return {
        **values,
        "imports": "\n".join(imports),
        "handler": handler.rstrip("\n"),
        "hook_tests": hook_tests.rstrip("\n"),
        "test_imports": test_imports,
    }


def _scenario(spec: PluginSpec, decl: HookDecl) -> dict[str, Any]:
    entry: dict[str, Any] = {}
    if decl.conversation_gate:
        entry["hooks"] = {"allow_conversation_access": True}
    scenario: dict[str, Any] = {
        "description": f"{spec.name}: its {decl.name} handler, through the installed plugin",
        "config": {"plugins": {"entries": {spec.name: entry}}} if entry else {},
        "plugins": [spec.name],
    }
    if decl.name == DEFAULT_HOOK:
        scenario["steps"] = [
            {
                "name": "exec is blocked",
                "hook": "before_tool_call",
                "event": {"tool_name": "exec", "params": {"command": "ls"}},
                "expect": {"blocked": True, "blocked_by": spec.name},
                "expect_handlers": {spec.name: "ok"},
            },
            {
                "name": "other tools run",
                "hook": "before_tool_call",
                "event": {"tool_name": "web_search", "params": {"query": "agentplug"}},
                "expect": {"blocked": False},
                "expect_handlers": {spec.name: "ok"},
            },
        ]
    else:
        scenario["steps"] = [
            {
                "name": f"{decl.name} runs the handler",
                "hook": decl.name,
                "event": sample_event(decl) or {},
                "expect_handlers": {spec.name: "ok"},
            }
        ]
    return scenario


def _walk(
    folder: Traversable, prefix: tuple[str, ...] = ()
) -> Iterator[tuple[tuple[str, ...], str]]:
    for item in sorted(folder.iterdir(), key=lambda t: t.name):
        if item.is_dir():
            yield from _walk(item, (*prefix, item.name))
        elif item.name != "__pycache__":
            yield (*prefix, item.name), item.read_text(encoding="utf-8")


def plugin_files(spec: PluginSpec) -> dict[str, str]:
    """Every file of the new plugin, by path relative to its folder (``/``-separated)."""
    decl = check_spec(spec)
    values = _values(spec, decl)
    files: dict[str, str] = {}
    for parts, text in _walk(_templates().joinpath("plugin")):
        names = [spec.package if part == "PACKAGE" else part for part in parts]
        last = names[-1].removesuffix(".tmpl")
        names[-1] = ".gitignore" if last == "gitignore" else last
        names[-1] = names[-1].replace("PACKAGE", spec.package)
        rendered = Template(text).substitute(values) if parts[-1].endswith(".tmpl") else text
        files["/".join(names)] = rendered
    scenario = json.dumps(_scenario(spec, decl), indent=2) + "\n"
    files[f"tests/scenario_{spec.package}.json"] = scenario
    return files


def write_plugin(spec: PluginSpec, parent: Path) -> Path:
    """Write the plugin into ``parent / spec.name`` (which must not exist or be empty)."""
    files = plugin_files(spec)
    target = parent / spec.name
    if target.exists() and (not target.is_dir() or any(target.iterdir())):
        raise NewPluginError(f"{target} already exists and is not empty; choose another name")
    for relative, text in files.items():
        path = target.joinpath(*relative.split("/"))
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return target


def cmd_new_plugin(args: argparse.Namespace) -> int:
    """Create the plugin folder and say what to run next."""
    spec = PluginSpec(name=args.name, hook=args.hook)
    try:
        target = write_plugin(spec, Path(args.directory))
    except NewPluginError as exc:
        error_line(args, str(exc))
        return EXIT_USAGE
    print(f"created {target}/ (plugin {spec.name!r}, handler {spec.hook!r})")
    print(f"next: cd {target} && pip install -e '.[test]' && make check")
    return EXIT_OK


def add_new_command(sub: Any) -> None:
    """``new plugin``."""
    p = sub.add_parser("new", help="create a new plugin package from the template")
    nsub = p.add_subparsers(dest="new_command", required=True)
    n = nsub.add_parser(
        "plugin",
        help="create ./NAME: a typed plugin package with tests, a scenario and py.typed",
        description="Create the folder NAME (in --directory, default the current one): a "
        "pip-installable plugin package with the entry point NAME (group agentplug), one "
        "typed handler for --hook, a README, a scenario file, pytest tests using "
        "agentplug's fixtures, py.typed and a Makefile whose `make check` runs pytest "
        "and mypy --strict.",
        epilog="exit status: 0 created, 2 bad name, unknown hook or existing folder",
    )
    n.add_argument("name", metavar="NAME", help="folder, distribution and plugin id (my-guard)")
    n.add_argument(
        "--hook",
        default=DEFAULT_HOOK,
        metavar="HOOK",
        help=f"the hook the handler implements (default {DEFAULT_HOOK}; see `agentplug hooks`)",
    )
    n.add_argument(
        "--directory", default=".", metavar="DIR", help="where to create NAME (default: .)"
    )
    n.set_defaults(func=cmd_new_plugin)
