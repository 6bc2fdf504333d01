"""``agentplug_dispatch`` and ``agentplug_recorder``: :class:`Dispatcher` (a blocking
dispatch), :class:`DispatchRecorder` and its :class:`DispatchRecord` entries."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, Literal, cast

if TYPE_CHECKING:
    from agentplug.core.results import DispatchResult, HandlerReport
    from agentplug.gateway import PluginHost
    from agentplug.testing.fixture_state import FixtureState


class Dispatcher:
    """``agentplug_dispatch(hook, event=None, ctx=None)``: a blocking dispatch.

    Sync hooks run directly (``call_sync``); the others run on an event loop kept for
    the whole test, so a handler that outlives its timeout keeps running until the
    test ends, when the fixture waits for it (``runtime.shutdown_timeout_ms``).
    """

    def __init__(self, state: FixtureState) -> None:
        self._state = state

    def __call__(self, hook: str, event: Any = None, ctx: Any = None) -> DispatchResult[Any]:
        host = self._state.host
        decl = host.declarations.get(hook)
        if decl is not None and decl.kind.value == "sync":
            return host.call_sync(hook, event, ctx)
        result: DispatchResult[Any] = self._state.run(host.dispatch(hook, event, ctx))
        return result


def _as_dict(value: object) -> dict[str, Any]:
    if value is None:
        return {}
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        return cast("dict[str, Any]", dump())
    if isinstance(value, Mapping):
        return dict(value)
    return {"value": value}


@dataclass(frozen=True)
class DispatchRecord:
    """One recorded dispatch."""

    hook: str
    """The hook name the host was asked to dispatch."""
    event: dict[str, Any]
    """The event as passed (a model is dumped to a dict)."""
    ctx: dict[str, Any]
    """The context as passed (``{}`` when none was)."""
    via: Literal["dispatch", "call_sync"]
    result: DispatchResult[Any] | None = None
    error: BaseException | None = None
    """What the dispatch raised (unknown hook, invalid event), if it raised."""

    def _result(self) -> DispatchResult[Any]:
        if self.result is None:
            raise LookupError(f"dispatch of {self.hook!r} raised {self.error!r}; no outcome")
        return self.result

    @property
    def outcome(self) -> Any:
        """The reduced outcome model."""
        return self._result().outcome

    @property
    def outcome_data(self) -> dict[str, Any]:
        """``outcome.model_dump(mode="json")``."""
        return cast("dict[str, Any]", self._result().outcome.model_dump(mode="json"))

    @property
    def handlers(self) -> list[HandlerReport]:
        """Per-handler reports in execution order (empty when the dispatch raised)."""
        return self.result.handlers if self.result is not None else []

    @property
    def statuses(self) -> dict[str, str]:
        """``{plugin_id: status}`` (a plugin's first handler when it has several)."""
        found: dict[str, str] = {}
        for report in self.handlers:
            found.setdefault(report.plugin_id, report.status.value)
        return found


class DispatchRecorder:
    """``agentplug_recorder``: every dispatch of ``agentplug_host`` in order."""

    def __init__(self, host: PluginHost) -> None:
        self.host = host
        self.records: list[DispatchRecord] = []
        self._saved: dict[str, object] = {}

    # installation on the host instance ------------------------------------------------

    def install(self) -> None:
        """Wrap ``host.dispatch`` and ``host.call_sync`` on the instance."""
        if self._saved:
            return
        host = self.host
        attrs = vars(host)
        self._saved = {name: attrs.get(name, _ABSENT) for name in ("dispatch", "call_sync")}
        inner_dispatch = host.dispatch
        inner_call_sync = host.call_sync
        add = self._add

        async def dispatch(hook: str, event: Any = None, ctx: Any = None) -> DispatchResult[Any]:
            try:
                result = await inner_dispatch(hook, event, ctx)
            except Exception as exc:
                add(hook, event, ctx, "dispatch", None, exc)
                raise
            add(hook, event, ctx, "dispatch", result, None)
            return result

        def call_sync(hook: str, event: Any = None, ctx: Any = None) -> DispatchResult[Any]:
            try:
                result = inner_call_sync(hook, event, ctx)
            except Exception as exc:
                add(hook, event, ctx, "call_sync", None, exc)
                raise
            add(hook, event, ctx, "call_sync", result, None)
            return result

        host.dispatch = dispatch  # type: ignore[method-assign]
        host.call_sync = call_sync  # type: ignore[method-assign]

    def uninstall(self) -> None:
        """Restore the host's methods."""
        for name, previous in self._saved.items():
            if previous is _ABSENT:
                vars(self.host).pop(name, None)
            else:
                setattr(self.host, name, previous)
        self._saved = {}

    def _add(
        self,
        hook: str,
        event: object,
        ctx: object,
        via: Literal["dispatch", "call_sync"],
        result: DispatchResult[Any] | None,
        error: BaseException | None,
    ) -> None:
        self.records.append(
            DispatchRecord(hook, _as_dict(event), _as_dict(ctx), via, result, error)
        )

    # queries --------------------------------------------------------------------------

    def calls(self, hook: str | None = None) -> list[DispatchRecord]:
        """Records of ``hook`` (by requested or resolved name), or all records."""
        if hook is None:
            return list(self.records)
        return [
            r
            for r in self.records
            if r.hook == hook or (r.result is not None and r.result.hook == hook)
        ]

    def last(self, hook: str | None = None) -> DispatchRecord:
        """The latest record of ``hook`` (or of any hook); ``LookupError`` when none."""
        found = self.calls(hook)
        if not found:
            what = f"of {hook!r} " if hook else ""
            seen = ", ".join(dict.fromkeys(self.hooks)) or "nothing"
            raise LookupError(f"no dispatch {what}was recorded (recorded: {seen})")
        return found[-1]

    def called(self, hook: str) -> bool:
        """Whether ``hook`` was dispatched at least once."""
        return bool(self.calls(hook))

    def count(self, hook: str | None = None) -> int:
        """How many dispatches of ``hook`` (or in all) were recorded."""
        return len(self.calls(hook))

    @property
    def hooks(self) -> list[str]:
        """The dispatched hook names in order (with repeats)."""
        return [r.hook for r in self.records]

    def clear(self) -> None:
        """Forget what was recorded so far."""
        self.records.clear()

    def __len__(self) -> int:
        return len(self.records)

    def __iter__(self) -> Iterator[DispatchRecord]:
        return iter(list(self.records))


_ABSENT: Final = object()
