"""Approvals decided through the control API from other processes: who won, when, and why not.

Real ``agentplug serve`` processes share one state store (SQLite, and PostgreSQL when the
``postgres_url`` fixture exists) with another process, the gateway whose turn waits on the
approval. Racer processes, released at once, ``POST /api/approvals/{id}`` to either
server; a decision arriving after the gateway cancelled its run is told so.
"""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("starlette")
pytest.importorskip("uvicorn")

from agentplug.services.approvals.models import iso_time
from agentplug.services.approvals.shared import stored_decision
from agentplug.store import open_store_url

from tests.services.approval_processes import (
    gateway,
    pending_id,
    printed,
    shared_store_url,
    start_together,
)

from .served import start_serve


@pytest.fixture(params=["sqlite", "postgres"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    return shared_store_url(request, tmp_path)


def test_of_racing_api_requests_one_wins_and_every_loser_gets_409_naming_the_winner(
    tmp_path: Path, store_url: str
) -> None:
    servers = [
        start_serve(tmp_path, {}, env={"AGENTPLUG_STATE_URL": store_url}, name=f"gateway-{i}")
        for i in range(2)
    ]
    asker = gateway("ask", store_url, "60000")
    try:
        approval_id = pending_id(asker)
        words = ["allow-once", "deny"] * 3
        racers = [
            gateway("race-api", servers[i % 2].url, servers[i % 2].token, approval_id, word)
            for i, word in enumerate(words)
        ]
        start_together(racers)
        told = [printed(r) for r in racers]
        verdict = printed(asker)
    finally:
        if asker.poll() is None:
            asker.kill()
            asker.wait()
        for server in servers:
            server.stop()
    store = open_store_url(store_url)
    try:
        row = stored_decision(store, approval_id)
    finally:
        store.close()
    assert row is not None and row["by"] == "api"
    assert verdict["resolution"] == row["resolution"]
    assert sorted(t["status"] for t in told) == [200] + [409] * (len(words) - 1), told
    named = f"({row['resolution']} by api at {iso_time(row['at'])})"
    assert [t["message"] for t in told if t["status"] == 409 and named not in t["message"]] == []


def test_a_decision_through_the_api_is_recorded_as_api(tmp_path: Path, store_url: str) -> None:
    server = start_serve(tmp_path, {}, env={"AGENTPLUG_STATE_URL": store_url})
    asker = gateway("ask", store_url, "60000")
    try:
        approval_id = pending_id(asker)
        answer = server.client.post(f"/api/approvals/{approval_id}", json={"decision": "deny"})
        verdict = printed(asker)
    finally:
        if asker.poll() is None:
            asker.kill()
            asker.wait()
        server.stop()
    assert answer.status_code == 200 and answer.json()["by"] == "api"
    assert verdict["resolution"] == "deny"
    store = open_store_url(store_url)
    try:
        row = stored_decision(store, approval_id)
    finally:
        store.close()
    assert row is not None and (row["resolution"], row["by"]) == ("deny", "api")


def test_a_decision_for_a_cancelled_runs_approval_is_409_saying_it_was_cancelled(
    tmp_path: Path, store_url: str
) -> None:
    server = start_serve(tmp_path, {}, env={"AGENTPLUG_STATE_URL": store_url})
    asker = gateway("ask-cancel", store_url)
    try:
        approval_id = pending_id(asker)
        assert asker.stdin is not None
        asker.stdin.write("cancel\n")
        asker.stdin.flush()
        verdict = printed(asker)
        listed = server.client.get("/api/approvals").json()["pending"]
        late = server.client.post(f"/api/approvals/{approval_id}", json={"decision": "allow-once"})
    finally:
        if asker.poll() is None:
            asker.kill()
            asker.wait()
        server.stop()
    assert verdict["resolution"] == "cancelled" and listed == []
    store = open_store_url(store_url)
    try:
        row = stored_decision(store, approval_id)
    finally:
        store.close()
    assert row is not None and row["resolution"] == "cancelled"
    assert late.status_code == 409
    assert late.json()["error"] == (
        f"approval {approval_id!r} was cancelled at {iso_time(row['at'])} (its run was "
        "cancelled); the tool call was not run"
    )
