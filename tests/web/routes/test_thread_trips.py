"""Downloads and API answers make one trip each to the thread pool (issue 32, item 5: a mixed room).

Every trip waits in the pool's queue (anyio's limiter, first come first served, Settings.threads tokens) behind
every request queued before it: under 64 mixed clients a receipt that made five trips (the dependency, the route,
one per 16 KB chunk) took seconds, an API answer that made three (the dependency, the route, FastAPI's check of
the returned data) about a second. So the scenario's dependency is ``async def``, the routes compute their whole
answer in one ``run_in_threadpool``, and the files stream from the event loop (app/web/http/streaming.py).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

import anyio.to_thread
import pytest
from fastapi.testclient import TestClient
from starlette.types import Receive, Scope, Send

from app.ledger.estimate import estimate
from app.ledger.scenario import parse_scenario
from app.receipts.answers import whole_estimate
from app.receipts.csv_rows import csv_text
from app.receipts.receipt import receipt
from app.web.app import create_app

MODEL = "dp=64&model=llama-2-7b"  # a receipt of ~75 KB: five chunks of 16 KB
SIDES = "a=dp%3D8%26model%3Dllama-2-7b&b=dp%3D64%26model%3Dllama-2-7b"


@pytest.fixture
def trips(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The functions sent to the thread pool while the test runs (Starlette's ``run_in_threadpool`` and
    ``iterate_in_threadpool`` and FastAPI's plain ``def`` routes and dependencies all go through
    ``anyio.to_thread.run_sync``)."""
    sent: list[str] = []
    real: Callable[..., Awaitable[Any]] = anyio.to_thread.run_sync

    async def counted(func: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        sent.append(
            str(getattr(func, "__name__", None) or getattr(getattr(func, "func", None), "__name__", repr(func)))
        )
        return await real(func, *args, **kwargs)

    monkeypatch.setattr(anyio.to_thread, "run_sync", counted)
    return sent


@pytest.mark.parametrize(
    "path",
    [
        f"/receipt.csv?{MODEL}",
        f"/receipt.json?{MODEL}",
        f"/api/estimate?{MODEL}",
        f"/api/mutations?{MODEL}",
        f"/compare.csv?{SIDES}",
        f"/compare.json?{SIDES}",
    ],
)
def test_a_download_or_an_api_answer_makes_one_trip_to_the_thread_pool(
    client: TestClient, trips: list[str], path: str
) -> None:
    r = client.get(path)
    assert r.status_code == 200
    assert len(trips) == 1, trips


def test_posting_a_scenario_makes_one_trip_too(client: TestClient, trips: list[str]) -> None:
    r = client.post("/api/estimate", json={"dp": 64, "model": "llama-2-7b"})
    assert r.status_code == 200
    assert len(trips) == 1, trips


def test_a_refused_scenario_makes_no_trip(client: TestClient, trips: list[str]) -> None:
    for path in ("/receipt.csv?dp=0", "/api/estimate?dp=0", "/compare.csv?a=dp%3D0"):
        assert client.get(path).status_code == 422
    assert trips == []


def test_the_receipt_still_streams_in_chunks() -> None:
    """Made in one trip, sent from the event loop in 16 KB chunks: several body messages, no Content-Length."""
    messages: list[MutableMapping[str, Any]] = []
    app = create_app()

    async def recorded(scope: Scope, receive: Receive, send: Send) -> None:
        async def recording_send(message: MutableMapping[str, Any]) -> None:
            if scope["type"] == "http":
                messages.append(message)
            await send(message)

        await app(scope, receive, recording_send)

    with TestClient(recorded) as client:
        r = client.get(f"/receipt.csv?{MODEL}", headers={"Accept-Encoding": "identity"})
    start, *bodies = messages
    assert r.status_code == start["status"] == 200
    assert b"content-length" not in dict(start["headers"])
    assert len([b for b in bodies if b.get("body")]) >= 4
    text = b"".join(b.get("body", b"") for b in bodies).decode("utf-8")
    assert text == r.text == csv_text(estimate(parse_scenario({"dp": "64", "model": "llama-2-7b"})), bom=True)


def test_the_shared_estimate_is_the_fresh_one_with_its_searches_done() -> None:
    s = parse_scenario({"dp": "32", "model": "mistral-7b-v0.1", "micro_batch": "2"})
    shared = whole_estimate(s)
    assert whole_estimate(parse_scenario({"model": "mistral-7b-v0.1", "micro_batch": "2", "dp": "32"})) is shared
    assert {"fit", "offload_fit"} <= vars(shared).keys()  # searched before it is shared: nothing left to compute
    fresh = estimate(s)
    assert receipt(shared) == receipt(fresh)
    assert csv_text(shared) == csv_text(fresh)
