"""The action registry: one place where every action of a runtime lives, with its owner.

Owners are plugin ids (for actions a plugin returns from its ``provide_actions`` hook
implementation) or ``"host"`` for actions the host registers directly. Names are unique per
runtime. Because the default selector compares names case-insensitively and ignores ``_``,
two names that differ only in case or underscores (``RESTART_AGENT`` / ``restartAgent``) would
be indistinguishable when matching, so they clash as well.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Iterator

from agentplug.actions.model import Action

__all__ = [
    "HOST_OWNER",
    "UNAVAILABLE",
    "ActionConflictError",
    "ActionRegistrationError",
    "ActionRegistry",
    "normalize_action_name",
]

HOST_OWNER = "host"
"""Owner recorded for actions the host registers directly."""
UNAVAILABLE = "unavailable"
"""``Action.metadata`` key: why a registered action cannot run as configured (a one-line
reason naming the setting, e.g. ``"shell disabled: set actions.shell.enabled = true"``);
``agentplug actions list`` shows it as not enabled."""


def normalize_action_name(name: str) -> str:
    """The key names are compared by: case-folded, with ``_``, ``-`` and whitespace removed."""
    return "".join(ch for ch in name.casefold() if ch not in "_- \t\r\n")


class ActionConflictError(ValueError):
    """Two owners tried to register the same action name."""

    def __init__(self, name: str, existing_name: str, existing_owner: str, new_owner: str) -> None:
        self.name = name
        self.existing_name = existing_name
        self.existing_owner = existing_owner
        self.new_owner = new_owner
        same = "" if existing_name == name else f" (as {existing_name!r})"
        super().__init__(
            f"action {name!r} from {new_owner!r} clashes with the action already registered"
            f"{same} by {existing_owner!r}; action names are unique per runtime (compared "
            "ignoring case and '_'). Rename one of them, disable one of the plugins, or "
            f"unregister {existing_name!r} first"
        )


class ActionRegistrationError(TypeError):
    """A plugin contributed something that is not an :class:`Action`."""


class ActionRegistry:
    """Actions of one runtime, keyed by normalised name, in registration order.

    Iteration, :meth:`all` and :meth:`names` follow registration order, which is what the
    default selector uses as its last tie-break, so selection is reproducible. Methods are
    guarded by a lock because live registration may happen while another thread lists actions.
    """

    def __init__(self) -> None:
        self._entries: dict[str, tuple[Action, str]] = {}
        self._lock = threading.RLock()

    def register(self, action: Action, owner: str = HOST_OWNER) -> Action:
        """Register ``action`` for ``owner``; raise :class:`ActionConflictError` on a clash."""
        if not isinstance(action, Action):
            raise ActionRegistrationError(
                f"{owner!r} tried to register {type(action).__name__!r}, which is not an "
                "agentplug.actions.Action; build one with Action(name=..., description=..., "
                "handler=...)"
            )
        key = normalize_action_name(action.name)
        with self._lock:
            existing = self._entries.get(key)
            if existing is not None:
                raise ActionConflictError(action.name, existing[0].name, existing[1], owner)
            self._entries[key] = (action, owner)
        return action

    def add_plugin_actions(self, owner: str, actions: Iterable[Action] | None) -> list[Action]:
        """Register the actions one plugin returned from ``provide_actions``.

        All or nothing: every item is checked (type, clash with registered actions, clash
        within the batch) before any is registered, so a faulty plugin leaves the registry as
        it was. ``None`` (a hook implementation that returned nothing) registers nothing.
        """
        if actions is None:
            return []
        if isinstance(actions, Action | str | bytes) or not isinstance(actions, Iterable):
            raise ActionRegistrationError(
                f"plugin {owner!r}: provide_actions returned {type(actions).__name__!r}; "
                "it must return a list of agentplug.actions.Action"
            )
        batch = list(actions)
        with self._lock:
            seen: dict[str, Action] = {}
            for index, item in enumerate(batch):
                if not isinstance(item, Action):
                    raise ActionRegistrationError(
                        f"plugin {owner!r}: provide_actions item #{index} is "
                        f"{type(item).__name__!r}, not an agentplug.actions.Action; return "
                        "Action(name=..., description=..., handler=...) objects only"
                    )
                key = normalize_action_name(item.name)
                existing = self._entries.get(key)
                if existing is not None:
                    raise ActionConflictError(item.name, existing[0].name, existing[1], owner)
                if key in seen:
                    raise ActionConflictError(item.name, seen[key].name, owner, owner)
                seen[key] = item
            for item in batch:
                self._entries[normalize_action_name(item.name)] = (item, owner)
        return batch

    def unregister(self, name: str) -> Action | None:
        """Remove the action called ``name``; return it, or ``None`` if none was registered."""
        with self._lock:
            entry = self._entries.pop(normalize_action_name(name), None)
        return None if entry is None else entry[0]

    def unregister_owner(self, owner: str) -> list[Action]:
        """Remove every action registered by ``owner`` (a plugin being unloaded)."""
        with self._lock:
            keys = [key for key, (_, who) in self._entries.items() if who == owner]
            return [self._entries.pop(key)[0] for key in keys]

    def get(self, name: str) -> Action | None:
        """Return the action called ``name`` (ignoring case and ``_``), or ``None``."""
        with self._lock:
            entry = self._entries.get(normalize_action_name(name))
        return None if entry is None else entry[0]

    def owner_of(self, name: str) -> str | None:
        """Return who registered the action called ``name``, or ``None``."""
        with self._lock:
            entry = self._entries.get(normalize_action_name(name))
        return None if entry is None else entry[1]

    def all(self) -> list[Action]:
        """Every registered action, in registration order."""
        with self._lock:
            return [action for action, _ in self._entries.values()]

    def names(self) -> list[str]:
        """Names of every registered action, in registration order."""
        return [action.name for action in self.all()]

    def __iter__(self) -> Iterator[Action]:
        return iter(self.all())

    def __len__(self) -> int:
        with self._lock:
            return len(self._entries)

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and self.get(name) is not None
