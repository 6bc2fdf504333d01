"""Start-up cost: ``import agentplug`` and ``agentplug --help`` next to pluggy and pydantic.

Each command runs in a fresh interpreter (``python -c ...``), the variants interleaved
round-robin, ``repeats`` times; the time is the subprocess wall time (spawn included), the
reported value the median. ``python -c pass`` is the floor every row includes.

* ``import agentplug``, ``import pluggy``, ``import pydantic``: wall time and the number of
  modules in ``sys.modules`` afterwards;
* ``agentplug --help``: the console script next to this interpreter (or ``python -m
  agentplug.cli`` when there is none).

Targets (issue 14): ``import agentplug`` <= 2x ``import pydantic``; ``agentplug --help``
<= 3x ``import pydantic``; ``import agentplug`` loads no action, sandbox, API, HTTP or
plugin-manager module (the offenders are listed).

Usage: ``python bench/bench_startup.py [--quick]``; importable as ``run(quick=False)``.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

TARGET_IMPORT = 2.0
TARGET_HELP = 3.0
# Prefixes ``import agentplug`` must not load (the heavy optional layers).
HEAVY = (
    "agentplug.actions",
    "agentplug.sandbox",
    "agentplug.api",
    "agentplug.plugins",
    "agentplug.agent",
    "httpx",
    "httpcore",
    "starlette",
    "uvicorn",
)


def _cli() -> list[str]:
    script = Path(sys.executable).with_name("agentplug")
    return [str(script)] if script.exists() else [sys.executable, "-m", "agentplug.cli"]


def _commands() -> dict[str, list[str]]:
    py = sys.executable
    return {
        "python": [py, "-c", "pass"],
        "pluggy": [py, "-c", "import pluggy"],
        "pydantic": [py, "-c", "import pydantic"],
        "agentplug": [py, "-c", "import agentplug"],
        "agentplug_help": [*_cli(), "--help"],
    }


def _wall(cmd: list[str]) -> float:
    started = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - started


def _modules(name: str) -> dict[str, Any]:
    code = (
        "import json, sys\n"
        f"before = set(sys.modules)\nimport {name}\n"
        "print(json.dumps({'total': len(sys.modules), 'added': sorted(set(sys.modules) - before)}))"
    )
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True)
    data: dict[str, Any] = json.loads(out.stdout)
    return data


def run(quick: bool = False) -> dict[str, Any]:
    """Median wall times (ms), module counts, ratios against ``import pydantic``, targets."""
    commands = _commands()
    repeats = 5 if quick else 15
    for cmd in commands.values():  # warm the page cache and the bytecode
        _wall(cmd)
    samples: dict[str, list[float]] = {name: [] for name in commands}
    for _ in range(repeats):
        for name, cmd in commands.items():
            samples[name].append(_wall(cmd))
    ms = {name: statistics.median(values) * 1000 for name, values in samples.items()}
    paired = {
        name: statistics.median(
            v / b for v, b in zip(samples[name], samples["pydantic"], strict=True)
        )
        for name in ("agentplug", "agentplug_help", "pluggy")
    }
    modules = {name: _modules(name) for name in ("agentplug", "pluggy", "pydantic")}
    heavy = [m for m in modules["agentplug"]["added"] if m.startswith(HEAVY)]
    return {
        "repeats": repeats,
        "wall_ms": ms,
        "wall_ms_min": {name: min(values) * 1000 for name, values in samples.items()},
        "ratio_vs_pydantic": paired,
        "modules": {name: data["total"] for name, data in modules.items()},
        "modules_added": {name: len(data["added"]) for name, data in modules.items()},
        "heavy_modules_loaded_by_import_agentplug": heavy,
        "targets": {
            "import_max": TARGET_IMPORT,
            "import_met": paired["agentplug"] <= TARGET_IMPORT,
            "help_max": TARGET_HELP,
            "help_met": paired["agentplug_help"] <= TARGET_HELP,
            "no_heavy_modules_met": not heavy,
        },
        "quick": quick,
    }


def format_table(result: dict[str, Any]) -> str:
    """The human-readable table of a :func:`run` result."""
    ms, ratio, mods = result["wall_ms"], result["ratio_vs_pydantic"], result["modules"]
    added = result["modules_added"]
    lines = [
        f"start-up (fresh interpreter, median of {result['repeats']}; python -c pass = "
        f"{ms['python']:.1f} ms)",
        f"{'command':<22} {'wall ms':>8} {'vs pydantic':>12} {'modules':>8} {'added':>6}",
    ]
    for name, label in (
        ("pydantic", "import pydantic"),
        ("pluggy", "import pluggy"),
        ("agentplug", "import agentplug"),
        ("agentplug_help", "agentplug --help"),
    ):
        r = f"{ratio[name]:.2f}x" if name in ratio else "1.00x"
        m = f"{mods[name]:>8} {added[name]:>6}" if name in mods else f"{'-':>8} {'-':>6}"
        lines.append(f"{label:<22} {ms[name]:>8.1f} {r:>12} {m}")
    t = result["targets"]
    lines.append(
        f"  target import agentplug <= {t['import_max']:.0f}x pydantic: "
        f"{ratio['agentplug']:.2f}x {'MET' if t['import_met'] else 'MISSED'}"
    )
    lines.append(
        f"  target agentplug --help <= {t['help_max']:.0f}x pydantic: "
        f"{ratio['agentplug_help']:.2f}x {'MET' if t['help_met'] else 'MISSED'}"
    )
    heavy = result["heavy_modules_loaded_by_import_agentplug"]
    lines.append(
        "  import agentplug loads no action/sandbox/API/HTTP/plugin-manager module: "
        + ("MET" if not heavy else f"MISSED ({len(heavy)}: {', '.join(heavy[:6])} ...)")
    )
    return "\n".join(lines)


if __name__ == "__main__":
    print(format_table(run(quick="--quick" in sys.argv[1:])))
