"""Entry-point discovery: a fresh ``importlib_metadata`` scan vs agentplug's warm cache.

Builds a throwaway "site" directory with 300 fake installed distributions
(``<name>-1.0.dist-info/METADATA``; a few also carry an ``entry_points.txt`` with an
``[agentplug]`` group) and puts it first on ``PYTHONPATH`` of fresh ``python -c``
subprocesses, so neither this process's import state nor its metadata caches are involved
and nothing is installed anywhere. Each subprocess times only the call (interpreter start
and imports excluded):

* ``fresh``: ``importlib_metadata.entry_points(group="agentplug")``, first call in a new
  process (what every start pays without the cache);
* ``fresh_discover``: ``agentplug.core.loader.discover("agentplug", use_cache=False)`` (the same
  scan plus reading each hit's ``Name``/``Version``; informational);
* ``warm``: ``agentplug.core.loader.discover("agentplug", cache_dir=<tmp>)`` after the cache was
  primed once; ``loader._scan`` is replaced by a function that raises, so a cache miss
  cannot pass silently as a "warm" number.

The median over several processes of each kind is reported, with their ratio (target:
warm at least 3x faster than fresh) and a check that the cached entry points equal the
fresh ones. Usage: ``python bench/bench_discovery.py [--quick]``; importable as
``run(quick=False) -> dict``.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path
from typing import Any

N_DISTS = 300
PLUGIN_EVERY = 50  # dists 0, 50, 100, ... carry an [agentplug] entry point (6 of 300)
TARGET_SPEEDUP = 3.0

_FRESH = textwrap.dedent(
    """
    import json, time
    import importlib_metadata
    t0 = time.perf_counter()
    eps = importlib_metadata.entry_points(group="agentplug")
    dt = time.perf_counter() - t0
    names = sorted((ep.name, ep.value) for ep in eps)
    print(json.dumps({"seconds": dt, "entry_points": names}))
    """
)

_FRESH_DISCOVER = textwrap.dedent(
    """
    import json, time
    from agentplug.core import loader
    t0 = time.perf_counter()
    found = loader.discover("agentplug", use_cache=False)
    dt = time.perf_counter() - t0
    print(json.dumps({"seconds": dt, "found": [vars(p) for p in found]}))
    """
)

_WARM = textwrap.dedent(
    """
    import json, sys, time
    from pathlib import Path
    from agentplug.core import loader
    cache_dir = Path(sys.argv[1])
    if sys.argv[2] == "prime":
        found = loader.discover("agentplug", cache_dir=cache_dir)
        print(json.dumps({"seconds": None, "found": [vars(p) for p in found]}))
        raise SystemExit(0)
    def _no_scan(group):
        raise AssertionError("cache miss: the warm run rescanned the environment")
    loader._scan = _no_scan
    t0 = time.perf_counter()
    found = loader.discover("agentplug", cache_dir=cache_dir)
    dt = time.perf_counter() - t0
    print(json.dumps({"seconds": dt, "found": [vars(p) for p in found]}))
    """
)


def _make_site(site: Path, n: int = N_DISTS) -> list[tuple[str, str]]:
    """Write ``n`` fake distributions; return the expected ``(name, value)`` entry points."""
    expected: list[tuple[str, str]] = []
    for i in range(n):
        name = f"benchdist_{i:03d}"
        info = site / f"{name}-1.0.dist-info"
        info.mkdir(parents=True)
        (info / "METADATA").write_text(
            f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\nSummary: fake dist {i}\n",
            encoding="utf-8",
        )
        if i % PLUGIN_EVERY == 0:
            ep_name = f"bench_plugin_{i:03d}"
            value = f"{name}_mod:plugin"
            (info / "entry_points.txt").write_text(
                f"[agentplug]\n{ep_name} = {value}\n\n[console_scripts]\n{name} = {name}:main\n",
                encoding="utf-8",
            )
            expected.append((ep_name, value))
    return expected


def _python(code: str, env: dict[str, str], cwd: Path, *args: str) -> dict[str, Any]:
    proc = subprocess.run(
        [sys.executable, "-c", code, *args],
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"discovery subprocess failed:\n{proc.stderr.strip()}")
    result: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    return result


def _key(found: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    return sorted(
        (p["name"], p["value"], p["group"], p["distribution"], p["version"]) for p in found
    )


def run(quick: bool = False) -> dict[str, Any]:
    """Measure fresh scan vs warm cache in fresh subprocesses; return a JSON-able dict.

    Keys: ``fresh_ms``, ``fresh_discover_ms``, ``warm_ms`` (medians, call only),
    ``speedup`` (fresh / warm), ``speedup_vs_discover`` (fresh_discover / warm),
    ``cache_equals_fresh`` and ``meets_target``.
    """
    repeats = 3 if quick else 9
    with tempfile.TemporaryDirectory(prefix="agentplug-bench-") as tmp:
        root = Path(tmp)
        site, cache_dir, cwd = root / "site", root / "cache", root / "cwd"
        for d in (site, cache_dir, cwd):
            d.mkdir()
        expected = _make_site(site)
        env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
        env["PYTHONPATH"] = str(site)
        env["PYTHONDONTWRITEBYTECODE"] = "1"
        env.pop("AGENTPLUG_CACHE_DIR", None)

        primed = _python(_WARM, env, cwd, str(cache_dir), "prime")
        # Warm-up (OS page cache, .pyc of the interpreter's own modules), not recorded.
        _python(_FRESH, env, cwd)
        _python(_WARM, env, cwd, str(cache_dir), "warm")

        fresh: list[float] = []
        fresh_discover: list[float] = []
        warm: list[float] = []
        fresh_eps: list[tuple[str, str]] = []
        fresh_found: list[dict[str, Any]] = []
        warm_found: list[dict[str, Any]] = []
        for _ in range(repeats):  # interleaved, so machine noise hits all three alike
            out = _python(_FRESH, env, cwd)
            fresh.append(out["seconds"])
            fresh_eps = [tuple(x) for x in out["entry_points"]]
            out = _python(_FRESH_DISCOVER, env, cwd)
            fresh_discover.append(out["seconds"])
            fresh_found = out["found"]
            try:
                out = _python(_WARM, env, cwd, str(cache_dir), "warm")
            except RuntimeError as exc:
                if "cache miss" not in str(exc):
                    raise
                # The shared environment changed under us (someone installed a package):
                # the fingerprint no longer matches, exactly as designed. Re-prime once.
                primed = _python(_WARM, env, cwd, str(cache_dir), "prime")
                out = _python(_WARM, env, cwd, str(cache_dir), "warm")
            warm.append(out["seconds"])
            warm_found = out["found"]

    ours = [x for x in fresh_eps if x in expected]
    result: dict[str, Any] = {
        "distributions": N_DISTS,
        "fake_entry_points": len(expected),
        "entry_points_found": len(fresh_eps),
        "repeats": repeats,
        "fresh_ms": statistics.median(fresh) * 1e3,
        "fresh_discover_ms": statistics.median(fresh_discover) * 1e3,
        "warm_ms": statistics.median(warm) * 1e3,
        "fresh_ms_all": [round(x * 1e3, 3) for x in fresh],
        "warm_ms_all": [round(x * 1e3, 3) for x in warm],
        "all_fakes_found": sorted(ours) == sorted(expected),
        "cache_equals_fresh": (
            _key(warm_found) == _key(fresh_found) == _key(primed["found"])
            and sorted((p["name"], p["value"]) for p in warm_found) == sorted(fresh_eps)
        ),
        "target_speedup": TARGET_SPEEDUP,
    }
    result["speedup"] = result["fresh_ms"] / result["warm_ms"]
    result["speedup_vs_discover"] = result["fresh_discover_ms"] / result["warm_ms"]
    result["meets_target"] = result["speedup"] >= TARGET_SPEEDUP and result["cache_equals_fresh"]
    return result


def format_table(result: dict[str, Any]) -> str:
    """The human-readable table of a :func:`run` result."""
    r = result
    return "\n".join(
        [
            f"entry-point discovery, {r['distributions']} fake dists + the venv "
            f"({r['entry_points_found']} agentplug entry points; median of {r['repeats']} "
            "fresh processes, call only)",
            f"  fresh importlib_metadata.entry_points(group=...) {r['fresh_ms']:>9.3f} ms",
            f"  fresh discover(use_cache=False)                  {r['fresh_discover_ms']:>9.3f} ms",
            f"  warm discover(cache_dir=...)                     {r['warm_ms']:>9.3f} ms",
            f"  speedup fresh/warm {r['speedup']:.1f}x (target >= {r['target_speedup']:.0f}x), "
            f"cached == fresh: {r['cache_equals_fresh']}, all fakes found: "
            f"{r['all_fakes_found']} -> {'MET' if r['meets_target'] else 'MISSED'}",
        ]
    )


if __name__ == "__main__":
    print(format_table(run(quick="--quick" in sys.argv[1:])))
