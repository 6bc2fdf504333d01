"""Subprocess runner for pip and git (timeouts, quiet environment, readable errors)."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path

from agentplug.plugins.manager.reports import PluginManagerError

__all__ = ["CommandRunner"]

_GIT_IDENTITY: list[str] | None = None


def _git_identity() -> list[str]:
    """``-c user.name/-c user.email`` when git has no identity configured (CI, containers)."""
    global _GIT_IDENTITY
    if _GIT_IDENTITY is None:
        probe = subprocess.run(
            ["git", "config", "user.email"], capture_output=True, text=True, check=False
        )
        has_identity = probe.returncode == 0 and probe.stdout.strip()
        _GIT_IDENTITY = (
            []
            if has_identity
            else ["-c", "user.name=agentplug", "-c", "user.email=agentplug@localhost"]
        )
    return _GIT_IDENTITY


class CommandRunner:
    """Runs pip and git for the manager: a timeout on every command, no prompts, a quiet
    and stable environment, and a :class:`PluginManagerError` naming the failed command.

    Tests patch :meth:`run` to see or fake every command the manager runs."""

    def __init__(self, timeout_s: float) -> None:
        self.timeout_s = timeout_s

    def run(
        self,
        cmd: Sequence[str],
        cwd: Path | None = None,
        env: Mapping[str, str] | None = None,
        check: bool = True,
    ) -> subprocess.CompletedProcess[str]:
        """Run ``cmd``; with ``check``, a non-zero exit raises (with the output's tail)."""
        full_env = {
            **os.environ,
            "GIT_TERMINAL_PROMPT": "0",
            "PIP_DISABLE_PIP_VERSION_CHECK": "1",
            "PIP_NO_INPUT": "1",
            "LC_ALL": "C",
            **(env or {}),
        }
        try:
            done = subprocess.run(
                list(cmd),
                cwd=cwd,
                env=full_env,
                capture_output=True,
                text=True,
                timeout=self.timeout_s,
                check=False,
            )
        except FileNotFoundError:
            raise PluginManagerError(f"{cmd[0]!r} is not installed or not on PATH") from None
        except subprocess.TimeoutExpired:
            raise PluginManagerError(
                f"{_show(cmd)} did not finish within {self.timeout_s:g}s "
                "(actions.plugins.timeout_s)"
            ) from None
        if check and done.returncode != 0:
            detail = (done.stderr or done.stdout).strip().splitlines()
            tail = " | ".join(detail[-4:]) if detail else f"exit code {done.returncode}"
            raise PluginManagerError(f"{_show(cmd)} failed: {tail}")
        return done

    def git(
        self, cwd: Path, *args: str, check: bool = True, env: Mapping[str, str] | None = None
    ) -> subprocess.CompletedProcess[str]:
        """Run ``git *args`` in ``cwd`` (with a fallback identity for commits)."""
        return self.run(["git", *_git_identity(), *args], cwd=cwd, env=env, check=check)


def _show(cmd: Sequence[str]) -> str:
    shown = [Path(c).name if i == 0 else c for i, c in enumerate(cmd)]
    parts = [p for p in shown if not p.startswith("user.")]
    return " ".join(p for p in parts if p != "-c")[:200]
