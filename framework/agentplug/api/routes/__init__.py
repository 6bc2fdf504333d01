"""The control API's route handlers, one module per resource.

Each module holds a mixin of :class:`~agentplug.api.app.ControlApi` (which composes them):
:mod:`~agentplug.api.routes.terminal` (terminal runs and their stream, and
:class:`~agentplug.api.routes.terminal.HostTerminal`), :mod:`~agentplug.api.routes.plugins`
(loaded plugins, the hook catalogue, plugin install),
:mod:`~agentplug.api.routes.custom_actions` (custom-action CRUD and test),
:mod:`~agentplug.api.routes.approvals` (pending and settled approvals, standing grants),
:mod:`~agentplug.api.routes.sessions` (session rows, transcripts, reset, the extension
patch, a turn), :mod:`~agentplug.api.routes.chat` (a turn as server-sent events) and
:mod:`~agentplug.api.routes.turns` (the latest turns with their traces);
:mod:`~agentplug.api.routes.base` holds the state and helpers they share.
"""
