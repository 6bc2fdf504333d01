"""While the database is down, ``state.retry_ms`` bounds every wait of a store call.

A real PostgreSQL server is stopped under an open store (or a store is opened on a port
with nothing listening). Each call must give up with ``StateStoreUnavailable`` after about
its retry budget, connecting included. Issue 25 item 15.

The stores here are given a connect timeout of 600 s and a budget of 0.6 s. Before the
fix every call waited the connect timeout (the pool's wait for a connection: 5 s by
default, so a blocked approval took 10 s with ``retry_ms=600``); here that would be
600 s. A call must return within :data:`BOUND_S`, a hundred times the budget and a tenth
of the connect timeout: a bound on behaviour, far from any speed claim.
"""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from agentplug.store import StateStore, StateStoreUnavailable, open_store_url

BUDGET_MS = 600
CONNECT_TIMEOUT_S = 600.0
BOUND_S = 60.0


def _open(url: str) -> StateStore:
    from agentplug.store.postgres import PostgresStore

    return PostgresStore(url, retry_ms=BUDGET_MS, connect_timeout_s=CONNECT_TIMEOUT_S)


def _outcome_within(call: Callable[[], Any], seconds: float) -> Any:
    """What ``call()`` returned or raised; fails the test when it is still waiting after
    ``seconds``."""
    outcome: list[Any] = []

    def run() -> None:
        try:
            outcome.append(call())
        except BaseException as exc:  # handed to the test below
            outcome.append(exc)

    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    worker.join(timeout=seconds)
    assert not worker.is_alive(), f"still waiting after {seconds} s (retry_ms={BUDGET_MS})"
    return outcome[0]


def _once_back(call: Callable[[], Any]) -> Any:
    """``call()`` once the restarted server takes connections again: the pool reconnects
    in the background (with its own back-off), so the first calls after the restart may
    still give up after the budget. The deadline is a hang guard, not a timing."""
    deadline = time.monotonic() + BOUND_S
    while True:
        try:
            return call()
        except StateStoreUnavailable:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)


@contextmanager
def _stopped(postgres_server: Any) -> Iterator[None]:
    postgres_server.pg_ctl("stop", "-m", "fast")
    try:
        yield
    finally:
        postgres_server.pg_ctl("start")


def _atomic_put(store: StateStore) -> None:
    with store.atomic("lock"):
        store.put("ns", "k", 2)


@pytest.mark.parametrize(
    "call",
    [
        lambda s: s.get("ns", "k"),
        lambda s: s.put("ns", "k", 2),
        lambda s: s.append("ns", "q", 1),
        _atomic_put,
        lambda s: s.wait_change("ch", 0, 30),
    ],
    ids=["get", "put", "append", "atomic", "wait_change"],
)
def test_a_call_while_the_database_is_stopped_gives_up_after_the_retry_budget(
    postgres_server: Any, postgres_url: str, call: Callable[[StateStore], Any]
) -> None:
    store = _open(postgres_url)
    try:
        store.put("ns", "k", 1)
        with _stopped(postgres_server):
            outcome = _outcome_within(lambda: call(store), BOUND_S)
        assert isinstance(outcome, StateStoreUnavailable), outcome
        assert "unreachable" in str(outcome)
        assert _once_back(lambda: store.get("ns", "k")) == 1  # and the store works again
    finally:
        store.close()


def test_an_approval_asked_while_the_database_is_stopped_is_blocked_after_the_budget(
    postgres_server: Any, postgres_url: str
) -> None:
    from agentplug.services.approvals import ApprovalBroker
    from agentplug_hookspecs.tools import ApprovalRequest

    store = _open(postgres_url)
    broker = ApprovalBroker(None, store=store, shared=True)
    request = ApprovalRequest(title="Run web search", description="d", timeout_ms=30_000)
    try:
        with _stopped(postgres_server):
            verdict = _outcome_within(
                lambda: asyncio.run(broker.request("web_search", {}, request)), BOUND_S
            )
    finally:
        store.close()
    assert verdict.allowed is False
    assert "state store is unavailable" in str(verdict.reason)


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_opening_a_store_with_nothing_listening_fails_within_the_bound() -> None:
    pytest.importorskip("psycopg")
    url = f"postgresql://postgres@127.0.0.1:{_closed_port()}/agentplug"
    outcome = _outcome_within(lambda: _open(url), BOUND_S)
    assert isinstance(outcome, StateStoreUnavailable), outcome
    assert "unreachable" in str(outcome)


def test_opening_a_store_on_a_stopped_server_fails_within_the_bound(
    postgres_server: Any, postgres_url: str
) -> None:
    with _stopped(postgres_server):
        outcome = _outcome_within(lambda: open_store_url(postgres_url, retry_ms=BUDGET_MS), BOUND_S)
    assert isinstance(outcome, StateStoreUnavailable), outcome
