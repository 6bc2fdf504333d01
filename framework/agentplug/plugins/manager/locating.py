"""Locating and fingerprinting ejected sources (used by the loader and the supervisor), and
the local path a URL names."""

from __future__ import annotations

import hashlib
import os
import re
from pathlib import Path
from urllib.parse import unquote, urlparse

from packaging.utils import canonicalize_name

from agentplug.plugins.ejected import CORE_DISTRIBUTION, core_root, import_roots_of

__all__ = ["core_import_roots", "path_from_url", "source_fingerprint"]


def core_import_roots(state_dir: str | Path, distribution: str = CORE_DISTRIBUTION) -> list[Path]:
    """Import roots of an ejected agentplug core (``[]`` when not ejected)."""
    return import_roots_of(core_root(Path(state_dir)) / canonicalize_name(distribution))


def source_fingerprint(folder: Path) -> str:
    """A cheap fingerprint of a source tree (paths, sizes, mtimes; ``.git`` excluded)."""
    digest = hashlib.sha256()
    if not folder.is_dir():
        return ""
    for root, dirs, files in os.walk(folder):
        dirs[:] = sorted(d for d in dirs if d not in (".git", "__pycache__"))
        for name in sorted(files):
            path = Path(root) / name
            try:
                st = path.stat()
            except OSError:
                continue
            rel = path.relative_to(folder).as_posix()
            digest.update(f"{rel}\0{st.st_size}\0{st.st_mtime_ns}\n".encode())
    return digest.hexdigest()


def path_from_url(url: str) -> Path | None:
    """The local path a ``file://`` URL or a plain path names (``None``: not local)."""
    if url.startswith("file://"):
        return Path(unquote(urlparse(url).path))
    if url.startswith("/") or re.match(r"^[A-Za-z]:[\\/]", url):
        return Path(url)
    return None
