"""The trace of one flow: its steps, each logged as one single-line JSON record."""

from __future__ import annotations

import json
import logging
import time
import uuid
from typing import Literal, TypeAlias

from pydantic import BaseModel, Field

__all__ = ["ActionTrace", "StepStatus", "TraceStep"]

logger = logging.getLogger("agentplug.actions")

StepStatus: TypeAlias = Literal["ok", "skipped", "failed", "error"]
"""``ok`` done; ``skipped`` not applicable; ``failed`` a rule said no; ``error`` code raised."""


class TraceStep(BaseModel):
    """One step of a flow: what ran, how it ended, why, and how long it took."""

    name: str
    status: StepStatus
    detail: str = ""
    duration_ms: float = 0.0
    action: str | None = None


class ActionTrace(BaseModel):
    """Every step of one flow, in order, under a ``flow_id`` that correlates the log records."""

    flow_id: str = Field(default_factory=lambda: uuid.uuid4().hex[:12])
    steps: list[TraceStep] = Field(default_factory=list)

    def record(
        self,
        name: str,
        status: StepStatus,
        detail: str,
        started: float,
        action: str | None = None,
    ) -> TraceStep:
        """Append a step that started at ``started`` (``time.perf_counter()``) and log it."""
        step = TraceStep(
            name=name,
            status=status,
            detail=detail,
            duration_ms=round((time.perf_counter() - started) * 1000.0, 3),
            action=action,
        )
        self.steps.append(step)
        payload = {"event": "action_step", "flow_id": self.flow_id, **step.model_dump()}
        level = logging.INFO if status in ("ok", "skipped") else logging.WARNING
        # json.dumps escapes newlines, so each record stays on one line for log shippers.
        logger.log(level, json.dumps(payload, default=str), extra={"action_step": payload})
        return step

    def step(self, name: str) -> TraceStep | None:
        """The last step called ``name``, or ``None``."""
        return next((s for s in reversed(self.steps) if s.name == name), None)
