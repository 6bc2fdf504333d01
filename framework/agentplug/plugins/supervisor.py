"""The restart supervisor: re-run the agent while it asks to be restarted.

In CLI mode ``RESTART_AGENT`` ends the process with exit code 75 (``EX_TEMPFAIL``): "run me
again". :func:`supervise` runs a command, and runs it again each time it exits with 75 (after
``backoff_s``, at most ``max_restarts`` times); any other exit code is returned as is. The
child sees ``AGENTPLUG_SUPERVISED=1`` (so its restart controller picks CLI mode) and
``AGENTPLUG_RESTART_COUNT``. ``SIGTERM``/``SIGINT``/``SIGHUP`` received by the supervisor are
forwarded to the child, and no restart follows them.

When ``state_dir`` is given and agentplug itself has been ejected there
(``agentplug plugin eject-core``), the ejected source's import roots are prepended to the
child's ``PYTHONPATH``, so the restarted agent runs the local copy.

Command line: ``agentplug supervise [--max-restarts N] [--backoff S] -- CMD ...``.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import FrameType
from typing import Any

__all__ = [
    "RESTART_EXIT_CODE",
    "SUPERVISED_ENV",
    "add_supervisor_command",
    "supervise",
]

log = logging.getLogger("agentplug.supervisor")

RESTART_EXIT_CODE = 75
"""``EX_TEMPFAIL``: the child asks to be run again."""
SUPERVISED_ENV = "AGENTPLUG_SUPERVISED"
"""Set to ``"1"`` in the child's environment."""
RESTART_COUNT_ENV = "AGENTPLUG_RESTART_COUNT"


def _child_env(
    base: Mapping[str, str] | None, restarts: int, state_dir: str | Path | None
) -> dict[str, str]:
    env = dict(os.environ if base is None else base)
    env[SUPERVISED_ENV] = "1"
    env[RESTART_COUNT_ENV] = str(restarts)
    if state_dir is not None:
        from agentplug.plugins.manager import core_import_roots

        roots = [str(p) for p in core_import_roots(Path(state_dir))]
        if roots:
            current = env.get("PYTHONPATH")
            env["PYTHONPATH"] = os.pathsep.join(roots + ([current] if current else []))
    return env


def supervise(
    argv: Sequence[str],
    *,
    max_restarts: int = 10,
    backoff_s: float = 1.0,
    env: Mapping[str, str] | None = None,
    cwd: str | Path | None = None,
    state_dir: str | Path | None = None,
) -> int:
    """Run ``argv``; run it again while it exits with 75; return its final exit code.

    After ``max_restarts`` restarts, a further exit 75 is returned (the supervisor gives
    up, and says so on the ``agentplug.plugins.supervisor`` logger). A child killed by signal N
    yields ``128 + N``. A command that cannot be started yields 127.
    """
    if not argv:
        raise ValueError("supervise needs a command to run")
    if max_restarts < 0:
        raise ValueError("max_restarts must be >= 0")
    restarts = 0
    stopping: list[int] = []
    current: list[subprocess.Popen[bytes]] = []

    def forward(signum: int, frame: FrameType | None) -> None:
        stopping.append(signum)
        for child in current:
            if child.poll() is None:
                child.send_signal(signum)

    previous: dict[int, Any] = {}
    wanted: list[int] = [signal.SIGTERM, signal.SIGINT]
    if hasattr(signal, "SIGHUP"):
        wanted.append(signal.SIGHUP)
    try:
        import threading

        if threading.current_thread() is threading.main_thread():
            for sig in wanted:
                previous[sig] = signal.signal(sig, forward)
        while True:
            try:
                # Own process group: a terminal's Ctrl+C reaches the supervisor only, which
                # forwards it once (a doubled SIGINT would make the agent exit at once).
                child = subprocess.Popen(
                    list(argv),
                    env=_child_env(env, restarts, state_dir),
                    cwd=cwd,
                    process_group=0 if os.name == "posix" else None,
                )
            except OSError as exc:
                log.error("supervisor: cannot start %s: %s", argv[0], exc)
                return 127
            current[:] = [child]
            code = child.wait()
            current.clear()
            if code < 0:
                code = 128 - code
            if code != RESTART_EXIT_CODE or stopping:
                return code
            if restarts >= max_restarts:
                log.error(
                    "supervisor: the agent asked for a restart again, but max_restarts=%d is "
                    "reached; giving up with exit code %d",
                    max_restarts,
                    code,
                )
                return code
            restarts += 1
            log.warning(
                "supervisor: agent exited with %d (restart requested); restart %d/%d in %.1fs",
                code,
                restarts,
                max_restarts,
                backoff_s,
            )
            if backoff_s > 0:
                time.sleep(backoff_s)
            if stopping:
                return code
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _cmd_supervise(args: argparse.Namespace) -> int:
    command = list(args.cmd)
    if command and command[0] == "--":
        command = command[1:]
    if not command:
        print("agentplug supervise: give the command to run after --", file=sys.stderr)
        return 2
    if not logging.getLogger().handlers:
        logging.basicConfig(level=logging.INFO, format="%(message)s")
    state_dir = args.state_dir or os.environ.get("AGENTPLUG_STATE_DIR")
    return supervise(
        command,
        max_restarts=args.max_restarts,
        backoff_s=args.backoff,
        state_dir=state_dir,
    )


def add_supervisor_command(subparsers: Any) -> argparse.ArgumentParser:
    """Add ``agentplug supervise [--max-restarts N] [--backoff S] -- CMD ...``."""
    p: argparse.ArgumentParser = subparsers.add_parser(
        "supervise",
        help="run a command and restart it while it exits with 75 (RESTART_AGENT)",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--max-restarts", type=int, default=10, help="give up after N restarts")
    p.add_argument("--backoff", type=float, default=1.0, help="seconds between restarts")
    p.add_argument(
        "--state-dir",
        default=None,
        help="state folder; an ejected agentplug core there is put on the child's PYTHONPATH "
        "(default: $AGENTPLUG_STATE_DIR)",
    )
    p.add_argument("cmd", nargs=argparse.REMAINDER, help="-- CMD [ARGS...]")
    p.set_defaults(func=_cmd_supervise)
    return p
