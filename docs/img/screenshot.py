"""Render one page of the documentation site with headless Chromium into a PNG.

    .venv/bin/python docs/img/screenshot.py [PAGE] [--out docs/img/site.png]

Builds the site (``mkdocs build --strict`` into build/site), serves it on a free
loopback port for the time of the shot, and runs Debian's ``chromium``
(``apt-get install chromium``) headless. PAGE is a site path such as ``plugin-guide/``.
"""

from __future__ import annotations

import argparse
import functools
import http.server
import os
import shutil
import subprocess
import sys
import threading
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SITE = ROOT / "build" / "site"
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--hide-scrollbars",
]


def build_site() -> None:
    subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--quiet", "--site-dir", str(SITE)],
        cwd=ROOT,
        check=True,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass


def shoot(page: str, out: Path, size: str) -> None:
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    if browser is None:
        raise SystemExit("chromium is not installed: apt-get install -y chromium")
    handler = functools.partial(_QuietHandler, directory=str(SITE))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/{page}"
        out.parent.mkdir(parents=True, exist_ok=True)
        subprocess.run(
            [browser, *FLAGS, f"--window-size={size}", f"--screenshot={out}", url],
            check=True,
            capture_output=True,
            timeout=120,
        )
    finally:
        server.shutdown()
        server.server_close()
    print(f"wrote {out.relative_to(ROOT) if out.is_relative_to(ROOT) else out} ({url})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("page", nargs="?", default="plugin-guide/")
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "img" / "site.png")
    parser.add_argument("--size", default="1280,960", help="window size WIDTH,HEIGHT")
    args = parser.parse_args()
    build_site()
    shoot(args.page, args.out.resolve(), args.size)


if __name__ == "__main__":
    main()
