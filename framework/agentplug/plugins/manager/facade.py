"""The :class:`PluginManager` facade: composes install, eject, sync, reinject, listing
and core operations over the shared state."""

from __future__ import annotations

from agentplug.plugins.manager.core import _CoreMixin
from agentplug.plugins.manager.eject import _EjectMixin
from agentplug.plugins.manager.install import _InstallMixin
from agentplug.plugins.manager.reinject import _ReinjectMixin
from agentplug.plugins.manager.sync import _SyncMixin


class PluginManager(_InstallMixin, _CoreMixin, _EjectMixin, _SyncMixin, _ReinjectMixin):
    """Install, eject, sync and reinject plugins and the agentplug core.

    ``host`` is used for install decisions (``check_install``) and settings
    (``actions.plugins``); it may be ``None`` for ejection-only use. ``state_dir``
    defaults to :func:`resolve_state_dir`.
    """
