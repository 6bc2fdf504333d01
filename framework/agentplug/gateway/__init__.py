"""The composition root: :class:`Gateway` builds a gateway once; every entrance uses it.

Layer: above ``agent`` (it assembles the runner, actions, services, store and host),
below the entrances (``api``, ``testing``, ``adapters``, ``cli``). See GUIDE.md here.
"""

from __future__ import annotations

from agentplug.gateway.assembly import Gateway, PluginApi, PluginHost

__all__ = ["Gateway", "PluginApi", "PluginHost"]
