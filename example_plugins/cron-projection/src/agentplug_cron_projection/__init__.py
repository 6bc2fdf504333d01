"""cron-projection: mirror the gateway's cron wakes onto an external host scheduler.

A Python port of the seed's "safe external cron projection". It projects a *complete*
snapshot of wakes instead of forwarding cron events:

- one latest-state worker: every request bumps ``requested_revision``; the worker
  projects until ``applied_revision`` catches up, and a newer revision aborts the
  attempt in flight before it can accept a stale snapshot;
- only ``cron_reconciled`` adopts a scheduler (``ctx.get_cron()``) and its abort
  signal; ``cron_changed`` merely asks the worker to re-read that scheduler, so a late
  hint can never bring an older scheduler back;
- the adapter's ``replace_all(wakes, signal=...)`` must be atomic and idempotent, and
  accept nothing once ``signal`` aborted. The signal combines the plugin lifecycle,
  the snapshot's abort signal and the attempt;
- failures retry with exponential backoff (1 s doubling to 30 s), abort-aware;
- ``gateway_stop`` aborts the lifecycle, waits for the worker, closes the adapter.

Installed use: set ``plugins.entries.cron-projection.config.path`` (a JSON file written
atomically by :class:`JsonFileWakeHost`) or ``config.adapter = "module:factory"`` (a
callable receiving the plugin config and returning an adapter). Programmatic use:
:func:`register_cron_projection`.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import inspect
import json
import logging
import os
import tempfile
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from agentplug import AbortController, AbortSignal, PluginApi
from agentplug_hookspecs.lifecycle import (
    CronChangedEvent,
    CronContext,
    CronReconciledEvent,
    GatewayContext,
    GatewayEvent,
)

__all__ = [
    "PLUGIN_ID",
    "CronProjection",
    "ExternalWake",
    "ExternalWakeHost",
    "JsonFileWakeHost",
    "register",
    "register_cron_projection",
    "wakes_from_jobs",
]

PLUGIN_ID = "cron-projection"
INITIAL_BACKOFF_S = 1.0
MAX_BACKOFF_S = 30.0

Sleep = Callable[[float, AbortSignal], Awaitable[None]]
"""``await sleep(delay_s, signal)``: raises when ``signal`` aborts (tests inject one)."""


async def _signal_sleep(delay_s: float, signal: AbortSignal) -> None:
    await signal.sleep(delay_s)


@dataclass(frozen=True, slots=True)
class ExternalWake:
    """One wake the external scheduler must fire."""

    job_id: str
    run_at_ms: int


class ExternalWakeHost(Protocol):
    """The external scheduler (the seed's ``ExternalWakeHost``)."""

    async def replace_all(self, wakes: Sequence[ExternalWake], *, signal: AbortSignal) -> None:
        """Atomically replace every wake; return only after durable acceptance.

        Must not accept the snapshot once ``signal`` is aborted.
        """
        ...

    async def close(self) -> None:
        """Release the connection."""
        ...


def _field(obj: Any, name: str) -> Any:
    if isinstance(obj, Mapping):
        return obj.get(name)
    return getattr(obj, name, None)


def _next_run(job: Any) -> Any:
    state = _field(job, "state")
    if state is None:
        return None
    value = _field(state, "next_run_at_ms")
    return value if value is not None else _field(state, "nextRunAtMs")


def wakes_from_jobs(jobs: Iterable[Any]) -> list[ExternalWake]:
    """Enabled jobs with a next run, as wakes sorted by time then job id."""
    wakes = []
    for job in jobs:
        run_at = None if _field(job, "enabled") is False else _next_run(job)
        if isinstance(run_at, int) and not isinstance(run_at, bool):
            wakes.append(ExternalWake(job_id=str(_field(job, "id")), run_at_ms=run_at))
    return sorted(wakes, key=lambda w: (w.run_at_ms, w.job_id))


class CronProjection:
    """The latest-state projection worker and its three hook handlers."""

    def __init__(
        self,
        adapter: ExternalWakeHost,
        *,
        logger: logging.Logger | None = None,
        initial_backoff_s: float = INITIAL_BACKOFF_S,
        max_backoff_s: float = MAX_BACKOFF_S,
        sleep: Sleep | None = None,
    ) -> None:
        self.adapter = adapter
        self.log = logger or logging.getLogger(f"agentplug.plugin.{PLUGIN_ID}")
        self.initial_backoff_s = initial_backoff_s
        self.max_backoff_s = max_backoff_s
        self.sleep: Sleep = sleep or _signal_sleep
        self.lifecycle = AbortController()
        self.cron: Any = None
        self.enabled = False
        self.has_baseline = False
        self.reconciliation_signal: AbortSignal | None = None
        self.requested_revision = 0
        self.applied_revision = 0
        self.closed = False
        self._worker: asyncio.Future[None] | None = None
        self._active_attempt: AbortController | None = None

    # -- the worker -------------------------------------------------------------------

    async def _read_jobs(self) -> list[Any]:
        jobs = self.cron.list(include_disabled=True)
        if inspect.isawaitable(jobs):
            jobs = await jobs
        return list(jobs)

    async def _project_latest(self) -> None:
        retry_s = self.initial_backoff_s
        while not self.lifecycle.aborted and self.applied_revision < self.requested_revision:
            owner = self.reconciliation_signal
            if owner is None or owner.aborted:
                return
            target = self.requested_revision
            attempt = AbortController()
            signal = AbortSignal.any([self.lifecycle.signal, owner, attempt.signal])
            self._active_attempt = attempt
            try:
                jobs = await self._read_jobs() if self.enabled and self.cron is not None else []
                if signal.aborted or target != self.requested_revision:
                    continue
                await self.adapter.replace_all(wakes_from_jobs(jobs), signal=signal)
                if signal.aborted or target != self.requested_revision:
                    continue
                self.applied_revision = target
                retry_s = self.initial_backoff_s
            except Exception as exc:
                if self.lifecycle.aborted or owner.aborted:
                    return
                if attempt.aborted:
                    continue
                self.log.warning(
                    "external cron projection failed (%s); retrying in %d ms",
                    type(exc).__name__,
                    int(retry_s * 1000),
                )
                try:
                    await self.sleep(retry_s, signal)
                except Exception:  # AbortError included
                    if self.lifecycle.aborted:
                        return
                    if attempt.aborted:
                        continue
                retry_s = min(retry_s * 2, self.max_backoff_s)
            finally:
                if self._active_attempt is attempt:
                    self._active_attempt = None

    def request_projection(self) -> asyncio.Future[None]:
        """Ask for a new revision; abort the attempt in flight; return the worker."""
        self.requested_revision += 1
        target = self.requested_revision
        if self._active_attempt is not None:
            self._active_attempt.abort("superseded by a newer revision")
        previous = self._worker

        async def chained() -> None:
            if previous is not None:
                with contextlib.suppress(Exception):
                    await previous
            if not self.lifecycle.aborted and self.applied_revision < target:
                await self._project_latest()

        self._worker = asyncio.ensure_future(chained())
        return self._worker

    async def _await_worker(self, worker: asyncio.Future[None]) -> None:
        # Shielded: a dispatch that stops waiting must not cancel the shared worker.
        await asyncio.shield(worker)

    # -- hook handlers ----------------------------------------------------------------

    async def on_cron_reconciled(self, event: CronReconciledEvent, ctx: CronContext) -> None:
        """Adopt the reconciled scheduler and its abort signal; project it."""
        reconciled = ctx.get_cron() if ctx.get_cron is not None else None
        if event.enabled and reconciled is None:
            self.log.warning("cron reconciliation did not expose a scheduler")
            return
        if ctx.abort_signal is None:
            self.log.warning("cron reconciliation carried no abort signal; not projecting")
        self.cron = reconciled
        self.enabled = event.enabled
        self.has_baseline = True
        self.reconciliation_signal = ctx.abort_signal
        await self._await_worker(self.request_projection())

    async def on_cron_changed(self, event: CronChangedEvent, ctx: CronContext) -> None:
        """A hint: re-read the adopted scheduler (never adopt one from this context)."""
        if self.has_baseline:
            await self._await_worker(self.request_projection())

    async def on_gateway_stop(self, event: GatewayEvent, ctx: GatewayContext) -> None:
        """Abort the lifecycle, wait for the worker, close the adapter."""
        self.lifecycle.abort("gateway_stop")
        if self._worker is not None:
            with contextlib.suppress(Exception):
                await asyncio.shield(self._worker)
        if not self.closed:
            self.closed = True
            await self.adapter.close()


def register_cron_projection(
    api: PluginApi,
    adapter: ExternalWakeHost,
    *,
    initial_backoff_s: float = INITIAL_BACKOFF_S,
    max_backoff_s: float = MAX_BACKOFF_S,
    sleep: Sleep | None = None,
) -> CronProjection:
    """Register the projection's handlers on ``api``; return the projection."""
    projection = CronProjection(
        adapter,
        logger=api.logger,
        initial_backoff_s=initial_backoff_s,
        max_backoff_s=max_backoff_s,
        sleep=sleep,
    )
    api.on("cron_reconciled", projection.on_cron_reconciled)
    api.on("cron_changed", projection.on_cron_changed)
    api.on("gateway_stop", projection.on_gateway_stop)
    return projection


class JsonFileWakeHost:
    """An external "scheduler" that is a JSON file, replaced atomically.

    ``replace_all`` writes a temporary file in the same folder, fsyncs it, checks the
    signal one last time and renames it over the target (``os.replace`` is atomic), so
    readers see the old or the new snapshot, never a mix. The same wakes always give
    the same bytes (idempotent).
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self.closed = False

    def read(self) -> list[ExternalWake]:
        """The wakes currently accepted (empty when the file does not exist)."""
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return []
        return [ExternalWake(job_id=w["job_id"], run_at_ms=w["run_at_ms"]) for w in data["wakes"]]

    async def replace_all(self, wakes: Sequence[ExternalWake], *, signal: AbortSignal) -> None:
        """Atomically replace the file's wakes (nothing is written once aborted)."""
        if self.closed:
            raise RuntimeError("the wake host is closed")
        signal.throw_if_aborted()
        body = json.dumps(
            {"wakes": [{"job_id": w.job_id, "run_at_ms": w.run_at_ms} for w in wakes]},
            indent=2,
            sort_keys=True,
        )
        tmp = await asyncio.to_thread(self._write_temp, body)
        try:
            # The last moment to refuse: after os.replace the snapshot is accepted.
            signal.throw_if_aborted()
            await asyncio.to_thread(self._commit, tmp)
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)

    def _write_temp(self, body: str) -> str:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{self.path.name}.", dir=self.path.parent)
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(body + "\n")
            handle.flush()
            os.fsync(handle.fileno())
        return tmp

    def _commit(self, tmp: str) -> None:
        os.replace(tmp, self.path)
        with contextlib.suppress(OSError):
            dir_fd = os.open(self.path.parent, os.O_RDONLY)
            try:
                os.fsync(dir_fd)
            finally:
                os.close(dir_fd)

    async def close(self) -> None:
        """Nothing to release; later ``replace_all`` calls fail."""
        self.closed = True


def _positive_ms(config: Mapping[str, Any], key: str, default_s: float) -> float:
    value = config.get(key)
    if isinstance(value, int) and not isinstance(value, bool) and value > 0:
        return value / 1000
    return default_s


def _adapter_from_config(config: Mapping[str, Any]) -> ExternalWakeHost | None:
    spec = config.get("adapter")
    if isinstance(spec, str) and ":" in spec:
        module_name, _, attr = spec.partition(":")
        factory = getattr(importlib.import_module(module_name), attr)
        adapter: ExternalWakeHost = factory(dict(config))
        return adapter
    path = config.get("path")
    if isinstance(path, str) and path:
        return JsonFileWakeHost(path)
    return None


def register(api: PluginApi) -> None:
    """Entry point: build the adapter from the plugin config and register the handlers."""
    config = api.plugin_config
    adapter = _adapter_from_config(config)
    if adapter is None:
        api.logger.warning(
            "cron-projection: set plugins.entries.%s.config.path (a JSON file) or "
            "config.adapter ('module:factory'); projection disabled",
            api.plugin_id,
        )
        return
    register_cron_projection(
        api,
        adapter,
        initial_backoff_s=_positive_ms(config, "initial_backoff_ms", INITIAL_BACKOFF_S),
        max_backoff_s=_positive_ms(config, "max_backoff_ms", MAX_BACKOFF_S),
    )
