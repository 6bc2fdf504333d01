"""Handlers seen blocking the event loop past their budget, remembered across processes.

A sync handler that overruns (a ``time.sleep`` in a ``def`` handler, a CPU-bound loop)
stalls every other coroutine of the host. The dispatcher refuses its late result (the
hook's failure policy applies); this module keeps a small note of it in the cache
directory (``$AGENTPLUG_CACHE_DIR``, see :func:`~agentplug.core.loader.default_cache_dir`)
so that ``agentplug plugins`` and ``agentplug doctor``, which run no handler themselves,
can warn about it later. The note is best effort: a cache directory that cannot be
written only loses the warning.
"""

from __future__ import annotations

import json
import logging
import os
import time
from pathlib import Path
from typing import Any

__all__ = ["OVERRUNS_FILE", "overrun_notes", "remember_overrun", "seen_overruns"]

log = logging.getLogger("agentplug.host")

OVERRUNS_FILE = "handler-overruns.json"


def _path(cache_dir: Path | None) -> Path:
    from agentplug.core.loader import default_cache_dir

    return (cache_dir or default_cache_dir()) / OVERRUNS_FILE


def seen_overruns(cache_dir: Path | None = None) -> dict[str, dict[str, dict[str, Any]]]:
    """``plugin_id -> hook -> {"elapsed_ms", "budget_ms", "seen_at"}`` (empty when none)."""
    try:
        data = json.loads(_path(cache_dir).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    if not isinstance(data, dict):
        return {}
    return {
        str(pid): {str(h): dict(v) for h, v in hooks.items() if isinstance(v, dict)}
        for pid, hooks in data.items()
        if isinstance(hooks, dict)
    }


def remember_overrun(
    plugin_id: str, hook: str, elapsed_s: float, budget_s: float, cache_dir: Path | None = None
) -> None:
    """Note that ``plugin_id``'s handler of ``hook`` ran ``elapsed_s`` inline (budget
    ``budget_s``); keeps the longest run seen."""
    path = _path(cache_dir)
    data = seen_overruns(cache_dir)
    previous = data.get(plugin_id, {}).get(hook, {})
    elapsed_ms = max(round(elapsed_s * 1000), int(previous.get("elapsed_ms", 0)))
    data.setdefault(plugin_id, {})[hook] = {
        "elapsed_ms": elapsed_ms,
        "budget_ms": round(budget_s * 1000),
        "seen_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps(data, indent=1, sort_keys=True), encoding="utf-8")
        os.replace(tmp, path)
    except OSError as exc:
        log.debug("handler overrun not remembered (%s); the warning is only logged", exc)


def overrun_notes(plugin_id: str, cache_dir: Path | None = None) -> list[str]:
    """One warning line per hook of ``plugin_id`` seen overrunning its budget."""
    notes = []
    for hook, seen in sorted(seen_overruns(cache_dir).get(plugin_id, {}).items()):
        notes.append(
            f"handler {hook!r} was seen blocking the event loop for {seen.get('elapsed_ms')} ms "
            f"(budget {seen.get('budget_ms')} ms, {seen.get('seen_at')}): its results are "
            "refused when it overruns; run blocking code with thread=True or make it async"
        )
    return notes
