"""``agentplug serve``: run the local control API for a host built from the config.

``agentplug serve [--config F] [--host H] [--port P] [--token-file F] [--state-dir D]``

1. refuses any bind address that is not loopback (``127.0.0.1`` by default, ``::1`` or
   ``localhost``): the API runs shell commands and installs packages;
2. builds a :class:`~agentplug.Gateway` from the config (``--config``, else
   ``$AGENTPLUG_CONFIG``, else ``./agentplug.{toml,yaml,json}``; the ``customActions`` of a
   JSON config are what the CRUD endpoints edit) with its
   state store in the state directory (``--state-dir``, else ``$AGENTPLUG_STATE_DIR``, else
   ``runtime.state_dir``, else ``.agentplug-state``; ``$AGENTPLUG_STATE_URL`` or ``state.url``
   names a shared store instead, which must be reachable: otherwise serve exits 1 with one
   line naming the store and the cause) and a
   :class:`~agentplug.services.approvals.ProgrammaticResolver` answering its approvals,
   loads the installed plugins and the actions, and fires ``gateway_start``;
3. reads the bearer token from ``--token-file``, or generates a random one and writes it to
   ``<state_dir>/api-token`` (mode 0600);
4. serves with uvicorn (the API under ``/api/``, the control room page under ``/ui/``,
   docs/ui.md) until SIGTERM/SIGINT, which the
   :class:`~agentplug.services.lifecycle.ShutdownFinalizer` turns into a bounded ``gateway_stop``
   before the server stops.

This module imports without the ``api`` extra; the command says which extra to install
when Starlette or uvicorn is missing. ``python -m agentplug.api.serve`` runs it standalone.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import secrets
import socket
import stat
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agentplug.api.extra import API_EXTRA, missing_api_modules
from agentplug.api.loopback import is_loopback_name
from agentplug.config.lookup import CONFIG_HELP
from agentplug.config.model import AgentplugConfig
from agentplug.core.errors import AgentplugError, one_line
from agentplug.store.location import STATE_DIR_HELP, state_location

if TYPE_CHECKING:
    from starlette.applications import Starlette

    from agentplug.gateway import Gateway

__all__ = [
    "DEFAULT_PORT",
    "TOKEN_FILE",
    "add_serve_command",
    "bind_loopback",
    "build_gateway",
    "loopback_bind_address",
    "main",
    "read_token",
    "serve_state_dir",
    "socket_url",
    "write_token",
]

DEFAULT_PORT = 8731
"""Port of ``agentplug serve`` when ``--port`` is not given (``0`` picks a free one)."""
TOKEN_FILE = "api-token"
"""Name of the generated token file in the state directory."""
CONFIG_ENV = "AGENTPLUG_CONFIG"
STATE_DIR_ENV = "AGENTPLUG_STATE_DIR"
DEFAULT_STATE_DIR = ".agentplug-state"
"""The commands' state folder when none is chosen (:mod:`agentplug.store.location`)."""

_EXIT_USAGE = 2
_EXIT_FAILED = 1


class ServeError(Exception):
    """A problem that stops ``agentplug serve`` before it serves (message for the operator)."""


def loopback_bind_address(host: str) -> str:
    """The address to bind for ``--host`` (``localhost`` -> ``127.0.0.1``).

    Raises :class:`ServeError` for anything that is not the loopback interface.
    """
    value = host.strip()
    if value.startswith("[") and value.endswith("]"):
        value = value[1:-1]
    if not is_loopback_name(value):
        raise ServeError(
            f"refusing to bind the control API to {host!r}: it runs shell commands and "
            "installs packages, so it only listens on the loopback interface; use "
            "--host 127.0.0.1 (default), ::1 or localhost, and reach it remotely through an "
            "SSH tunnel if you must"
        )
    return "127.0.0.1" if value.lower().rstrip(".") == "localhost" else value


def write_token(state_dir: Path) -> tuple[str, Path]:
    """Generate a random token and write it to ``<state_dir>/api-token`` (mode 0600)."""
    token = secrets.token_urlsafe(32)
    path = state_dir / TOKEN_FILE
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.fchmod(fd, 0o600)  # an older file may have had wider permissions
        os.write(fd, (token + "\n").encode("ascii"))
    finally:
        os.close(fd)
    return token, path


def read_token(path: Path) -> str:
    """The bearer token in ``--token-file`` (:class:`ServeError` when unreadable or short;
    a warning when other users can read the file)."""
    try:
        token = path.read_text(encoding="utf-8").strip()
    except OSError as exc:
        raise ServeError(f"cannot read --token-file {str(path)!r}: {exc.strerror or exc}") from None
    if len(token) < 16:
        raise ServeError(
            f"the token in {str(path)!r} is shorter than 16 characters; use a long random "
            "token (or omit --token-file to have one generated)"
        )
    if stat.S_IMODE(path.stat().st_mode) & 0o077:
        print(
            f"agentplug serve: warning: {path} is readable by other users; chmod 600 it",
            file=sys.stderr,
        )
    return token


def build_gateway(config: AgentplugConfig, state_dir: Path, store: Any = None) -> Gateway:
    """The gateway ``agentplug serve`` runs: state, plugin manager and terminal runs rooted
    at ``state_dir`` (unless ``actions.shell.cwd`` says otherwise), approvals answered
    through the control API. ``store`` is the state store already opened (default:
    ``state.url``, else SQLite in ``state_dir``). Raises
    :class:`~agentplug.core.errors.ConfigError` for bad settings."""
    from agentplug.gateway import Gateway
    from agentplug.services.approvals import ProgrammaticResolver

    return Gateway(config, state_dir=state_dir, store=store, resolver=ProgrammaticResolver())


def serve_state_dir(value: str | None, config: AgentplugConfig) -> Path:
    """The state folder of a serving command, by the rule every command follows
    (:func:`~agentplug.store.location.state_location`: ``--state-dir``,
    ``$AGENTPLUG_STATE_DIR``, ``runtime.state_dir``, else ``.agentplug-state``), created
    mode 0700 (the API token goes there)."""
    location = state_location(config, state_dir=value, default_dir=DEFAULT_STATE_DIR)
    path = location.state_dir or Path(DEFAULT_STATE_DIR)
    try:
        path.mkdir(parents=True, exist_ok=True, mode=0o700)
    except OSError as exc:
        raise ServeError(f"cannot create state directory {str(path)!r}: {exc}") from None
    return path


class _StoreRefused(Exception):
    """The state store cannot be opened: serving without it would lose decisions."""

    def __init__(self, message: str, code: int) -> None:
        super().__init__(message)
        self.code = code


def _open_store(config: AgentplugConfig, state_dir: Path) -> Any:
    """The host's state store, opened before anything is served (``state.url``, else
    SQLite in ``state_dir``): an unreachable database stops the start with one line."""
    from agentplug.store import StateStoreUnavailable, StateUrlError, store_from_config

    try:
        return store_from_config(config, state_dir)
    except StateUrlError as exc:
        raise _StoreRefused(str(exc), _EXIT_USAGE) from None
    except StateStoreUnavailable as exc:
        raise _StoreRefused(str(exc), _EXIT_FAILED) from None


def bind_loopback(address: str, port: int) -> socket.socket:
    """A listening socket on ``address`` (already checked to be loopback) and ``port``."""
    family = socket.AF_INET6 if ":" in address else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if family == socket.AF_INET6:
            sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
        sock.bind((address, port))
        sock.listen(128)
    except OSError as exc:
        sock.close()
        raise ServeError(f"cannot listen on {address} port {port}: {exc.strerror or exc}") from None
    return sock


def socket_url(sock: socket.socket) -> str:
    """``http://address:port`` of a listening socket."""
    address, port = sock.getsockname()[:2]
    shown = f"[{address}]" if ":" in address else address
    return f"http://{shown}:{port}"


async def _serve(
    gateway: Gateway, app: Starlette, sock: socket.socket, token_path: Path | None
) -> int:
    import uvicorn

    from agentplug.services.lifecycle import ShutdownFinalizer

    class _Server(uvicorn.Server):
        # The ShutdownFinalizer owns SIGTERM/SIGINT (bounded gateway_stop first); uvicorn
        # must not replace its handlers, so it stops when we set ``should_exit``.
        @contextlib.contextmanager
        def capture_signals(self) -> Iterator[None]:
            yield

    config = uvicorn.Config(
        app,
        lifespan="on",
        log_level="warning",
        # The access log would record WebSocket URLs, whose ``?token=`` is the API token.
        access_log=False,
        timeout_graceful_shutdown=5,
    )
    server = _Server(config)
    finalizer = ShutdownFinalizer(
        gateway.host, gateway.active_sessions, cron=gateway.cron, sessions=gateway.sessions
    )
    finalizer.install()
    serving = asyncio.ensure_future(server.serve(sockets=[sock]))
    stopping = asyncio.ensure_future(finalizer.wait())
    while not server.started and not serving.done():
        await asyncio.sleep(0.02)
    if server.started:
        where = f" (token in {token_path})" if token_path is not None else ""
        print(f"agentplug API listening on {socket_url(sock)}{where}", flush=True)
        print(f"control room: {socket_url(sock)}/ui/", flush=True)
    try:
        await asyncio.wait({serving, stopping}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        api = getattr(app.state, "api", None)
        if api is not None:  # open event streams would hold the graceful shutdown
            await api.events.aclose()
        server.should_exit = True
        with contextlib.suppress(Exception):
            await serving
        if not stopping.done():
            stopping.cancel()
            await finalizer.finalize("shutdown")
        finalizer.uninstall()
        await gateway.aclose()
        gateway.store.close()  # opened by serve before the gateway, closed by it too
    if serving.exception() is not None or not server.started:
        print("agentplug serve: the server stopped with an error (see above)", file=sys.stderr)
        return _EXIT_FAILED
    return 0


def _editable_config(path: Path | None) -> str | None:
    """The config file the custom-action endpoints may rewrite: JSON only (a TOML or YAML
    file is read, never rewritten as JSON; its custom actions are then read-only)."""
    if path is None:
        return None
    if path.suffix.lower() == ".json":
        return str(path)
    print(
        f"agentplug serve: note: {path} is not JSON; the custom-action endpoints will not "
        "edit it (use a JSON config to edit custom actions through the API)",
        file=sys.stderr,
    )
    return None


def cmd_serve(args: argparse.Namespace) -> int:
    """Run ``agentplug serve`` with parsed arguments; return the exit code."""
    try:
        address = loopback_bind_address(args.host)
        if not 0 <= args.port <= 65535:
            raise ServeError(f"--port {args.port} is not a TCP port (0-65535; 0 picks a free one)")
    except ServeError as exc:
        print(f"agentplug serve: error: {one_line(exc)}", file=sys.stderr)
        return _EXIT_USAGE
    missing = missing_api_modules()
    if missing:
        print(
            f"agentplug serve: the control API needs the optional {API_EXTRA!r} extra "
            f"(missing: {', '.join(missing)}); install it with: "
            f"pip install 'agentplug[{API_EXTRA}]'",
            file=sys.stderr,
        )
        return _EXIT_FAILED
    try:
        from agentplug.gateway.operator_config import read_operator_config

        config, source = read_operator_config(
            args.config, verbose=bool(getattr(args, "verbose", 0))
        )
        config_path = _editable_config(source.path)
        state_dir = serve_state_dir(args.state_dir, config)
        store = _open_store(config, state_dir)
        location = state_location(config, state_dir=args.state_dir, default_dir=DEFAULT_STATE_DIR)
        print(f"agentplug serve: {location.describe()}", file=sys.stderr, flush=True)
        if args.token_file:
            token, token_path = read_token(Path(args.token_file)), None
        else:
            token, token_path = write_token(state_dir)
        sock = bind_loopback(address, args.port)
    except (ServeError, AgentplugError) as exc:
        print(f"agentplug serve: error: {one_line(exc)}", file=sys.stderr)
        return _EXIT_USAGE if isinstance(exc, AgentplugError) else _EXIT_FAILED
    except _StoreRefused as exc:
        print(f"agentplug serve: error: {one_line(exc)}", file=sys.stderr)
        return exc.code
    try:
        return asyncio.run(_run(config, config_path, state_dir, token, token_path, sock, store))
    except AgentplugError as exc:  # invalid settings found while building or loading
        print(f"agentplug serve: error: {one_line(exc)}", file=sys.stderr)
        return _EXIT_USAGE
    finally:
        sock.close()


async def _run(
    config: AgentplugConfig,
    config_path: str | None,
    state_dir: Path,
    token: str,
    token_path: Path | None,
    sock: socket.socket,
    store: Any = None,
) -> int:
    from agentplug.api.app import create_app

    gateway = build_gateway(config, state_dir, store)
    gateway.load_plugins()
    for problem in await gateway.start(host_name="agentplug serve"):
        print(f"agentplug serve: warning: {problem}", file=sys.stderr)
    app = create_app(gateway, token=token, state_dir=state_dir, config_path=config_path)
    return await _serve(gateway, app, sock, token_path)


def _add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", metavar="FILE", help=CONFIG_HELP)
    parser.add_argument(
        "--host",
        default="127.0.0.1",
        help="loopback address to listen on: 127.0.0.1 (default), ::1 or localhost; any "
        "other address is refused",
    )
    parser.add_argument(
        "--port", type=int, default=DEFAULT_PORT, help=f"TCP port (default {DEFAULT_PORT}; 0: any)"
    )
    parser.add_argument(
        "--token-file",
        help=f"file holding the bearer token (default: a new random token written to "
        f"<state-dir>/{TOKEN_FILE}, mode 0600)",
    )
    parser.add_argument(
        "--state-dir",
        metavar="DIR",
        help=STATE_DIR_HELP + "; the API token is written there",
    )
    parser.set_defaults(func=cmd_serve, reports_load_errors=True)


def add_serve_command(subparsers: Any) -> argparse.ArgumentParser:
    """Add ``serve`` to a CLI's subparsers (what ``ArgumentParser.add_subparsers()`` returned)."""
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "serve",
        help=f"run the local control API on loopback (needs the {API_EXTRA!r} extra)",
        description=(__doc__ or "").split("\n\n")[0],
    )
    _add_arguments(parser)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Standalone entry point: ``python -m agentplug.api.serve [options]``."""
    parser = argparse.ArgumentParser(prog="agentplug serve", description=__doc__)
    _add_arguments(parser)
    args = parser.parse_args(list(argv) if argv is not None else None)
    code: int = args.func(args)
    return code


if __name__ == "__main__":
    raise SystemExit(main())
