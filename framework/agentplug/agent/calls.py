"""One governed model call: hooks, retries, fallback models, deadlines, usage, spans.

Every provider call the runtime makes goes through :func:`governed_call`: the model
loop's, compaction's summary and the language-aware action flow's selector and
extractor (:class:`ModelCaller`). Per attempt, in order:

1. the abort signal, the turn's deadline (``agent.limits.turn_timeout_s``) and the usage
   limits (:class:`~agentplug.agent.usage.UsageLedger`) are checked: none of them lets a
   call start past it;
2. ``model_call_started`` (sanitised fields only), the provider call (streamed into the
   caller's sink when there is one and the provider streams), bounded by
   ``agent.limits.model_call_timeout_s`` and by what is left of the turn's deadline,
   abortable; ``model_call_ended`` with the duration, the outcome (``ok``, ``error``,
   ``timeout``, ``cancelled``) and the keyed hash of the request id;
3. on failure, another attempt of the same model when the failure may pass by itself,
   after a jittered backoff or the server's ``Retry-After``
   (:mod:`~agentplug.agent.retries`), up to ``agent.retry.attempts``; then the next of
   ``agent.fallback_models``. Each attempt is its own ``model_call_started`` /
   ``model_call_ended`` pair with its own call id, its own trace entry and its own span.

A returned call's usage (the provider's, or an estimate marked as one) is added to the
ledger, the trace entry and the span.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any, Protocol, TypeVar

from agentplug_hookspecs.common import AgentContext

from agentplug.agent import spans
from agentplug.agent.limits import AgentLimits
from agentplug.agent.providers import split_model
from agentplug.agent.providers.base import (
    ModelDelta,
    ModelProvider,
    ModelRequest,
    ModelResponse,
    ProviderError,
)
from agentplug.agent.retries import RetryConfig, backoff_s, retryable
from agentplug.agent.streaming import ModelRetry, StreamEvent, UsageUpdate, emit
from agentplug.agent.trace import current_trace
from agentplug.agent.turn import Turn, TurnCancelled
from agentplug.agent.usage import CallUsage, TokenUsage, UsageLedger, usage_of
from agentplug.core.redaction import scrub_clipped
from agentplug.services.modelcalls import upstream_request_id_hash
from agentplug.services.signals import AbortSignal

__all__ = [
    "Answer",
    "CallScope",
    "DeltaSink",
    "ModelCaller",
    "abortable",
    "candidates",
    "governed_call",
    "scope_of",
]

T = TypeVar("T")


class DeltaSink(Protocol):
    """Where a streamed attempt's text goes (the turn's :class:`~agentplug.agent.streaming.
    DeltaGate`)."""

    def begin(self) -> None:
        """An attempt starts."""
        ...

    async def feed(self, text: str) -> None:
        """A chunk of text arrived."""
        ...

    async def end(self) -> None:
        """The attempt's response is complete."""
        ...


@dataclass
class CallScope:
    """Where model calls are made from: the hook context, the signal, the bounds."""

    host: Any
    ctx: Any
    """The context of the ``model_call_*`` hooks (the turn's agent context)."""
    run_id: str | None
    signal: AbortSignal
    limits: AgentLimits
    retry: RetryConfig
    deadline: float
    """The :func:`time.monotonic` time past which no call starts (the turn's deadline)."""
    ledger: UsageLedger
    providers: Callable[[str], ModelProvider]
    conversation_id: str | None = None
    notify: Callable[[StreamEvent], Awaitable[None]] | None = None
    """Receives :class:`ModelRetry` and :class:`UsageUpdate` events."""
    step: int = 1


@dataclass(frozen=True)
class Answer:
    """A call that returned: the response, who answered and what it used."""

    response: ModelResponse
    provider: str
    model: str
    usage: TokenUsage


def scope_of(turn: Turn) -> CallScope:
    """The call scope of ``turn`` (one per turn; its step and context kept current)."""
    scope: CallScope | None = turn._extras.get("scope")
    if scope is None:
        config = turn.runner.config

        async def notify(event: StreamEvent) -> None:
            await emit(turn, event)

        scope = CallScope(
            host=turn.host,
            ctx=turn.ctx,
            run_id=turn.run_id,
            signal=turn.signal,
            limits=config.limits,
            retry=config.retry,
            deadline=turn.clock_start + config.limits.turn_timeout_s,
            ledger=turn.ledger,
            providers=turn.runner.provider_for,
            conversation_id=turn.session.session_id,
            notify=notify if turn.on_event is not None else None,
        )
        turn._extras["scope"] = scope
    scope.ctx = turn.ctx
    scope.step = turn.steps + 1
    return scope


def candidates(turn: Turn) -> list[tuple[str, str]]:
    """The turn's model, then ``agent.fallback_models`` (a name without a provider keeps
    the turn's provider)."""
    fallbacks = turn.runner.config.fallback_models
    return [
        (turn.provider_name, turn.model),
        *(split_model(spec, turn.provider_name) for spec in fallbacks),
    ]


async def abortable(signal: AbortSignal, awaitable: Awaitable[T]) -> T:
    """Await ``awaitable`` unless ``signal`` fires first (then it is cancelled and
    :class:`~agentplug.agent.turn.TurnCancelled` raised)."""
    task = asyncio.ensure_future(awaitable)
    if signal.aborted:
        task.cancel()
        raise TurnCancelled(str(signal.reason))
    # The abort cancels the task from whichever thread aborts (no waiter task per call).
    loop = asyncio.get_running_loop()
    forget = signal.add_callback(lambda _signal: loop.call_soon_threadsafe(task.cancel))
    try:
        return await task
    except asyncio.CancelledError:
        current = asyncio.current_task()
        if signal.aborted and (current is None or not current.cancelling()):
            raise TurnCancelled(str(signal.reason or "cancelled")) from None
        raise  # the caller itself is being cancelled
    finally:
        forget()


async def _bounded(awaitable: Awaitable[T], seconds: float, late: ProviderError) -> T:
    deadline = asyncio.timeout(seconds)
    try:
        async with deadline:
            return await awaitable
    except TimeoutError:
        if not deadline.expired():
            raise
        raise late from None


async def _complete(
    provider: ModelProvider, request: ModelRequest, sink: DeltaSink | None
) -> ModelResponse:
    stream = getattr(provider, "stream", None)
    if sink is None or not callable(stream):
        return await provider.complete(request)
    final: ModelResponse | None = None
    sink.begin()
    async for item in stream(request):
        if isinstance(item, ModelDelta):
            await sink.feed(item.text)
        elif isinstance(item, ModelResponse):
            final = item
    if final is None:
        raise ProviderError(
            f"provider {provider.name!r} streamed no final response", kind="malformed"
        )
    await sink.end()
    return final


def _output_chars(response: ModelResponse) -> int:
    total = len(response.text)
    for call in response.tool_calls:
        total += len(call.name) + len(call.raw_arguments or json.dumps(dict(call.arguments)))
    return total


def _late(scope: CallScope, what: str, remaining: float) -> tuple[float, ProviderError]:
    """The bound of one attempt and the error when it passes."""
    limit = scope.limits.model_call_timeout_s
    if limit <= remaining:
        return limit, ProviderError(
            f"{what} did not complete within {limit:g} s (agent.limits.model_call_timeout_s); "
            "raise it or check the provider",
            kind="timeout",
        )
    return remaining, ProviderError(
        f"{what} was cut at the turn's deadline ({scope.limits.turn_timeout_s:g} s, "
        "agent.limits.turn_timeout_s); raise it or ask for less",
        kind="deadline",
    )


async def _attempt(
    scope: CallScope,
    provider: ModelProvider,
    name: str,
    request: ModelRequest,
    purpose: str,
    sink: DeltaSink | None,
    attempt: int,
) -> Answer:
    host = scope.host
    call_id = f"call-{uuid.uuid4().hex[:12]}"
    base = {
        "run_id": scope.run_id,
        "call_id": call_id,
        "provider": name,
        "model": request.model,
        "api": "chat.completions",
        "transport": "http" if name != "scripted" else "in-process",
        "context_token_budget": getattr(scope.ctx, "context_token_budget", None),
        "context_window_source": getattr(scope.ctx, "context_window_source", None),
        "context_window_reference_tokens": getattr(
            scope.ctx, "context_window_reference_tokens", None
        ),
    }
    await host.hooks.model_call_started(base, scope.ctx)
    what = f"model call to {name}/{request.model}"
    seconds, late = _late(scope, what, scope.deadline - time.monotonic())
    tracer = spans.tracer_of(host)
    span = None
    if tracer is not None:
        span = spans.model_span(
            tracer,
            name,
            request.model,
            conversation_id=scope.conversation_id,
            stream=sink is not None and callable(getattr(provider, "stream", None)),
            json_output=request.output_schema is not None,
            purpose=purpose,
            in_process=name == "scripted",
        )
    started = time.perf_counter()
    outcome, error = "ok", None
    response: ModelResponse | None = None
    usage: TokenUsage | None = None
    duration_ms = 0.0
    try:
        response = await abortable(
            scope.signal, _bounded(_complete(provider, request, sink), seconds, late)
        )
    except TurnCancelled:
        outcome = "cancelled"
        raise
    except ProviderError as exc:
        outcome, error = ("timeout" if exc.kind in ("timeout", "deadline") else "error"), exc
    except Exception as exc:  # a provider bug is a failed attempt, never a crashed host
        outcome = "error"
        error = ProviderError(
            f"provider {name!r} raised {type(exc).__name__}: {exc}", kind="provider_bug"
        )
    finally:
        duration_ms = (time.perf_counter() - started) * 1000
        ended = dict(base, duration_ms=duration_ms, outcome=outcome)
        if response is not None and response.request_id:
            ended["upstream_request_id_hash"] = upstream_request_id_hash(response.request_id)
        await host.hooks.model_call_ended(ended, scope.ctx)
        if response is not None:
            usage = usage_of(response.usage, request.messages, _output_chars(response))
        if span is not None:
            if response is not None:
                spans.set_response(span, response, usage)
            spans.end_span(span, None if error is None else _error_type(error, outcome))
        trace = current_trace()
        if trace is not None:
            trace.add(
                "model",
                f"{name}/{request.model}",
                duration_ms,
                began=started,
                outcome=outcome,
                purpose=None if purpose == "turn" else purpose,
                attempt=attempt if attempt > 1 else None,
                error=None if error is None else scrub_clipped(str(error), 200),
                input_tokens=usage.input_tokens if usage else None,
                output_tokens=usage.output_tokens if usage else None,
                usage_estimated=True if usage and usage.estimated else None,
            )
    if error is not None or response is None or usage is None:
        raise error or ProviderError(f"provider {name!r} returned nothing", kind="malformed")
    scope.ledger.record(CallUsage(purpose, name, request.model, usage))
    if scope.notify is not None:
        await scope.notify(UsageUpdate(purpose, name, request.model, usage, scope.ledger.total))
    return Answer(response, name, request.model, usage)


def _error_type(error: ProviderError, outcome: str) -> str:
    if outcome == "timeout":
        return "timeout"
    if error.status is not None:
        return str(error.status)
    return error.kind


def _wait(retry: RetryConfig, error: ProviderError, failed: int) -> float | None:
    """The wait before the next attempt; ``None`` when the server asked for longer than
    ``agent.retry.max_retry_after_s``."""
    if error.retry_after is not None:
        if error.retry_after > retry.max_retry_after_s:
            return None
        return error.retry_after
    return backoff_s(retry, failed)


async def governed_call(
    scope: CallScope,
    candidates: Sequence[tuple[str, str]],
    request: ModelRequest,
    *,
    purpose: str = "turn",
    sink: DeltaSink | None = None,
) -> Answer:
    """Call the first of ``candidates`` (``(provider, model)`` pairs) that answers (see
    the module docstring). Raises :class:`ProviderError` naming what failed last,
    :class:`~agentplug.agent.turn.TurnCancelled` when the signal fired and
    :class:`~agentplug.agent.usage.UsageLimitReached` when a limit stops the call."""
    last: ProviderError | None = None
    made = 0
    for index, (name, model) in enumerate(candidates):
        try:
            provider = scope.providers(name)
        except ProviderError as exc:
            last = exc
            continue
        attempt_request = request if model == request.model else replace(request, model=model)
        for attempt in range(1, scope.retry.attempts + 1):
            if scope.signal.aborted:
                raise TurnCancelled(str(scope.signal.reason or "cancelled"))
            if time.monotonic() >= scope.deadline:
                raise _past_deadline(scope, last)
            scope.ledger.before_model_call()
            made += 1
            try:
                return await _attempt(
                    scope, provider, name, attempt_request, purpose, sink, attempt
                )
            except ProviderError as exc:
                last = exc
            if last.kind == "deadline":
                raise _past_deadline(scope, last)
            delay = _wait(scope.retry, last, attempt) if retryable(last) else None
            if delay is None or attempt == scope.retry.attempts:
                break
            if time.monotonic() + delay >= scope.deadline:
                raise _past_deadline(scope, last)
            await _notify_retry(scope, name, model, last, delay, (name, model))
            await abortable(scope.signal, asyncio.sleep(delay))
        if index + 1 < len(candidates) and last is not None:
            await _notify_retry(scope, name, model, last, 0.0, candidates[index + 1])
    if last is None:  # no candidate at all: a caller's mistake, said plainly
        raise ProviderError("no model to call (agent.model is empty)", kind="config")
    if made > 1:
        raise ProviderError(
            f"{last} ({made} attempts failed; agent.retry and agent.fallback_models say how "
            "many are made)",
            kind=last.kind,
            status=last.status,
        )
    raise last


def _past_deadline(scope: CallScope, last: ProviderError | None) -> ProviderError:
    tail = f"; the last attempt failed: {last}" if last is not None else ""
    return ProviderError(
        f"stopped: the turn's deadline for model calls passed ({scope.limits.turn_timeout_s:g} "
        f"s, agent.limits.turn_timeout_s){tail}",
        kind="deadline",
    )


async def _notify_retry(
    scope: CallScope,
    name: str,
    model: str,
    error: ProviderError,
    delay: float,
    following: tuple[str, str],
) -> None:
    if scope.notify is None:
        return
    await scope.notify(
        ModelRetry(
            name,
            model,
            scrub_clipped(str(error), 300),
            delay,
            following[0],
            following[1],
            scope.step,
        )
    )


class ModelCaller:
    """Governed model calls outside a turn (the language-aware action flow's).

    ``host`` dispatches ``model_call_started`` / ``model_call_ended`` (with
    ``run_id`` ``flow-<id>``); ``signal`` aborts the calls; ``config`` (an
    :class:`~agentplug.agent.config.AgentConfig`) gives the limits, retries and fallback
    models.
    """

    def __init__(
        self,
        host: Any,
        provider: ModelProvider | Callable[[str], ModelProvider],
        model: str,
        *,
        provider_name: str | None = None,
        limits: AgentLimits | None = None,
        retry: RetryConfig | None = None,
        fallbacks: Sequence[tuple[str, str]] = (),
        signal: AbortSignal | None = None,
        agent_id: str = "main",
    ) -> None:
        self.host = host
        if callable(provider) and not hasattr(provider, "complete"):
            self._providers: Callable[[str], ModelProvider] = provider
            self.provider_name = provider_name or "scripted"
        else:
            instance: Any = provider
            self.provider_name = provider_name or str(getattr(instance, "name", "scripted"))
            self._providers = lambda _name: instance
        self.model = model
        self.limits = limits or AgentLimits()
        self.retry = retry or RetryConfig()
        self.fallbacks = list(fallbacks)
        self.signal = signal or AbortSignal()
        self.agent_id = agent_id
        self.ledger = UsageLedger(self.limits)
        """Every call's usage (the flow has no turn to add it to)."""

    @property
    def name(self) -> str:
        """The provider's name (what a selector's match reason names)."""
        return self.provider_name

    async def complete(self, request: ModelRequest, purpose: str) -> ModelResponse:
        """One governed call of ``request`` (its ``model`` is replaced by this caller's)."""
        run_id = f"flow-{uuid.uuid4().hex[:12]}"
        scope = CallScope(
            host=self.host,
            ctx=AgentContext(agent_id=self.agent_id, run_id=run_id),
            run_id=run_id,
            signal=self.signal,
            limits=self.limits,
            retry=self.retry,
            deadline=time.monotonic() + self.limits.turn_timeout_s,
            ledger=self.ledger,
            providers=self._providers,
        )
        candidates = [(self.provider_name, self.model), *self.fallbacks]
        request = replace(request, model=self.model)
        answer = await governed_call(scope, candidates, request, purpose=purpose)
        return answer.response
