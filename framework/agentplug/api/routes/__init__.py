"""The control API's route handlers, one module per resource.

Each module holds a mixin of :class:`~agentplug.api.app.ControlApi` (which composes them):
:mod:`~agentplug.api.routes.terminal` (terminal runs and their stream, and
:class:`~agentplug.api.routes.terminal.HostTerminal`), :mod:`~agentplug.api.routes.plugins`
(plugin install), :mod:`~agentplug.api.routes.custom_actions` (custom-action CRUD and test)
and :mod:`~agentplug.api.routes.approvals` (pending approvals and standing grants);
:mod:`~agentplug.api.routes.base` holds the state and helpers they share.
"""
