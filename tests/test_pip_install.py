"""A real example package, installed with pip, is discovered through its entry point."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

PROBE = """
import json, sys
from agentplug import PluginHost
host = PluginHost({"plugins": {"allow": ["tool-preflight"]}})
records = host.load_installed(use_cache=False)
module = sys.modules["agentplug_tool_preflight"]
print(json.dumps({
    "plugins": [[r.plugin_id, r.distribution, r.bundled, r.hooks] for r in records],
    "errors": [str(e) for e in host.load_errors],
    "module_file": module.__file__,
}))
"""


def test_pip_installed_example_plugin_is_discovered_by_entry_point(tmp_path: Path) -> None:
    target = tmp_path / "site"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--quiet",
            "--no-deps",
            "--no-build-isolation",
            "--disable-pip-version-check",
            "--target",
            str(target),
            str(ROOT / "example_plugins" / "tool-preflight"),
        ],
        check=True,
        capture_output=True,
    )
    env = {**os.environ, "PYTHONPATH": str(target), "AGENTPLUG_CACHE_DIR": str(tmp_path / "c")}
    probe = subprocess.run(
        [sys.executable, "-c", PROBE], env=env, capture_output=True, text=True, check=True
    )
    report = json.loads(probe.stdout)
    assert report["errors"] == []
    [[plugin_id, distribution, bundled, hooks]] = report["plugins"]
    assert plugin_id == "tool-preflight"
    assert bundled is False
    assert "before_tool_call" in hooks
    assert distribution is not None and "preflight" in distribution
    assert Path(report["module_file"]).is_relative_to(target)
