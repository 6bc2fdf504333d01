"""Scenario files: replay hook calls through real plugins (``agentplug run``).

```json
{"description": "...",
 "config": {"plugins": {"entries": {...}}},
 "plugins": ["tool-preflight", "module:my_pkg.plugin", {"id": "x", "module": "pkg.mod:obj"}],
 "approvals": {"web_search": "allow-once"} | ["deny", ...] | {"default": "deny"},
 "steps": [{"hook": "before_tool_call", "event": {...}, "ctx": {...},
            "expect": {...}, "expect_handlers": {...}, "expect_approval": {...}}]}
```
A scenario may also script whole conversations (``conversation``, ``tools``, ``agent``:
see :mod:`agentplug.testing.conversation_model`): each turn runs through the real
:class:`~agentplug.agent.AgentRunner` with the scripted model provider.

Entry-point names load installed plugins; ``module:`` paths import local plugins
(registered as bundled: the host loads them itself). While they are imported, the
directory of the scenario file is put first on ``sys.path`` (and removed afterwards, like
pytest's rootdir handling), so a plugin module next to the scenario file imports without
``PYTHONPATH``. Modules already imported (``sys.modules``) are reused as they are.

The ``expect*`` keys of a step are checked by :mod:`agentplug.testing.scenario_check` (used by
``agentplug run`` and the pytest scenario items).
"""

from __future__ import annotations

import importlib
import json
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Annotated, Any

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PrivateAttr,
    ValidationError,
)
from pydantic.alias_generators import to_camel
from pydantic_core import PydanticCustomError

from agentplug.config.datafiles import DataFileError, read_data_file
from agentplug.config.model import AgentplugConfig
from agentplug.core.errors import AgentplugError, PluginLoadError, printable
from agentplug.core.loader import ENTRY_POINT_GROUP, DiscoveredPlugin, discover
from agentplug.gateway import Gateway, PluginHost
from agentplug.services.approvals import (
    ApprovalResolver,
    ScriptedResolver,
    TerminalResolver,
)
from agentplug.store import MemoryStore
from agentplug.testing.conversation_model import ConversationTurn, ScenarioTool

__all__ = [
    "HandlerExpectation",
    "Scenario",
    "ScenarioError",
    "ScenarioFileError",
    "ScenarioStep",
    "StepReport",
    "build_host",
    "load_scenario",
    "parse_scenario",
    "run_scenario",
    "scripted_resolver",
    "step_label",
]


class ScenarioError(AgentplugError):
    """A scenario is invalid or cannot run. ``issues`` lists ``(where, problem)`` pairs."""

    def __init__(
        self,
        issues: list[tuple[str, str]],
        source: str | None = None,
        *,
        headline: str | None = None,
    ) -> None:
        self.issues = issues
        self.source = source
        where = f" in {printable(source)}" if source else ""
        lines = [headline or f"invalid scenario{where}:"]
        lines += [f"  {printable(key)}: {printable(problem)}" for key, problem in issues]
        super().__init__("\n".join(lines))


class _Model(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="forbid")


class PluginRef(_Model):
    """A plugin to load: an entry-point name, or a module path with an optional id."""

    id: str | None = None
    entry_point: str | None = None
    module: str | None = None
    bundled: bool | None = None


_HANDLER_FORMS = (
    'a status ("ok"), a list of statuses or report patterns, a report pattern '
    '({"status": "error", "error": "..."}) or null'
)


def _check_handler_expectation(value: Any) -> Any:
    one = (str, dict)
    if value is None or isinstance(value, one):
        return value
    if isinstance(value, list) and all(isinstance(v, one) for v in value):
        return value
    raise PydanticCustomError(
        "expect_handlers",
        "expected {forms}, got {got}",
        {"forms": _HANDLER_FORMS, "got": json.dumps(value, default=repr)},
    )


HandlerExpectation = Annotated[
    str | dict[str, Any] | list[str | dict[str, Any]] | None,
    BeforeValidator(_check_handler_expectation),
]
"""What ``expect_handlers`` may say about one plugin."""


class ScenarioStep(_Model):
    """One hook call, with optional expectations (see :mod:`agentplug.testing.scenario_check`)."""

    hook: str
    event: dict[str, Any] = Field(default_factory=dict)
    ctx: dict[str, Any] = Field(default_factory=dict)
    expect: dict[str, Any] | None = None
    """Expected outcome fields (subset match on ``outcome.model_dump(mode="json")``)."""
    expect_handlers: dict[str, HandlerExpectation] | None = None
    """Expected handler reports per plugin id: ``"ok"``, ``["ok", "skipped"]``,
    ``{"status": "error", "error": "..."}`` or ``null`` (the plugin did not run)."""
    expect_approval: dict[str, Any] | None = None
    """Expected approval verdict fields (``{"allowed": true}``); ``null``: no approval may
    be requested; absent: not checked."""
    name: str | None = None


class Scenario(_Model):
    """A replayable scenario."""

    description: str = ""
    config: dict[str, Any] = Field(default_factory=dict)
    plugins: list[str | PluginRef] = Field(default_factory=list)
    approvals: dict[str, Any] | list[str] | None = None
    steps: list[ScenarioStep] = Field(default_factory=list)
    agent: dict[str, Any] = Field(default_factory=dict)
    """Runner settings of the conversation (merged over ``config.agent``)."""
    tools: list[ScenarioTool] = Field(default_factory=list)
    """Scripted tools offered to the model (besides the actions)."""
    conversation: list[ConversationTurn] = Field(default_factory=list)
    """Whole turns through the agent runner (after the ``steps``, if any)."""
    _path: Path | None = PrivateAttr(default=None)

    @property
    def path(self) -> Path | None:
        """The file the scenario was read from (``None`` when built in memory)."""
        return self._path

    @property
    def base_dir(self) -> Path | None:
        """The directory ``module:`` plugins are imported from (the file's directory)."""
        return self._path.parent if self._path is not None else None


def step_label(index: int, name: str | None) -> str:
    """``step 2 "name" (steps[1])``: steps are numbered from 1, with their index."""
    if name:
        return f"step {index + 1} {json.dumps(name)} (steps[{index}])"
    return f"step {index + 1} (steps[{index}])"


class StepReport(BaseModel):
    """What one step decided (``--json`` prints one per line)."""

    hook: str
    outcome: dict[str, Any]
    handlers: list[dict[str, Any]]
    approval: dict[str, Any] | None = None


def _step_context(data: Any, loc: tuple[int | str, ...]) -> str:
    """`` (step 2 "name", hook before_tool_call)`` for an error inside ``steps[i]``."""
    if len(loc) < 2 or loc[0] != "steps" or not isinstance(loc[1], int):
        return ""
    index = loc[1]
    steps = data.get("steps") if isinstance(data, dict) else None
    raw = steps[index] if isinstance(steps, list) and index < len(steps) else None
    parts = [f"step {index + 1}"]
    if isinstance(raw, dict):
        if isinstance(raw.get("name"), str) and raw["name"]:
            parts[0] += f" {json.dumps(raw['name'])}"
        if isinstance(raw.get("hook"), str):
            parts.append(f"hook {raw['hook']}")
    return f" ({', '.join(parts)})"


def parse_scenario(data: Any, source: str | Path | None = None) -> Scenario:
    """Validate scenario data (a parsed JSON object); errors name the key and the step."""
    where = str(source) if source is not None else None
    if not isinstance(data, dict):
        raise ScenarioError([("<root>", "a scenario must be a JSON object")], where)
    try:
        scenario = Scenario.model_validate(data)
    except ValidationError as exc:
        issues = [
            (
                ".".join(str(x) for x in e["loc"]) or "<root>",
                e["msg"] + _step_context(data, e["loc"]),
            )
            for e in exc.errors()
        ]
        raise ScenarioError(issues, where) from None
    if source is not None:
        scenario._path = Path(source).resolve()
    return scenario


class ScenarioFileError(ScenarioError):
    """The scenario file itself cannot be read (a directory, not UTF-8/UTF-16, nested too
    deeply, a number too long, too large): one line naming the file."""

    def __init__(self, error: DataFileError) -> None:
        super().__init__([], error.source, headline=f"invalid scenario in {error}")
        self.issues = [("<file>", error.problem)]


def load_scenario(path: str | Path) -> Scenario:
    """Read and validate a scenario file; errors name the key (and the step).

    A file that cannot be read as JSON at all raises :class:`ScenarioError` with the
    ``<file>`` issue (a syntax error, a missing file) or :class:`ScenarioFileError`.
    """
    p = Path(path)
    try:
        data = read_data_file(p)
    except DataFileError as exc:
        if exc.line is not None or not p.exists():  # the established two-line form
            raise ScenarioError([("<file>", exc.problem)], str(p)) from None
        raise ScenarioFileError(exc) from None
    return parse_scenario(data, p)


def _import(path: str) -> object:
    module_name, _, attr = path.partition(":")
    obj: object = importlib.import_module(module_name)
    for part in filter(None, attr.split(".")):
        obj = getattr(obj, part)
    return obj


@contextmanager
def _on_sys_path(directory: Path | None) -> Iterator[None]:
    """Put ``directory`` first on ``sys.path`` for the duration (unless already there)."""
    entry = str(directory) if directory is not None else None
    if entry is None or entry in sys.path:
        yield
        return
    sys.path.insert(0, entry)
    importlib.invalidate_caches()
    try:
        yield
    finally:
        with suppress(ValueError):  # somebody removed it already
            sys.path.remove(entry)


def build_host(
    scenario: Scenario, *, use_cache: bool = True, base_dir: str | Path | None = None
) -> PluginHost:
    """The host of a gateway with the scenario's config and plugins (state in memory);
    failures raise, naming the plugin.

    ``module:`` plugins are imported with ``base_dir`` (default: the directory of the
    scenario file, :attr:`Scenario.base_dir`) first on ``sys.path``; the entry is removed
    again once the plugins are loaded.
    """
    config = AgentplugConfig.parse(scenario.config, "scenario config")
    host = Gateway(config, store=MemoryStore()).host
    installed = {p.name: p for p in discover(ENTRY_POINT_GROUP, use_cache=use_cache)}
    directory = Path(base_dir).resolve() if base_dir is not None else scenario.base_dir
    with _on_sys_path(directory):
        _load_plugins(host, scenario, installed)
    return host


def _load_plugins(
    host: PluginHost, scenario: Scenario, installed: dict[str, DiscoveredPlugin]
) -> None:
    for raw in scenario.plugins:
        ref = (
            PluginRef(module=raw[len("module:") :])
            if isinstance(raw, str) and raw.startswith("module:")
            else (PluginRef(entry_point=raw) if isinstance(raw, str) else raw)
        )
        if ref.module:
            fallback_id = ref.id or ref.module.split(":")[0].rsplit(".", 1)[-1]
            try:
                obj = _import(ref.module)
            except Exception as exc:
                raise PluginLoadError(
                    fallback_id, f"cannot import {ref.module!r}: {exc!r}"
                ) from exc
            # The same id rule as PluginHost.register: an explicit id, else the plugin's
            # own ``plugin_id``/``PLUGIN_ID``, else the module name.
            own = getattr(obj, "plugin_id", None) or getattr(obj, "PLUGIN_ID", None)
            pid = ref.id or (own if isinstance(own, str) and own else fallback_id)
            host.register(
                obj, pid, bundled=True if ref.bundled is None else ref.bundled, source=ref.module
            )
            continue
        name = ref.entry_point or ref.id or ""
        found = installed.get(name)
        if found is None:
            known = ", ".join(sorted(installed)) or "none"
            raise PluginLoadError(
                name,
                f"no installed plugin with entry point {name!r} in group 'agentplug' "
                f"(installed: {known}); pip install it or use 'module:package.module'",
            )
        try:
            obj = found.load()
        except Exception as exc:
            raise PluginLoadError(name, f"import failed: {exc!r}") from exc
        host.register(
            obj,
            ref.id or name,
            bundled=bool(ref.bundled),
            distribution=found.distribution,
            version=found.version,
            source=found.value,
        )


def _opaque(value: Any) -> Any:
    # Objects without a JSON form (e.g. Action instances in provide_actions outcomes):
    # show their name when they have one.
    name = getattr(value, "name", None)
    return {"name": name} if isinstance(name, str) else repr(value)


def scripted_resolver(approvals: dict[str, Any] | list[str] | None) -> ScriptedResolver | None:
    """The resolver answering a scenario's ``approvals`` (``None``: none scripted)."""
    if approvals is None:
        return None
    if isinstance(approvals, list):
        return ScriptedResolver(approvals)  # type: ignore[arg-type]
    default = approvals.get("default")
    per_tool = {k: v for k, v in approvals.items() if k != "default"}
    return ScriptedResolver(per_tool, default=default)


async def run_scenario(
    scenario: Scenario,
    host: PluginHost | None = None,
    *,
    on_step: Callable[[int], None] | None = None,
    interactive: bool = False,
) -> list[StepReport]:
    """Replay every step; approvals are resolved with the scripted decisions.

    Without scripted decisions, ``interactive=True`` asks a person on the terminal
    (``agentplug run`` sets it when stdin is a terminal); otherwise an approval request
    finds no resolver and blocks. ``on_step(index)`` is called before each step runs
    (to name the step of a crash).
    """
    host = host or build_host(scenario)
    host.timings = True
    resolver: ApprovalResolver | None = scripted_resolver(scenario.approvals)
    if resolver is None and interactive:
        resolver = TerminalResolver()
    broker = host.gateway.approvals
    broker.use_resolver(resolver)
    reports: list[StepReport] = []
    try:
        for index, step in enumerate(scenario.steps):
            if on_step is not None:
                on_step(index)
            result = await host.dispatch(step.hook, step.event, step.ctx)
            approval = None
            outcome = result.outcome
            if step.hook == "before_tool_call" and getattr(outcome, "approval", None) is not None:
                verdict = await broker.decide(
                    str(step.event.get("tool_name") or step.event.get("toolName") or ""), outcome
                )
                approval = {
                    "allowed": verdict.allowed,
                    "resolution": verdict.resolution,
                    "reason": verdict.reason,
                }
            reports.append(
                StepReport(
                    hook=result.hook,
                    outcome=outcome.model_dump(mode="json", exclude_none=True, fallback=_opaque),
                    handlers=[h.model_dump(mode="json") for h in result.handlers],
                    approval=approval,
                )
            )
    finally:
        await host.aclose(1.0)
    return reports
