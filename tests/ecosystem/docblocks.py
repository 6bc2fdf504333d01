"""Code blocks of the documentation pages, and a runner that runs a tutorial page's blocks
in order, as a reader would, in one temporary folder.

A fence may carry a title, ```` ```python title="src/my_plugin/__init__.py" ````: such a
block is a file, written at that path (relative to the current folder). Other ``python``
blocks run as scripts; a ``text`` block right after one is its exact standard output.
``sh`` blocks run line by line: ``cd``, ``mkdir``, ``touch``, ``agentplug ...``,
``python -m pytest``, ``mypy``, ``make check`` and ``pip install -e PATH`` (a local
package, installed with ``pip install --target`` into the folder's own site directory,
so the test environment is left alone; installing agentplug itself and tools is skipped:
the test environment has them). ``make demo`` and ``make test`` are skipped: the suite
is ``make test``.
"""

from __future__ import annotations

import hashlib
import os
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
FENCE = re.compile(r'^```(\w+)(?: title="([^"]+)")?\n(.*?)^```', re.S | re.M)
SKIPPED = ("make demo", "make test", "python3 -m venv", ". .venv/bin/activate")


@dataclass(frozen=True)
class Block:
    lang: str
    title: str | None
    body: str
    line: int


def blocks(page: str) -> list[Block]:
    text = (DOCS / page).read_text(encoding="utf-8")
    return [
        Block(m.group(1), m.group(2), m.group(3), text.count("\n", 0, m.start()) + 1)
        for m in FENCE.finditer(text)
    ]


@dataclass
class Reader:
    """Runs a page's blocks in ``home`` (the reader's folder)."""

    home: Path
    cwd: Path = field(init=False)
    site: Path = field(init=False)
    projects: dict[Path, str] = field(default_factory=dict)
    ran: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.cwd = self.home
        self.site = self.home / ".site"
        self.site.mkdir()

    def env(self) -> dict[str, str]:
        bin_dir = str(Path(sys.executable).parent)
        return {
            **os.environ,
            "PATH": bin_dir + os.pathsep + os.environ.get("PATH", ""),
            "PYTHONPATH": str(self.site),
            "AGENTPLUG_CACHE_DIR": str(self.home / ".cache"),
            "PIP_DISABLE_PIP_VERSION_CHECK": "1",
            "NO_COLOR": "1",
        }

    def call(self, args: list[str], where: str) -> str:
        self._refresh_installs()
        done = subprocess.run(
            args, cwd=self.cwd, env=self.env(), capture_output=True, text=True, timeout=600
        )
        assert done.returncode == 0, (
            f"{where}: `{' '.join(args)}` exited {done.returncode}:\n"
            f"{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
        )
        self.ran.append(" ".join(args))
        return done.stdout

    def _digest(self, project: Path) -> str:
        files = sorted(p for p in project.rglob("*") if p.is_file() and ".egg-info" not in str(p))
        return hashlib.sha256(b"".join(p.read_bytes() for p in files)).hexdigest()

    def _refresh_installs(self) -> None:
        """Reinstall a local package whose files changed since it was installed (what an
        editable install gives the reader for free)."""
        for project, digest in list(self.projects.items()):
            now = self._digest(project)
            if now == digest:
                continue
            subprocess.run(
                [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps",
                 "--no-build-isolation", "--upgrade", "--target", str(self.site), str(project)],
                check=True, capture_output=True, env=self.env(), timeout=600,
            )  # fmt: skip
            self.projects[project] = now

    def shell_line(self, line: str, where: str) -> None:
        line = re.split(r"\s+#\s", line)[0].strip()
        if not line or line.startswith(SKIPPED):
            return
        for part in (p.strip() for p in line.split("&&")):
            words = shlex.split(part)
            if words[0] == "cd":
                self.cwd = (self.cwd / words[1]).resolve()
            elif words[0] in ("mkdir", "touch"):
                self.call(words, where)
            elif words[:2] == ["pip", "install"]:
                for target in (w for w in words[2:] if not w.startswith("-")):
                    local = (self.cwd / target.split("[")[0]).resolve()
                    if local.is_dir() and not str(local).startswith(str(ROOT)):
                        self.projects[local] = ""
            elif words[0] == "agentplug":
                self.call([str(Path(sys.executable).parent / "agentplug"), *words[1:]], where)
            elif words[:3] == ["python", "-m", "pytest"]:
                pytest_args = ["-p", "no:cacheprovider", *words[3:]]
                self.call([sys.executable, "-m", "pytest", *pytest_args], where)
            elif words[0] == "mypy":
                self.call([sys.executable, "-m", "mypy", "--no-incremental", *words[1:]], where)
            elif words[:2] == ["make", "check"]:
                self.call(["make", "check", f"PYTHON={sys.executable}"], where)
            else:
                raise AssertionError(f"{where}: the tutorial test cannot run `{part}`")

    def read(self, page: str) -> None:
        """Run every block of ``page``, in order."""
        found = blocks(page)
        for index, block in enumerate(found):
            where = f"docs/{page}:{block.line}"
            following = found[index + 1] if index + 1 < len(found) else None
            if block.title is not None:
                path = self.cwd / block.title
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(block.body, encoding="utf-8")
            elif block.lang == "python":
                script = self.home / f".block_{block.line}.py"
                script.write_text(block.body, encoding="utf-8")
                out = self.call([sys.executable, str(script)], where)
                if following is not None and following.lang == "text":
                    assert out == following.body, f"{where} printed:\n{out}"
            elif block.lang == "sh":
                for line in block.body.splitlines():
                    self.shell_line(line, where)


def python_examples(page: str, folder: Path) -> list[Path]:
    """Write every ``python`` block of ``page`` into ``folder``: a titled block at its
    path, the others as ``example_<line>.py``. Returns the files written."""
    written = []
    for block in blocks(page):
        if block.lang != "python":
            continue
        path = folder / (block.title or f"example_{block.line}.py")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(block.body, encoding="utf-8")
        written.append(path)
    return written
