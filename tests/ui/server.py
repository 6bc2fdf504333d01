"""A real control API with its page on 127.0.0.1, in this process (:class:`UiServer`).

The gateway is built as ``agentplug serve`` builds it (a SQLite store in a state
directory, so approvals go through the shared store; a programmatic resolver answering
them through the API) with the test's plugins, scripted model and Python tools, and the
application is served by uvicorn on its own event loop in a thread. The test reaches the
gateway's objects directly (``server.provider.requests``) and runs coroutines on the
server's loop with :meth:`UiServer.call`.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
from collections.abc import Callable, Coroutine, Iterable, Mapping
from pathlib import Path
from typing import Any, TypeVar

import httpx

T = TypeVar("T")

TOKEN = "ui-test-token-0123456789abcdef"
"""The API token of every test server (long enough for ``create_app``)."""
WAIT_S = 60.0
"""Upper bound for the server to start or stop (a hang guard, never a timing assertion)."""


class UiServer:
    """A served gateway (see the module docstring); ``with UiServer(...) as server``."""

    def __init__(
        self,
        root: Path,
        *,
        responses: list[Any] | None = None,
        plugins: Iterable[object] = (),
        tools: Iterable[Callable[..., Any]] = (),
        config: Mapping[str, Any] | None = None,
        custom_actions: list[dict[str, Any]] | None = None,
        state_dir: Path | None = None,
    ) -> None:
        from agentplug.agent import ScriptedProvider

        self.root = root
        self.state_dir = state_dir or root / "state"
        self.config_path = root / "agentplug.json"
        settings = {"agent": {"tools": {"actions": False}}, **dict(config or {})}
        if custom_actions is not None:
            settings["customActions"] = custom_actions
        self.config_path.write_text(json.dumps(settings), encoding="utf-8")
        self.provider = ScriptedProvider(list(responses or ["Hello from the model."]))
        self.plugins = list(plugins)
        self.tools = list(tools)
        self.loop: asyncio.AbstractEventLoop | None = None
        self.gateway: Any = None
        self.app: Any = None
        self.url = ""
        self.port = 0
        self._server: Any = None
        self._thread: threading.Thread | None = None
        self._ready = threading.Event()
        self._failure: BaseException | None = None
        self.answered: list[dict[str, Any]] = []
        """Every request the server answered: method, path, Origin and status."""

    # -- lifecycle ---------------------------------------------------------------------

    def __enter__(self) -> UiServer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="ui-server", daemon=True)
        self._thread.start()
        if not self._ready.wait(WAIT_S):
            raise AssertionError("the test control API did not start")
        if self._failure is not None:
            raise AssertionError(f"the test control API failed to start: {self._failure!r}")

    def _run(self) -> None:
        try:
            asyncio.run(self._main())
        except BaseException as exc:
            self._failure = exc
            self._ready.set()

    async def _main(self) -> None:
        import uvicorn
        from agentplug.api.app import create_app
        from agentplug.api.serve import bind_loopback, socket_url
        from agentplug.core.config import load_config
        from agentplug.gateway import Gateway
        from agentplug.services.approvals import ProgrammaticResolver

        self.state_dir.mkdir(parents=True, exist_ok=True)
        self.loop = asyncio.get_running_loop()
        gateway = Gateway(
            load_config(self.config_path),
            state_dir=self.state_dir,
            resolver=ProgrammaticResolver(),
            provider=self.provider,
        )
        for plugin in self.plugins:
            gateway.host.register(plugin)
        for tool in self.tools:
            gateway.runner.tools.add_python(tool)
        await gateway.start(host_name="ui-test")
        self.gateway = gateway
        self.app = create_app(
            gateway, token=TOKEN, state_dir=self.state_dir, config_path=self.config_path
        )
        sock = bind_loopback("127.0.0.1", 0)
        self.url = socket_url(sock)
        self.port = sock.getsockname()[1]
        config = uvicorn.Config(
            self._recording(self.app),
            lifespan="on",
            log_level="warning",
            access_log=False,
            timeout_graceful_shutdown=5,
        )
        self._server = uvicorn.Server(config)
        serving = asyncio.ensure_future(self._server.serve(sockets=[sock]))
        while not self._server.started and not serving.done():
            await asyncio.sleep(0.01)
        self._ready.set()
        try:
            await serving
        finally:
            sock.close()
            await gateway.aclose()
            # gateway.aclose() leaves the custom actions' warm code sandbox running (the
            # serve process exits instead); this server lives inside the test process.
            if gateway.actions.custom_services is not None:
                gateway.actions.custom_services.close()

    def _recording(self, app: Any) -> Any:
        """``app`` with every answer's status written down (what the server decided,
        whatever the browser then lets the page see)."""

        async def recorded(scope: Any, receive: Any, send: Any) -> None:
            if scope["type"] != "http":
                await app(scope, receive, send)
                return
            headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope["headers"]}
            row = {
                "method": scope["method"],
                "path": scope["path"],
                "origin": headers.get("origin"),
            }

            async def sending(message: Any) -> None:
                if message["type"] == "http.response.start":
                    self.answered.append({**row, "status": message["status"]})
                await send(message)

            await app(scope, receive, sending)

        return recorded

    def stop(self) -> None:
        if self._thread is None or self.loop is None:
            return
        if self._server is not None:
            with contextlib.suppress(Exception):  # already stopping
                self.call(self.app.state.api.events.aclose())
            self._server.should_exit = True
        self._thread.join(WAIT_S)
        self._thread = None

    # -- helpers -----------------------------------------------------------------------

    def call(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run ``coro`` on the server's loop and return its result."""
        assert self.loop is not None
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(WAIT_S)

    def client(self) -> httpx.Client:
        """An HTTP client with the bearer token (what a script would use)."""
        return httpx.Client(
            base_url=self.url, headers={"Authorization": f"Bearer {TOKEN}"}, timeout=WAIT_S
        )

    def post_turn_in_background(
        self, session_key: str, content: str
    ) -> tuple[threading.Thread, list[httpx.Response]]:
        """``POST /api/sessions/{key}/messages`` on a thread (it waits on approvals);
        the response lands in the returned list."""
        answers: list[httpx.Response] = []

        def post() -> None:
            with self.client() as client:
                answers.append(
                    client.post(f"/api/sessions/{session_key}/messages", json={"content": content})
                )

        thread = threading.Thread(target=post, daemon=True)
        thread.start()
        return thread, answers
