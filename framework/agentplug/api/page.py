"""The control room's page: static files under ``/ui`` (:class:`Page`).

The files (HTML, CSS and JavaScript modules, no build step) ship in the wheel under
``agentplug/api/static/`` and are read once when the application is built. They are served
only when the server's socket is bound to a loopback address (the same rule as the API),
with a Content-Security-Policy that allows scripts, styles and connections from the page's
own origin only, no inline script or style, no frames, and Trusted Types required for
every DOM sink that would parse HTML (so text from plugins and models can only ever be
set as text).
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib import resources

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from agentplug.api.loopback import is_loopback_name
from agentplug.api.responses import error_response

__all__ = ["CONTENT_SECURITY_POLICY", "Page", "static_files"]

CONTENT_SECURITY_POLICY = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; font-src 'self'; base-uri 'none'; form-action 'self'; "
    "frame-ancestors 'none'; require-trusted-types-for 'script'; trusted-types 'none'"
)
"""The policy every file of the page is served with."""

_TYPES = {
    ".html": "text/html; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".svg": "image/svg+xml",
    ".png": "image/png",
}


@dataclass(frozen=True)
class StaticFile:
    """One file of the page, in memory."""

    body: bytes
    media_type: str


def static_files() -> dict[str, StaticFile]:
    """The page's files by name (``index.html``, ``app.js``...), read from the package."""
    folder = resources.files("agentplug.api").joinpath("static")
    found: dict[str, StaticFile] = {}
    for entry in folder.iterdir():
        suffix = "." + entry.name.rpartition(".")[2]
        if entry.is_file() and suffix in _TYPES:
            found[entry.name] = StaticFile(entry.read_bytes(), _TYPES[suffix])
    return found


class Page:
    """Serves the control room's files (``GET /ui``, ``/ui/``, ``/ui/<file>``)."""

    def __init__(self) -> None:
        self.files = static_files()

    async def redirect(self, request: Request) -> Response:
        """``/ui`` -> ``/ui/`` (relative module imports resolve against the folder)."""
        return RedirectResponse("/ui/", status_code=308)

    async def file(self, request: Request) -> Response:
        """One file of the page; 404 for anything else."""
        server = request.scope.get("server")
        if not server or not is_loopback_name(str(server[0])):
            return error_response(
                403,
                "the control room is served only on a loopback bind (127.0.0.1, ::1 or "
                "localhost); reach a remote gateway through an SSH tunnel",
            )
        name = request.path_params.get("name") or "index.html"
        found = self.files.get(name)
        if found is None:
            return error_response(404, f"no file {name!r} in the control room")
        return Response(
            found.body,
            media_type=found.media_type,
            headers={
                "Content-Security-Policy": CONTENT_SECURITY_POLICY,
                "Cache-Control": "no-cache",
            },
        )
