"""Deprecated: moved to :mod:`agentplug.config.lookup` (the config layer, below the core).

Importing this module still works for one release, with a ``DeprecationWarning``; every
name resolves to the one in the new module (the same objects).
"""

from __future__ import annotations

import warnings
from typing import Any

from agentplug.config import lookup as _moved_to
from agentplug.config.lookup import *  # noqa: F403
from agentplug.config.lookup import __all__ as __all__

warnings.warn(
    "agentplug.core.config_lookup moved to agentplug.config.lookup; import it from there",
    DeprecationWarning,
    stacklevel=2,
)


def __getattr__(name: str) -> Any:
    return getattr(_moved_to, name)
