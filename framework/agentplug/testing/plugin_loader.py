"""``agentplug_load``: :class:`PluginLoader` registers plugin objects, module paths and
installed entry points on the test's host."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from agentplug.core.host import PluginRecord
    from agentplug.core.loader import DiscoveredPlugin
    from agentplug.gateway import PluginHost
    from agentplug.testing.fixture_state import FixtureState


class PluginLoader:
    """``agentplug_load(target, plugin_id=None, *, bundled=None)``.

    ``target`` is a plugin object (module, class, instance, ``register(api)`` function),
    a module path (``"module:pkg.mod"``, ``"pkg.mod:attr"`` or ``"pkg.mod"``), or the name
    of an installed entry point (group ``agentplug``). Objects and module paths register
    as bundled (``bundled=True``) unless told otherwise; entry points as installed
    (``bundled=False``), like ``PluginHost.load_installed``.
    """

    def __init__(self, state: FixtureState) -> None:
        self._state = state
        self._installed: dict[str, DiscoveredPlugin] | None = None

    @property
    def host(self) -> PluginHost:
        return self._state.host

    def installed(self) -> dict[str, DiscoveredPlugin]:
        """Installed entry points of group ``agentplug`` by name (nothing imported)."""
        if self._installed is None:
            from agentplug.core.loader import ENTRY_POINT_GROUP, discover

            self._installed = {p.name: p for p in discover(ENTRY_POINT_GROUP, use_cache=False)}
        return self._installed

    def __call__(
        self, target: object, plugin_id: str | None = None, *, bundled: bool | None = None
    ) -> PluginRecord:
        if not isinstance(target, str):
            return self.host.register(
                target, plugin_id, bundled=True if bundled is None else bundled
            )
        if target.startswith("module:"):
            return self.module(target[len("module:") :], plugin_id, bundled=bundled)
        if ":" not in target and target in self.installed():
            return self.entry_point(target, plugin_id, bundled=bundled)
        if ":" in target or _importable(target):
            return self.module(target, plugin_id, bundled=bundled)
        return self.entry_point(target, plugin_id, bundled=bundled)  # raises: names them

    def module(
        self, path: str, plugin_id: str | None = None, *, bundled: bool | None = None
    ) -> PluginRecord:
        """Import ``pkg.mod`` or ``pkg.mod:attr`` and register it."""
        import importlib

        from agentplug.core.errors import PluginLoadError

        module_name, _, attr = path.partition(":")
        pid = plugin_id or module_name.rsplit(".", 1)[-1]
        try:
            obj: object = importlib.import_module(module_name)
            for part in filter(None, attr.split(".")):
                obj = getattr(obj, part)
        except Exception as exc:
            raise PluginLoadError(pid, f"cannot import {path!r}: {exc!r}") from exc
        if plugin_id is None:
            own = getattr(obj, "plugin_id", None) or getattr(obj, "PLUGIN_ID", None)
            if isinstance(own, str) and own:
                pid = own
        return self.host.register(
            obj, pid, bundled=True if bundled is None else bundled, source=path
        )

    def entry_point(
        self, name: str, plugin_id: str | None = None, *, bundled: bool | None = None
    ) -> PluginRecord:
        """Load the installed plugin ``name`` (entry-point group ``agentplug``)."""
        from agentplug.core.errors import PluginLoadError

        found = self.installed().get(name)
        if found is None:
            known = ", ".join(sorted(self.installed())) or "none"
            raise PluginLoadError(
                name,
                f"no installed plugin with entry point {name!r} in group 'agentplug' "
                f"(installed: {known}); pip install it, or pass an object or "
                "'package.module' path to agentplug_load",
            )
        self._state.ensure_hookspecs()
        try:
            obj = found.load()
        except Exception as exc:
            raise PluginLoadError(name, f"import failed: {exc!r}") from exc
        return self.host.register(
            obj,
            plugin_id or name,
            bundled=bool(bundled),
            distribution=found.distribution,
            version=found.version,
            source=found.value,
        )


def _importable(name: str) -> bool:
    import importlib.util

    if not re.fullmatch(r"[A-Za-z_][\w.]*", name):
        return False
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False
