"""Custom-action ids are one URL path segment, checked where a definition enters.

Issue 18 item 3: ``{"id": "../../evil"}`` used to be saved (201) and then no GET, PUT or
DELETE could reach it. Against a real ``agentplug serve``.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

pytest.importorskip("starlette")
pytest.importorskip("uvicorn")

from .served import Served, start_serve

BAD_IDS = ["../../evil", "a/b", "..", ".hidden", "-dash", "with space", "x" * 65, "é", ""]


def action(**overrides: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "name": "GREET",
        "description": "Say hello",
        "parameters": [],
        "handler": {"type": "http", "method": "GET", "url": "https://example.com/"},
        "enabled": False,
    }
    body.update(overrides)
    return body


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    server = start_serve(tmp_path_factory.mktemp("ids"), {"customActions": []})
    try:
        yield server
    finally:
        server.stop()


@pytest.mark.parametrize("bad", [b for b in BAD_IDS if b])
def test_the_api_refuses_an_id_that_is_not_one_path_segment(served: Served, bad: str) -> None:
    response = served.client.post("/api/custom-actions", json=action(id=bad))
    assert response.status_code == 422, response.text
    assert "id" in response.json()["error"] and "letters, digits" in response.json()["error"]
    saved = json.loads(served.config_path.read_text(encoding="utf-8"))
    assert saved["customActions"] == []


def test_an_id_the_api_accepts_is_reachable_by_get_put_and_delete(served: Served) -> None:
    created = served.client.post("/api/custom-actions", json=action(id="v1.2_greet-x"))
    assert created.status_code == 201
    path = "/api/custom-actions/v1.2_greet-x"
    assert served.client.get(path).status_code == 200
    assert served.client.put(path, json=action(description="Say hi")).status_code == 200
    assert served.client.delete(path).status_code == 200


def test_a_generated_id_matches_the_pattern(served: Served) -> None:
    created = served.client.post("/api/custom-actions", json=action(name="ÜBER__GREET!"))
    assert created.status_code == 201
    generated = created.json()["id"]
    assert served.client.delete(f"/api/custom-actions/{generated}").status_code == 200
