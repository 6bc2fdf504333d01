"""The documentation site: mkdocs.yml lays the pages along the learning path, every page
of docs/ is in the navigation, and ``mkdocs build --strict`` builds it with the search
index and an API reference entry for every public name. The change log keeps the Keep a
Changelog format."""

from __future__ import annotations

import inspect
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import agentplug
import agentplug.testing
import agentplug_hookspecs
import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
LEARNING_PATH = [
    "quickstart.md",
    "plugin-guide.md",
    "testing.md",
    "agent-runtime.md",
    "actions.md",
    "approvals.md",
    "ui.md",
    "scaling.md",
    "integrations.md",
]


def _config() -> dict[str, Any]:
    data = yaml.safe_load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"))
    assert isinstance(data, dict)
    return data


def _pages(nav: Any) -> list[str]:
    if isinstance(nav, str):
        return [nav]
    if isinstance(nav, list):
        return [page for item in nav for page in _pages(item)]
    if isinstance(nav, dict):
        return [page for value in nav.values() for page in _pages(value)]
    return []


def test_the_navigation_follows_the_learning_path_then_the_references() -> None:
    nav = _config()["nav"]
    sections = [next(iter(item)) for item in nav]
    learn = next(item["Learn"] for item in nav if "Learn" in item)

    assert sections == ["Home", "Learn", "Guides", "Reference", "Project"]
    assert _pages(learn) == LEARNING_PATH


def test_every_page_of_docs_is_in_the_navigation() -> None:
    pages = set(_pages(_config()["nav"]))
    files = {str(p.relative_to(ROOT / "docs")) for p in (ROOT / "docs").rglob("*.md")}

    assert sorted(files - pages) == []
    assert sorted(pages - files) == []


def test_the_site_uses_material_with_search_and_mkdocstrings_strictly() -> None:
    config = _config()
    plugins = [p if isinstance(p, str) else next(iter(p)) for p in config["plugins"]]

    assert config["theme"]["name"] == "material"
    assert plugins == ["search", "mkdocstrings"]
    assert config["strict"] is True


def _public(module: Any) -> list[str]:
    return [
        name
        for name in module.__all__
        if not name.startswith("_") and not inspect.ismodule(getattr(module, name))
    ]


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("site")
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--quiet", "--site-dir", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )
    assert done.returncode == 0, done.stderr[-4000:]
    return out


def test_the_site_builds_with_a_full_text_search_index(site: Path) -> None:
    index = json.loads((site / "search" / "search_index.json").read_text(encoding="utf-8"))
    locations = {doc["location"].split("#")[0] for doc in index["docs"]}

    assert {"quickstart/", "plugin-guide/", "hooks/", "reference/agentplug/"} <= locations


@pytest.mark.parametrize(
    ("module", "page"),
    [
        (agentplug, "reference/agentplug"),
        (agentplug_hookspecs, "reference/hookspecs"),
        (agentplug.testing, "reference/testing"),
    ],
    ids=["agentplug", "agentplug_hookspecs", "agentplug.testing"],
)
def test_the_api_reference_documents_every_public_name(module: Any, page: str, site: Path) -> None:
    html = (site / page / "index.html").read_text(encoding="utf-8")
    anchors = set(re.findall(r'id="([\w.]+)"', html))

    assert [n for n in _public(module) if f"{module.__name__}.{n}" not in anchors] == []


def test_the_hook_reference_page_shows_docstrings_as_text(site: Path) -> None:
    html = (site / "hooks" / "index.html").read_text(encoding="utf-8")
    entry = html[html.index('id="before_model_resolve"') :][:6000]

    assert "<p>Receives only the current prompt and attachment metadata." in entry


def test_the_changelog_keeps_the_keep_a_changelog_format() -> None:
    text = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
    headings = re.findall(r"^(#{1,3}) (.+)$", text, re.M)

    assert headings[0] == ("#", "Changelog")
    assert headings[1] == ("##", "[Unreleased]")
    assert "keepachangelog.com" in text
    kinds = {title for level, title in headings if level == "###"}
    assert "Added" in kinds
    assert kinds <= {"Added", "Changed", "Deprecated", "Removed", "Fixed", "Security"}
