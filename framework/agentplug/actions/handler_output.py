"""The result every custom-action handler (``http``, ``shell``, ``code``) returns."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

__all__ = ["HandlerOutput"]


class HandlerOutput(BaseModel):
    """Outcome of running a custom-action handler: ``ok`` flags success, ``output`` is its text.

    Mirrors the seed's ``{ ok: boolean; output: string }`` returned by ``buildTestHandler``.
    Frozen so a result can be shared between hooks without one of them altering it.
    """

    model_config = ConfigDict(frozen=True)

    ok: bool
    output: str
