"""Deprecated: moved to :mod:`agentplug.config.model` (the config layer, below the core).

Importing this module still works for one release, with a ``DeprecationWarning``; every
name resolves to the one in the new module (the same objects).
"""

from __future__ import annotations

import warnings
from typing import Any

from agentplug.config import model as _moved_to
from agentplug.config.model import *  # noqa: F403
from agentplug.config.model import __all__ as __all__

warnings.warn(
    "agentplug.core.config moved to agentplug.config.model; import it from there",
    DeprecationWarning,
    stacklevel=2,
)


def __getattr__(name: str) -> Any:
    return getattr(_moved_to, name)
