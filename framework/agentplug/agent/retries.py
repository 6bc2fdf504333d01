"""Retries of a failed model call: which failures, how long to wait, when to give up.

``agent.retry`` (:class:`RetryConfig`) says how many attempts each model gets and how
long to wait between them. A failure is retried when it may pass by itself
(:func:`retryable`): HTTP 408, 409, 429 and 5xx, a connection failure, a timeout. The
wait grows exponentially from ``initial_backoff_s`` up to ``max_backoff_s``, with jitter
(a random part, so many clients rate-limited at once do not come back at once). A
server's ``Retry-After`` replaces it when it is at most ``max_retry_after_s``; a server
that asks for longer is not retried (the next fallback model is tried at once: waiting
longer than the operator allows is not honouring it).

Every wait is bounded by the turn's deadline (``agent.limits.turn_timeout_s``): a retry
that could not start before it is not made.
"""

from __future__ import annotations

import random
from collections.abc import Callable

from pydantic import BaseModel, ConfigDict, Field, model_validator
from pydantic.alias_generators import to_camel

from agentplug.agent.providers.base import ProviderError

__all__ = ["RETRYABLE_STATUSES", "RetryConfig", "backoff_s", "retryable"]

RETRYABLE_STATUSES = frozenset({408, 409, 429})
"""HTTP statuses below 500 worth another attempt (every 5xx is one too)."""


class RetryConfig(BaseModel):
    """``agent.retry``: the attempts each model gets and the waits between them."""

    model_config = ConfigDict(
        alias_generator=to_camel, populate_by_name=True, extra="forbid", frozen=True
    )

    attempts: int = Field(default=3, ge=1, le=10)
    """Attempts per model (1: no retry); then the next of ``agent.fallback_models``."""
    initial_backoff_s: float = Field(default=0.5, ge=0, le=60)
    """The wait before the second attempt; it doubles at each further attempt."""
    max_backoff_s: float = Field(default=8.0, ge=0, le=600)
    """The longest wait computed from the backoff."""
    max_retry_after_s: float = Field(default=30.0, ge=0, le=3600)
    """The longest ``Retry-After`` honoured; a server asking for longer is not retried."""

    @model_validator(mode="after")
    def _ordered(self) -> RetryConfig:
        if self.max_backoff_s < self.initial_backoff_s:
            raise ValueError(
                "max_backoff_s must be at least initial_backoff_s (the wait only grows)"
            )
        return self


def retryable(error: ProviderError) -> bool:
    """Whether ``error`` may pass by itself (see the module docstring)."""
    if error.kind in ("connection", "timeout"):
        return True
    status = error.status
    return (
        error.kind == "http"
        and status is not None
        and (status >= 500 or status in RETRYABLE_STATUSES)
    )


def backoff_s(
    config: RetryConfig, failed_attempts: int, rand: Callable[[], float] = random.random
) -> float:
    """The jittered wait after ``failed_attempts`` failures (1 for the first): half the
    exponential step, plus a random part of up to the other half."""
    step = min(config.max_backoff_s, config.initial_backoff_s * 2.0 ** (failed_attempts - 1))
    jitter: float = rand()
    return step / 2 + step / 2 * jitter
