"""Scenario files: replay hook calls through real plugins (``agentplug run``).

```json
{"description": "...",
 "config": {"plugins": {"entries": {...}}},
 "plugins": ["tool-preflight", "module:my_pkg.plugin", {"id": "x", "module": "pkg.mod:obj"}],
 "approvals": {"web_search": "allow-once"} | ["deny", ...] | {"default": "deny"},
 "steps": [{"hook": "before_tool_call", "event": {...}, "ctx": {...}}]}
```
Entry-point names load installed plugins; ``module:`` paths import local plugins
(registered as bundled: the host loads them itself).
"""

from __future__ import annotations

import importlib
import json
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError
from pydantic.alias_generators import to_camel

from .approvals import ApprovalBroker, ScriptedResolver
from .config import AgentplugConfig
from .errors import ConfigError, PluginLoadError
from .host import PluginHost
from .loader import ENTRY_POINT_GROUP, discover

__all__ = ["Scenario", "ScenarioStep", "StepReport", "load_scenario", "run_scenario"]


class _Model(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="forbid")


class PluginRef(_Model):
    """A plugin to load: an entry-point name, or a module path with an optional id."""

    id: str | None = None
    entry_point: str | None = None
    module: str | None = None
    bundled: bool | None = None


class ScenarioStep(_Model):
    """One hook call."""

    hook: str
    event: dict[str, Any] = Field(default_factory=dict)
    ctx: dict[str, Any] = Field(default_factory=dict)
    expect: dict[str, Any] | None = None
    """Expected outcome fields (checked by the pytest scenario collector)."""
    expect_handlers: dict[str, str] | None = None
    """Expected status per plugin id (``{"tool-preflight": "ok"}``)."""
    expect_approval: dict[str, Any] | None = None
    """Expected approval verdict fields (``{"allowed": true}``)."""
    name: str | None = None


class Scenario(_Model):
    """A replayable scenario."""

    description: str = ""
    config: dict[str, Any] = Field(default_factory=dict)
    plugins: list[str | PluginRef] = Field(default_factory=list)
    approvals: dict[str, Any] | list[str] | None = None
    steps: list[ScenarioStep] = Field(default_factory=list)


class StepReport(BaseModel):
    """What one step decided (``--json`` prints one per line)."""

    hook: str
    outcome: dict[str, Any]
    handlers: list[dict[str, Any]]
    approval: dict[str, Any] | None = None


def load_scenario(path: str | Path) -> Scenario:
    """Read and validate a scenario file; errors name the key."""
    p = Path(path)
    try:
        return Scenario.model_validate(json.loads(p.read_text(encoding="utf-8")))
    except FileNotFoundError:
        raise ConfigError([("<file>", f"{p} does not exist")], str(p)) from None
    except json.JSONDecodeError as exc:
        raise ConfigError([("<file>", f"invalid JSON: {exc}")], str(p)) from None
    except ValidationError as exc:
        issues = [(".".join(str(x) for x in e["loc"]) or "<root>", e["msg"]) for e in exc.errors()]
        raise ConfigError(issues, str(p)) from None


def _import(path: str) -> object:
    module_name, _, attr = path.partition(":")
    module = importlib.import_module(module_name)
    return getattr(module, attr) if attr else module


def build_host(scenario: Scenario, *, use_cache: bool = True) -> PluginHost:
    """A host with the scenario's config and plugins (failures raise, naming the plugin)."""
    host = PluginHost(AgentplugConfig.parse(scenario.config, "scenario config"))
    installed = {p.name: p for p in discover(ENTRY_POINT_GROUP, use_cache=use_cache)}
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
    return host


def _opaque(value: Any) -> Any:
    # Objects without a JSON form (e.g. Action instances in provide_actions outcomes):
    # show their name when they have one.
    name = getattr(value, "name", None)
    return {"name": name} if isinstance(name, str) else repr(value)


def _resolver(approvals: dict[str, Any] | list[str] | None) -> ScriptedResolver | None:
    if approvals is None:
        return None
    if isinstance(approvals, list):
        return ScriptedResolver(approvals)  # type: ignore[arg-type]
    default = approvals.get("default")
    per_tool = {k: v for k, v in approvals.items() if k != "default"}
    return ScriptedResolver(per_tool, default=default)


async def run_scenario(scenario: Scenario, host: PluginHost | None = None) -> list[StepReport]:
    """Replay every step; approvals are resolved with the scripted decisions."""
    host = host or build_host(scenario)
    host.timings = True
    broker = ApprovalBroker(_resolver(scenario.approvals))
    reports: list[StepReport] = []
    try:
        for step in scenario.steps:
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
