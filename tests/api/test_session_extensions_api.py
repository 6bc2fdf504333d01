"""Session extensions through the control API (issue 13 item 10), on a real ``agentplug serve``.

``PATCH /api/sessions/{key}/plugins/{plugin_id}`` is a JSON merge patch of that plugin's
extensions with auth, a size limit and the owning-plugin check; ``GET /api/sessions``
rows show ``plugin_extensions``. The plugins are real installed distributions that the
server discovers through their entry points.
"""

from __future__ import annotations

import json
import textwrap
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

pytest.importorskip("starlette")
pytest.importorskip("uvicorn")

from agentplug.services.sessions import MAX_EXTENSION_STATE_BYTES

from .served import Served, start_serve

SESSION = "agent:main:telegram:42"
PLUGINS = {
    "workflow-a": ("approvals", {"pending": 0}),
    "workflow-b": ("notes", {}),
}


def _install(site: Path) -> None:
    for dist, (extension, default) in PLUGINS.items():
        module = "sessplug_" + dist.replace("-", "_")
        (site / f"{module}.py").write_text(
            textwrap.dedent(
                f"""
                def register(api):
                    api.session.state.register_session_extension(
                        {extension!r}, default={default!r}, description="test state"
                    )
                """
            ),
            encoding="utf-8",
        )
        info = site / f"{module}-1.0.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(
            f"Metadata-Version: 2.1\nName: {dist}\nVersion: 1.0\n", encoding="utf-8"
        )
        (info / "entry_points.txt").write_text(f"[agentplug]\n{dist} = {module}\n", "utf-8")


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    root = tmp_path_factory.mktemp("sessions")
    site = root / "site"
    site.mkdir()
    _install(site)
    server = start_serve(root, {}, env={"PYTHONPATH": str(site)})
    try:
        yield server
    finally:
        server.stop()


def patch(served: Served, plugin_id: str, body: object, session: str = SESSION) -> httpx.Response:
    return served.client.patch(
        f"/api/sessions/{session}/plugins/{plugin_id}",
        content=json.dumps(body),
        headers={"Content-Type": "application/merge-patch+json"},
    )


def row(served: Served, session: str = SESSION) -> dict[str, object]:
    rows = served.client.get("/api/sessions").json()["sessions"]
    return next(r for r in rows if r["session_key"] == session)


def test_a_patch_is_a_json_merge_patch_shown_in_the_session_rows(served: Served) -> None:
    first = patch(served, "workflow-a", {"approvals": {"pending": 2, "last": "deploy"}})
    assert first.status_code == 200, first.text
    assert first.json()["state"] == {"approvals": {"pending": 2, "last": "deploy"}}
    second = patch(served, "workflow-a", {"approvals": {"last": None, "seen": [1]}})
    assert second.json()["state"] == {"approvals": {"pending": 2, "seen": [1]}}
    assert row(served)["plugin_extensions"] == {
        "workflow-a": {"approvals": {"pending": 2, "seen": [1]}},
        "workflow-b": {"notes": {}},
    }
    assert served.client.get(f"/api/sessions/{SESSION}").json() == row(served)


def test_null_puts_an_extension_back_to_its_default(served: Served) -> None:
    session = "agent:main:reset-me"
    assert patch(served, "workflow-a", {"approvals": {"pending": 9}}, session).status_code == 200
    reset = patch(served, "workflow-a", {"approvals": None}, session)
    assert reset.json()["state"] == {"approvals": {"pending": 0}}


def test_a_plugin_cannot_patch_another_plugins_extension(served: Served) -> None:
    before = row(served)
    refused = patch(served, "workflow-a", {"notes": {"text": "mine now"}})
    assert refused.status_code == 403
    assert "belongs to plugin 'workflow-b'" in refused.json()["error"]
    assert row(served) == before


def test_unknown_extensions_and_plugins_are_404_and_change_nothing(served: Served) -> None:
    before = row(served)
    unknown = patch(served, "workflow-a", {"approvals": {"pending": 5}, "nope": {}})
    assert unknown.status_code == 404 and "'nope'" in unknown.json()["error"]
    assert patch(served, "not-installed", {"approvals": {}}).status_code == 404
    assert row(served) == before  # the valid half of the refused patch was not applied


def test_the_patch_needs_the_token(served: Served) -> None:
    response = httpx.patch(
        f"{served.url}/api/sessions/{SESSION}/plugins/workflow-a",
        json={"approvals": {"pending": 1}},
    )
    assert response.status_code == 401
    assert httpx.get(f"{served.url}/api/sessions").status_code == 401


def test_patches_are_size_limited(served: Served) -> None:
    big = "x" * MAX_EXTENSION_STATE_BYTES
    too_big_state = patch(served, "workflow-b", {"notes": {"text": big}})
    assert too_big_state.status_code == 413
    assert "limit is" in too_big_state.json()["error"]
    too_big_body = patch(served, "workflow-b", {"notes": {"text": big * 5}})
    assert too_big_body.status_code == 413
    assert "request body larger than" in too_big_body.json()["error"]
    assert row(served)["plugin_extensions"]["workflow-b"] == {"notes": {}}


def test_a_patch_must_be_an_object_of_extensions(served: Served) -> None:
    assert patch(served, "workflow-a", ["approvals"]).status_code == 400
    bad = patch(served, "workflow-a", {"approvals": {"pending": 1}}, session="x" * 600)
    assert bad.status_code == 400 and "session_key" in bad.json()["error"]


def test_a_session_key_the_store_refuses_is_a_400_in_one_short_line(served: Served) -> None:
    for key in ("agent:main:x:" + "k" * 2000, "agent:main:x:%00nul"):
        for response in (
            served.client.get(f"/api/sessions/{key}"),
            patch(served, "workflow-a", {"approvals": {"pending": 1}}, session=key),
        ):
            assert response.status_code == 400, response.text
            error = response.json()["error"]
            assert error.startswith("session_key ") and "\n" not in error
            assert len(error) < 300
    assert served.client.get("/api/sessions").status_code == 200


def test_an_error_quoting_what_was_sent_never_shows_the_api_token(served: Served) -> None:
    # The API token is a configured secret: an error that quotes the request shows none
    # of it, not even the part a cut for length would have left whole.
    for key in (served.token + "x" * 600, "agent:" + served.token + "%00"):
        response = served.client.get(f"/api/sessions/{key}")
        assert response.status_code == 400, response.text
        assert served.token[:12] not in response.text and served.token[-12:] not in response.text
