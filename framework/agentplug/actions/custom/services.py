"""The handler back-ends custom actions run through (:class:`CustomActionServices`).

The defaults are the real ones: the SSRF-guarded HTTP client, the local terminal service
and the isolated code sandbox (whose ``fetch`` is :func:`guarded_fetch_for_code`).
"""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable, Collection, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TypeAlias

from agentplug.actions.code_handler import CodeHandlerDef, run_code_handler
from agentplug.actions.handler_output import HandlerOutput
from agentplug.actions.http_handler import HttpHandlerDef, run_http_handler
from agentplug.actions.shell_handler import ShellHandlerDef, run_shell_handler
from agentplug.actions.terminal import LocalTerminalService, TerminalService
from agentplug.sandbox import (
    CodeSandbox,
    FetchCallable,
    FetchRequest,
    FetchResponse,
    SandboxBudget,
)
from agentplug.security.ssrf import FetchError, SSRFPolicy, guarded_fetch

__all__ = [
    "CODE_RUN_MEMORY_MB",
    "CodeBackend",
    "CustomActionServices",
    "HttpBackend",
    "ShellBackend",
    "guarded_fetch_for_code",
]

HttpBackend: TypeAlias = Callable[
    [HttpHandlerDef, Mapping[str, str], Collection[str]], Awaitable[HandlerOutput]
]
"""Runs an ``http`` handler: ``(defn, params, declared_names) -> HandlerOutput``."""

ShellBackend: TypeAlias = Callable[
    [ShellHandlerDef, Mapping[str, str], Collection[str]], Awaitable[HandlerOutput]
]
"""Runs a ``shell`` handler: ``(defn, params, declared_names) -> HandlerOutput``."""

CodeBackend: TypeAlias = Callable[[CodeHandlerDef, Mapping[str, str]], Awaitable[HandlerOutput]]
"""Runs a ``code`` handler: ``(defn, params) -> HandlerOutput``."""


CODE_RUN_MEMORY_MB = 256
"""Address-space limit of one ``code`` run (what it reserves in the sandbox budget)."""


@dataclass(frozen=True)
class CustomActionServices:
    """The three handler back-ends custom actions run through.

    Build the real ones with :meth:`default` (optionally with an SSRF allowlist, a shell
    working directory or a replacement terminal/sandbox); pass other callables to swap one.
    """

    http: HttpBackend
    shell: ShellBackend
    code: CodeBackend
    sandbox_budget: SandboxBudget | None = None
    """The bound on the memory of the ``code`` runs in progress together (``None``: the
    ``code`` back-end is not the default one)."""
    sandbox: CodeSandbox | None = None
    """The long-lived sandbox ``code`` runs in when these back-ends own one (see
    :meth:`default`'s ``code_pool_size``); closed by :meth:`close`."""

    def close(self) -> None:
        """Close the sandbox these back-ends own (kills its idle and running workers)."""
        if self.sandbox is not None:
            self.sandbox.close()

    @classmethod
    def default(
        cls,
        *,
        ssrf_policy: SSRFPolicy | None = None,
        shell_cwd: str | os.PathLike[str] | None = None,
        shell_timeout_s: float = 30.0,
        terminal: TerminalService | None = None,
        sandbox: CodeSandbox | None = None,
        sandbox_budget: SandboxBudget | None = None,
        code_pool_size: int | None = None,
        code_parallel: int | None = None,
    ) -> CustomActionServices:
        """The real back-ends.

        ``http`` goes through the SSRF guard with ``ssrf_policy`` (default policy: internal
        addresses blocked). ``shell`` runs through ``terminal`` (default: a
        :class:`~agentplug.actions.terminal.LocalTerminalService` rooted at ``shell_cwd``,
        itself defaulting to the current directory) with ``shell_timeout_s``. ``code`` runs in
        ``sandbox`` (default: a fresh :class:`~agentplug.sandbox.CodeSandbox` per run, closed
        afterwards; pass a long-lived one to reuse warm workers) and its ``fetch`` goes
        through the same SSRF policy. With ``code_pool_size`` (and no ``sandbox``) the
        back-ends own one long-lived sandbox keeping that many warm workers, refilled
        ``code_parallel`` at a time; :meth:`close` closes it. Every ``code`` run first
        reserves :data:`CODE_RUN_MEMORY_MB` in ``sandbox_budget`` (default: a new
        :class:`~agentplug.sandbox.SandboxBudget` shared by the runs of these services)
        and waits while the runs in progress hold all of it.
        """
        owned = None
        if sandbox is None and code_pool_size is not None:
            owned = sandbox = CodeSandbox(pool_size=code_pool_size, parallel=code_parallel)
        policy = ssrf_policy or SSRFPolicy()
        cwd = Path(shell_cwd) if shell_cwd is not None else Path.cwd()
        fetch = guarded_fetch_for_code(policy)

        async def http(
            defn: HttpHandlerDef, params: Mapping[str, str], declared: Collection[str]
        ) -> HandlerOutput:
            return await run_http_handler(defn, params, declared, policy=policy)

        async def shell(
            defn: ShellHandlerDef, params: Mapping[str, str], declared: Collection[str]
        ) -> HandlerOutput:
            # Built per run so a working directory created after start-up is still found.
            service = terminal if terminal is not None else LocalTerminalService(cwd)
            return await run_shell_handler(
                defn, params, declared, terminal=service, timeout_s=shell_timeout_s
            )

        budget = sandbox_budget if sandbox_budget is not None else SandboxBudget()

        async def code(defn: CodeHandlerDef, params: Mapping[str, str]) -> HandlerOutput:
            async with budget.reserve(CODE_RUN_MEMORY_MB):
                if sandbox is not None:
                    return await run_code_handler(
                        defn, params, sandbox=sandbox, fetch=fetch, memory_mb=CODE_RUN_MEMORY_MB
                    )
                # One run, one worker: no pool (a ready spare would be killed unused).
                async with CodeSandbox(pool_size=0) as box:
                    return await run_code_handler(
                        defn, params, sandbox=box, fetch=fetch, memory_mb=CODE_RUN_MEMORY_MB
                    )

        return cls(http=http, shell=shell, code=code, sandbox_budget=budget, sandbox=owned)


def guarded_fetch_for_code(policy: SSRFPolicy) -> FetchCallable:
    """The ``fetch`` given to sandboxed code: the SSRF-guarded client of ``http`` handlers.

    Blocked targets and network failures raise (the sandbox turns that into an error inside
    the code); a redirect is refused rather than followed, like in ``http`` handlers.
    """

    async def fetch(request: FetchRequest) -> FetchResponse:
        result = await guarded_fetch(
            request.url,
            method=request.method,
            headers=request.headers,
            body=request.body,
            policy=policy,
        )
        if result.redirect_location is not None:
            raise FetchError(
                f"redirect blocked: {request.url} answered {result.status} with Location "
                f"{result.redirect_location!r}; fetch never follows redirects (SSRF protection)"
            )
        return FetchResponse(status=result.status, headers=result.headers, body=result.body)

    return fetch
