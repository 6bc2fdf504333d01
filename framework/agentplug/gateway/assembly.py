"""The composition root: :class:`Gateway` builds one gateway's parts, once, typed; and
the host and plugin API it hands out (:class:`PluginHost`, :class:`PluginApi`).

Every entrance goes through a gateway: the CLI commands, ``agentplug serve``, ``agentplug
chat``, ``agentplug mcp-proxy``, the scenario runner, the pytest fixtures and the
PydanticAI / LangChain adapters. What :class:`Gateway` builds, in order:

1. the host (:class:`PluginHost`) over the operator config;
2. the state store (``$AGENTPLUG_STATE_URL`` / ``state.url``, else SQLite in the state
   folder: ``state_dir=``, ``$AGENTPLUG_STATE_DIR``, ``runtime.state_dir``; else in
   memory; :func:`~agentplug.store.location.state_location`), opened now so that an
   unreachable database stops the start with one line;
3. session services, trusted tool policies, one approval broker (shared through the
   store whenever the store is durable, so any gateway or ``agentplug approvals
   resolve`` on the same store decides it), the reply dispatcher;
4. the actions (built-ins, plugin actions, custom actions) and the plugin sources;
5. the tool-call pipeline every tool call goes through, the log of the latest turns and
   the agent runner.

``await gateway.start()`` loads the actions and fires ``gateway_start``;
``await gateway.stop()`` fires ``session_end`` for the sessions it ran and
``gateway_stop`` (bounded), then releases what it opened.

:class:`PluginHost` is the core's :class:`~agentplug.core.host.HookHost` (registration,
plans, dispatch) with what the framework adds: the full plugin API (sessions, trusted
tool policies, actions) for ``register(api)``, the exec-env outcome filter, and a typed
link to its gateway. A host built on its own (``PluginHost(config)``) gets its gateway
on first use, so that plugins asking for ``api.session`` still work. Its shortcuts
``host.store``, ``host.sessions``, ``host.actions`` and ``host.trusted_policies`` of
earlier releases still answer, with a ``DeprecationWarning``.

Importing this module stays light (a plugin test that only dispatches hooks loads the
core alone): :class:`Gateway` imports the layers it assembles when it is built.
"""

from __future__ import annotations

import logging
import warnings
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import agentplug.security.execenv  # noqa: F401  (registers the ``exec_env`` outcome filter)
from agentplug.config.model import AgentplugConfig, load_config
from agentplug.core.errors import load_error_line
from agentplug.core.host import HookApi, HookHost, PluginRecord

if TYPE_CHECKING:
    from agentplug.actions.builtins.comms.runs import TerminalRuns
    from agentplug.actions.runtime import AgentRuntime
    from agentplug.agent.providers.base import ModelProvider
    from agentplug.agent.runner import AgentRunner
    from agentplug.agent.turnlog import TurnLog
    from agentplug.plugins.manager import PluginManager
    from agentplug.services.approvals.models import AnyResolver
    from agentplug.services.cron_cluster import ClusterCron
    from agentplug.services.lifecycle import FinalizeReason, FinalizeReport
    from agentplug.services.policies import TrustedToolPolicies, TrustedToolPolicy
    from agentplug.services.replies import Channel
    from agentplug.services.sessions import SessionApi, SessionServices
    from agentplug.store import StateStore

__all__ = ["Gateway", "PluginApi", "PluginHost"]

log = logging.getLogger("agentplug.gateway")

ConfigSource = AgentplugConfig | Mapping[str, Any] | str | Path | None
"""An operator config: parsed, a mapping, a file path, or nothing (the defaults)."""


def _config(config: ConfigSource) -> AgentplugConfig:
    if isinstance(config, AgentplugConfig):
        return config
    if isinstance(config, str | Path):
        return load_config(config)
    return AgentplugConfig.parse(config)


class PluginApi(HookApi):
    """What ``register(api)`` receives: hooks, sessions, trusted tool policies, actions."""

    @property
    def gateway(self) -> Gateway:
        """The gateway this plugin runs in."""
        host = self.host
        assert isinstance(host, PluginHost)
        return host.gateway

    @property
    def session(self) -> SessionApi:
        """Session services: ``api.session.state`` and ``api.session.workflow``."""
        return self.gateway.sessions.api_for(self.record)

    @property
    def actions(self) -> AgentRuntime:
        """The gateway's actions (register services such as media providers on it)."""
        return self.gateway.actions

    def register_trusted_tool_policy(
        self, policy_id: str, evaluate: Callable[..., Any], *, description: str = ""
    ) -> TrustedToolPolicy:
        """Register a trusted tool policy (runs before ordinary ``before_tool_call``).

        Installed plugins must be explicitly enabled and declare ``policy_id`` in
        ``plugins.entries.<id>.contracts.trusted_tool_policies``.
        """
        return self.gateway.policies.register(
            self.record, policy_id, evaluate, description=description
        )

    def register_session_extension(self, *args: Any, **kwargs: Any) -> Any:
        """Deprecated alias of ``api.session.state.register_session_extension``."""
        self.warn_deprecated(
            "api.register_session_extension", "api.session.state.register_session_extension"
        )
        return self.session.state.register_session_extension(*args, **kwargs)

    def enqueue_next_turn_injection(self, *args: Any, **kwargs: Any) -> Any:
        """Deprecated alias of ``api.session.workflow.enqueue_next_turn_injection``."""
        self.warn_deprecated(
            "api.enqueue_next_turn_injection", "api.session.workflow.enqueue_next_turn_injection"
        )
        return self.session.workflow.enqueue_next_turn_injection(*args, **kwargs)


def _plugin_api(host: HookHost, record: PluginRecord) -> HookApi:
    return PluginApi(host, record)


class PluginHost(HookHost):
    """Registers plugins and dispatches hooks with agentplug's rules (HOOKS.md §2).

    ``await host.hooks.before_tool_call({"tool_name": "exec", "params": {...}})`` returns
    a :class:`~agentplug.DispatchResult` with the reduced ``outcome`` and per-handler
    ``handlers`` (``host.dispatch("name", ...)`` for hooks added at run time). The
    services live on :attr:`gateway`; ``store`` and ``state_dir`` seed it when this host
    is built on its own.
    """

    def __init__(
        self,
        config: AgentplugConfig | Mapping[str, Any] | None = None,
        *,
        builtin_hooks: bool = True,
        store: StateStore | None = None,
        state_dir: str | Path | None = None,
        gateway: Gateway | None = None,
    ) -> None:
        super().__init__(config, builtin_hooks=builtin_hooks, api_factory=_plugin_api)
        self._gateway = gateway
        self._seed = (store, state_dir)

    @property
    def gateway(self) -> Gateway:
        """The gateway holding this host's services (built on first use when none was)."""
        if self._gateway is None:
            store, state_dir = self._seed
            self._gateway = Gateway(self.config, host=self, store=store, state_dir=state_dir)
        return self._gateway

    def _moved(self, old: str, new: str) -> Gateway:
        warnings.warn(
            f"host.{old} is deprecated; use gateway.{new} (agentplug.Gateway holds the "
            "services; host.gateway is this host's)",
            DeprecationWarning,
            stacklevel=3,
        )
        return self.gateway

    @property
    def store(self) -> StateStore:
        """Deprecated: ``gateway.store``."""
        return self._moved("store", "store").store

    @property
    def sessions(self) -> SessionServices:
        """Deprecated: ``gateway.sessions``."""
        return self._moved("sessions", "sessions").sessions

    @property
    def actions(self) -> AgentRuntime:
        """Deprecated: ``gateway.actions``."""
        return self._moved("actions", "actions").actions

    @property
    def trusted_policies(self) -> TrustedToolPolicies:
        """Deprecated: ``gateway.policies``."""
        return self._moved("trusted_policies", "policies").policies

    @property
    def state_dir(self) -> Path | None:
        """Deprecated: ``gateway.state_dir``."""
        return self._moved("state_dir", "state_dir").state_dir


class Gateway:
    """One gateway: its host, state, services, actions, tool-call pipeline and runner.

    Build it with :meth:`from_config` (or the constructor, which takes an already parsed
    config); every attribute is built once and typed. ``resolver`` answers approvals
    (a terminal, the control API's programmatic resolver, a test script; none: a shared
    broker waits for a decision through the store, an unshared one blocks at once).
    ``provider`` is the model of :attr:`runner` (default: ``agent.model``).
    """

    def __init__(
        self,
        config: AgentplugConfig | Mapping[str, Any] | None = None,
        *,
        host: PluginHost | None = None,
        store: StateStore | None = None,
        state_dir: str | Path | None = None,
        resolver: AnyResolver | None = None,
        provider: ModelProvider | None = None,
        channel: Channel | None = None,
        agent: Mapping[str, Any] | None = None,
    ) -> None:
        # The layers a gateway assembles load here, not when this module is imported.
        from agentplug.actions.builtins import action_runtime
        from agentplug.agent.config import agent_config
        from agentplug.agent.pipeline import ToolCallPipeline
        from agentplug.agent.runner import AgentRunner
        from agentplug.agent.turnlog import TurnLog
        from agentplug.plugins.ejected import PluginSources
        from agentplug.services.approvals import ApprovalBroker
        from agentplug.services.lifecycle import CronService
        from agentplug.services.policies import TrustedToolPolicies
        from agentplug.services.replies import ReplyDispatcher
        from agentplug.services.sessions import SessionServices
        from agentplug.store import MemoryStore
        from agentplug.store.location import state_location

        parsed = host.config if host is not None else _config(config)
        self.config: AgentplugConfig = parsed
        """The operator config."""
        self.host: PluginHost = host if host is not None else PluginHost(parsed, gateway=self)
        """Registers plugins and dispatches hooks (``host.hooks.<name>(...)``)."""
        # The one rule every command follows too (agentplug.store.location): in code,
        # no state folder chosen means state in memory.
        self.state_location = state_location(parsed, state_dir=state_dir)
        """Where the state lives and why (``describe()`` says it in one line)."""
        self.state_dir: Path | None = self.state_location.state_dir
        """The state folder (``state_dir=``, ``$AGENTPLUG_STATE_DIR``,
        ``runtime.state_dir``; ``None``: no durable state unless a state URL names a
        database)."""
        self._owns_store = store is None
        self.store: StateStore = store if store is not None else self.state_location.open()
        """Durable state: grants, pending approvals, sessions, injections, transcripts."""
        self.sessions = SessionServices(self.host, self.store)
        """Session extensions, next-turn injections and cleanup callbacks."""
        self.policies = TrustedToolPolicies(self.host)
        """Trusted tool policies (they run before ordinary ``before_tool_call``)."""
        self.approvals = ApprovalBroker(
            resolver, store=self.store, shared=not isinstance(self.store, MemoryStore)
        )
        """The one approval broker: grants and, on a durable store, pending approvals
        that any process sharing the store can decide."""
        agent_settings = agent_config(agent if agent is not None else parsed.agent)
        self.replies = ReplyDispatcher(
            self.host, default_timeout_ms=agent_settings.deliver_timeout_ms
        )
        """Outbound delivery: ``message_sending``, ``reply_payload_sending``, stages."""
        self.actions: AgentRuntime = action_runtime(self.host, self.store, self.state_dir)
        """Built-in, plugin and custom actions (``await gateway.start()`` loads them)."""
        self.plugin_sources = PluginSources(self.host)
        """Where plugin code is found besides the environment (install target, ejected
        copies)."""
        self.cron = CronService(self.host)
        """The cron hooks' scheduler snapshots."""
        self.tool_calls = ToolCallPipeline.build(
            self.host, self.policies, self.approvals, limits=agent_settings.limits
        )
        """The one tool-call path (validate, policies, hooks, approvals, run, persist)."""
        self.turns: TurnLog = TurnLog()
        """The latest turns of every runner of this gateway, with their traces (what the
        control room's timeline shows)."""
        self.runner = AgentRunner(self, provider, config=agent_settings, channel=channel)
        """The agent runner (``agent`` settings of the config)."""
        self._runners: list[AgentRunner] = [self.runner]
        self._plugin_manager: PluginManager | None = None
        self._started = False

    @classmethod
    def from_config(
        cls,
        config: ConfigSource = None,
        *,
        load_plugins: bool = False,
        plugins: Iterable[object] = (),
        **parts: Any,
    ) -> Gateway:
        """Build a gateway from an operator config (parsed, a mapping or a file path).

        ``load_plugins`` discovers and registers the installed plugins (entry-point group
        ``agentplug``; failures land in ``host.load_errors``); ``plugins`` registers
        objects as bundled plugins first. ``parts`` go to the constructor (``store``,
        ``state_dir``, ``resolver``, ``provider``, ``channel``, ``agent``).
        """
        gateway = cls(_config(config), **parts)
        for plugin in plugins:
            gateway.host.register(plugin)
        if load_plugins:
            gateway.load_plugins()
        return gateway

    # -- parts built on demand ---------------------------------------------------------------

    def load_plugins(self) -> list[PluginRecord]:
        """Discover and register the installed plugins (ejected copies first)."""
        return self.host.load_installed(before_import=self.plugin_sources.prepare())

    @property
    def plugin_manager(self) -> PluginManager:
        """Install, eject, sync and reinject plugins (rooted at the state directory)."""
        if self._plugin_manager is None:
            from agentplug.actions.builtins.plugins import get_plugin_manager

            # The same manager the plugin built-ins (INSTALL_PLUGIN, ...) use.
            self._plugin_manager = get_plugin_manager(self.actions)
        return self._plugin_manager

    @property
    def terminal(self) -> TerminalRuns:
        """Every shell command the gateway runs (``SHELL_COMMAND``, custom shell actions,
        the control API), under ``actions.shell``."""
        from agentplug.actions.builtins.comms.runs import terminal_runs

        return terminal_runs(self.actions, default_cwd=self.state_dir)

    def cluster_cron(self, **options: Any) -> ClusterCron:
        """A :class:`~agentplug.services.cron_cluster.ClusterCron` on this gateway's store
        and cron hooks (``node_id``, ``lease_ms``, ``poll_ms``, ``name``)."""
        from agentplug.services.cron_cluster import ClusterCron

        return ClusterCron(self.host, store=self.store, cron=self.cron, **options)

    def runner_for(self, provider: ModelProvider | None = None, **options: Any) -> AgentRunner:
        """Another runner on this gateway's parts (its own provider, tools or ``config``);
        :meth:`stop` ends its sessions too."""
        from agentplug.agent.runner import AgentRunner

        runner = AgentRunner(self, provider, **options)
        self._runners.append(runner)
        return runner

    # -- lifecycle -----------------------------------------------------------------------------

    async def start(self, reason: str = "startup", *, host_name: str = "agentplug") -> list[str]:
        """Load the actions and fire ``gateway_start``; return the problems found (plugin
        load errors, action clashes, malformed custom actions), one readable line each."""
        problems = [load_error_line(error) for error in self.host.load_errors]
        problems += await self.actions.load(reason)
        await self.host.hooks.gateway_start({"reason": reason}, {"host": host_name})
        self._started = True
        return problems

    def active_sessions(self) -> list[str]:
        """The session keys this gateway's runners ran turns for."""
        seen: dict[str, None] = {}
        for runner in self._runners:
            seen.update(dict.fromkeys(runner.sessions_seen))
        return list(seen)

    async def stop(self, reason: FinalizeReason = "shutdown") -> FinalizeReport:
        """``session_end`` for the sessions it ran, then ``gateway_stop`` (bounded by
        ``runtime.shutdown_timeout_ms``); then disconnects MCP servers, waits (bounded) for
        abandoned handlers and closes the store it opened."""
        from agentplug.services.lifecycle import ShutdownFinalizer

        for runner in self._runners:  # background sub-agents end before their sessions do
            await runner.subagents.aclose()
        finalizer = ShutdownFinalizer(
            self.host, self.active_sessions, cron=self.cron, sessions=self.sessions
        )
        report = await finalizer.finalize(reason)
        await self.aclose()
        return report

    async def aclose(self, timeout_s: float | None = None) -> None:
        """Release what the gateway opened (no hooks): MCP connections, abandoned handlers,
        the store."""
        for runner in self._runners:
            try:
                await runner.aclose()
            except Exception as exc:  # one broken MCP server must not keep the others open
                log.warning("closing the runner's MCP servers failed: %s", exc)
        await self.host.aclose(timeout_s)
        if self._owns_store:
            self.store.close()

    async def __aenter__(self) -> Gateway:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()
