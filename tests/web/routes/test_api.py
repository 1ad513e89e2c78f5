"""The JSON API and downloads: receipts, kill lists, headers and every error path."""

from __future__ import annotations

import asyncio
import csv
import io
import threading
from collections.abc import MutableMapping
from typing import Any
from urllib.parse import parse_qsl

import pytest
from fastapi.testclient import TestClient
from starlette.requests import Request

from app.ledger.estimate import estimate
from app.ledger.scenario import parse_scenario
from app.receipts.csv_format import read_csv
from app.receipts.csv_rows import csv_text, scenario_inputs
from app.receipts.url import DEFAULT_BASE_URL, check_base_url
from app.web.app import create_app
from app.web.http.settings import Settings, public_base_url


def test_get_estimate_reads_human_sizes(client: TestClient) -> None:
    r = client.get("/api/estimate?params=7B&dp=8&activation_bytes=20GB")
    assert r.status_code == 200
    body = r.json()
    assert body["schema_version"] == 2
    assert [st["persistent"]["total"] for st in body["stages"]] == [
        112_000_000_000, 38_500_000_000, 26_250_000_000, 14_000_000_000,
    ]  # fmt: skip
    assert body["stages"][3]["peak"]["gather"] == 700_000_000


def test_post_estimate_equals_get(client: TestClient) -> None:
    body = {"params": 13_000_000_000, "dp": 64, "prefetch": 1, "name": "13B"}
    posted = client.post("/api/estimate", json=body)
    assert posted.status_code == 200
    got = client.get("/api/estimate", params={k: str(v) for k, v in body.items()})
    assert posted.json() == got.json()


def test_mutations_endpoint_reports_survivors_with_reasons(client: TestClient) -> None:
    body = client.get("/api/mutations?dp=1").json()
    survivors = {m["id"]: m["message"] for m in body["mutations"] if not m["killed"]}
    assert survivors["shard-params-stage2"] == "survived: dp = 1: sharding is the identity"
    assert all(m["killed"] for m in body["reference_mutations"])


@pytest.mark.parametrize(
    ("query", "fields"),
    [
        ("dp=0", ["dp"]),
        ("dp=8.5&param_bytes=3", ["param_bytes", "dp"]),
        ("params=1e400", ["params"]),
        ("params=NaN&capacity_bytes=inf", ["params", "capacity_bytes"]),
        ("bogus=1", ["bogus"]),
        ("params=100&unit_params=101", ["unit_params"]),
        ("name=" + "x" * 81, ["name"]),
        ("cp=3", ["cp"]),  # 2 × cp = 6 does not divide seq_len 4,096 (torch's head-tail load balancer)
        ("cp=2000", ["cp"]),
        ("cp=2&pp=2&model=llama-3.1-8b", ["cp"]),
    ],
)
def test_bad_query_is_422_naming_each_field(client: TestClient, query: str, fields: list[str]) -> None:
    for path in ("/api/estimate", "/api/mutations", "/receipt.json", "/receipt.csv"):
        r = client.get(f"{path}?{query}")
        assert r.status_code == 422, path
        detail = r.json()["detail"]
        assert sorted(d["loc"][1] for d in detail) == sorted(fields)
        assert all(d["msg"].startswith(d["loc"][1] + ":") and "allowed" in d["msg"] for d in detail)


@pytest.mark.parametrize(
    ("body", "fields"),
    [
        ({"dp": 0}, ["dp"]),
        ({"dp": True}, ["dp"]),
        ({"params": 7.5e9 + 0.5}, ["params"]),  # JSON numbers must be whole
        ({"params": 7e9}, []),  # 7e9 is a whole JSON number: read exactly
        ({"params": "7B"}, []),  # strings are read like the query string's
        ({"colour": "red"}, ["colour"]),
    ],
)
def test_bad_json_body_is_422_naming_each_field(client: TestClient, body: dict[str, object], fields: list[str]) -> None:
    r = client.post("/api/estimate", json=body)
    if not fields:
        assert r.status_code == 200
        return
    assert r.status_code == 422
    assert sorted(d["loc"][1] for d in r.json()["detail"]) == fields


@pytest.mark.parametrize("raw", [b"", b"[1", b"[1, 2]", b'"x"', b"null", b"{" * 5000])
def test_malformed_json_body_is_422_not_500(client: TestClient, raw: bytes) -> None:
    r = client.post("/api/estimate", content=raw, headers={"content-type": "application/json"})
    assert r.status_code == 422
    assert r.json()["detail"][0]["loc"] == ["body"]


def test_downloads_are_attachments_named_for_the_scenario(client: TestClient) -> None:
    j = client.get("/receipt.json?name=Llama 70B/64&dp=64")
    assert j.status_code == 200
    assert j.headers["content-disposition"] == 'attachment; filename="zero3-lab-Llama-70B-64.json"'
    c = client.get("/receipt.csv?dp=64")
    assert c.headers["content-disposition"] == 'attachment; filename="zero3-lab-7000000000p-dp64.csv"'
    assert c.headers["content-type"] == "text/csv; charset=utf-8"
    rows = list(csv.DictReader(io.StringIO(c.content.decode("utf-8-sig"), newline="")))
    assert {"stage", "ledger", "category", "bytes"} <= set(rows[0])


@pytest.mark.parametrize("query", ["", "dp=16&params=13B", "model=llama-2-7b&act_policy=selective&tp=4"])
def test_the_csv_download_starts_with_a_bom_and_reads_back_as_the_receipt(client: TestClient, query: str) -> None:
    """Excel needs the BOM to read UTF-8; Python's csv module with utf-8-sig reads the same rows."""
    data = client.get(f"/receipt.csv?{query}").content
    assert data.startswith(b"\xef\xbb\xbfstage,ledger,category,bytes,")
    assert data.count(b"\xef\xbb\xbf") == 1
    e = estimate(parse_scenario(dict(parse_qsl(query))))
    assert data.decode("utf-8-sig") == csv_text(e)
    rows = list(csv.DictReader(io.StringIO(data.decode("utf-8-sig"), newline="")))
    assert rows == read_csv(data) == read_csv(csv_text(e))
    assert parse_scenario(scenario_inputs(rows), allow_unknown=False) == e.scenario


def test_url_is_absolute_under_the_request_base(client: TestClient) -> None:
    for r in (
        client.get("/api/estimate?dp=16&params=13B"),
        client.post("/api/estimate", json={"dp": 16, "params": "13B"}),
        client.get("/receipt.json?dp=16&params=13B"),
    ):
        body = r.json()
        assert body["link"] == "dp=16&params=13000000000"
        assert body["url"] == "http://testserver/?dp=16&params=13000000000"
    assert client.get("/api/estimate").json()["url"] == "http://testserver/"


def test_url_follows_the_host_a_client_used(client: TestClient) -> None:
    r = client.get("/api/estimate?dp=16", headers={"host": "lab.example.org:8443"})
    assert r.json()["url"] == "http://lab.example.org:8443/?dp=16"


@pytest.mark.parametrize("host", ["evil.org/x?y=", "a b", "evil.org\\@x", "<script>"])
def test_a_malformed_host_header_is_not_echoed_into_url(client: TestClient, host: str) -> None:
    r = client.get("/api/estimate?dp=16", headers={"host": host})
    if r.status_code == 200:
        url = r.json()["url"]
        assert url.endswith("/?dp=16")
        assert check_base_url(url.removesuffix("/?dp=16")) == url.removesuffix("/?dp=16")
        assert "<" not in url and " " not in url and "@" not in url


def test_url_keeps_the_root_path_of_an_app_mounted_under_a_prefix() -> None:
    with TestClient(create_app(), root_path="/lab") as c:
        assert c.get("/api/estimate?dp=16").json()["url"] == "http://testserver/lab/?dp=16"


def test_a_base_that_is_not_plain_falls_back_to_the_default() -> None:
    """Defence in depth behind Starlette's own Host check: a root path with a blank, say."""
    app = create_app()
    scope = {"type": "http", "app": app, "scheme": "http", "server": ("testserver", 80), "root_path": "/a b",
             "path": "/", "headers": [(b"host", b"testserver")], "query_string": b""}  # fmt: skip
    assert public_base_url(Request(scope)) == DEFAULT_BASE_URL
    assert public_base_url(Request({**scope, "root_path": "/ok"})) == "http://testserver/ok"


def test_zero3_lab_public_url_wins_over_any_host_header(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ZERO3_LAB_PUBLIC_URL", "https://lab.example.org/zero3/")
    with TestClient(create_app()) as c:
        for headers in ({}, {"host": "evil.example.com"}):
            for r in (
                c.get("/api/estimate?dp=16", headers=headers),
                c.post("/api/estimate", json={"dp": 16}, headers=headers),
                c.get("/receipt.json?dp=16", headers=headers),
            ):
                assert r.json()["url"] == "https://lab.example.org/zero3/?dp=16"


@pytest.mark.parametrize("bad", ["lab.example.org", "https://lab.example.org/?x", "javascript:alert(1)"])
def test_a_bad_zero3_lab_public_url_stops_the_app_at_start(monkeypatch: pytest.MonkeyPatch, bad: str) -> None:
    monkeypatch.setenv("ZERO3_LAB_PUBLIC_URL", bad)
    with pytest.raises(ValueError, match="ZERO3_LAB_PUBLIC_URL"):
        Settings.from_env()


def test_an_empty_zero3_lab_public_url_means_unset(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ZERO3_LAB_PUBLIC_URL", " ")
    assert Settings.from_env().public_url is None


def test_a_public_url_given_in_code_is_checked_too() -> None:
    assert Settings(public_url="https://Lab.example.org/").public_url == "https://lab.example.org"
    with pytest.raises(ValueError, match="http"):
        Settings(public_url="lab.example.org")


def test_the_routes_run_on_the_settings_few_threads() -> None:
    """The plain ``def`` routes are CPU work under one GIL: the app runs them on Settings.threads threads,
    not anyio's default 40 (fewer served more under the workshop's load). Out of bounds is refused."""
    import anyio.to_thread

    from app.web.app import create_app

    for threads in (1, 4):
        with TestClient(create_app(Settings(threads=threads))) as client:
            limiter = client.portal.call(anyio.to_thread.current_default_thread_limiter)  # type: ignore[union-attr]
            assert limiter.total_tokens == threads
            assert client.get("/?dp=16").status_code == 200
    for bad in (0, 65):
        with pytest.raises(ValueError, match="threads"):
            Settings(threads=bad)


def test_unknown_route_and_method_are_4xx(client: TestClient) -> None:
    assert client.get("/nope").status_code == 404
    assert client.post("/").status_code == 405
    assert client.get("/api/nope").json() == {"detail": "Not Found"}


def test_the_csv_download_streams_in_a_few_chunks_not_row_by_row() -> None:
    """Row by row, each of the ~130 rows took a thread-pool hop: 15.6 ms a download, and under load
    the queue pushed every other request's p99 to seconds. Now a few chunks of 16 KB."""
    app = create_app()
    bodies: list[bytes] = []
    requested = False

    async def receive() -> dict[str, object]:
        nonlocal requested
        if not requested:
            requested = True
            return {"type": "http.request", "body": b"", "more_body": False}
        await asyncio.sleep(3600)  # the client stays until the response is complete
        return {"type": "http.disconnect"}

    async def send(message: MutableMapping[str, Any]) -> None:
        if message["type"] == "http.response.body" and message.get("body"):
            bodies.append(message["body"])

    scope = {
        "type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "GET", "scheme": "http",
        "path": "/receipt.csv", "raw_path": b"/receipt.csv", "root_path": "", "query_string": b"dp=64",
        "headers": [(b"host", b"testserver")], "client": ("127.0.0.1", 1), "server": ("testserver", 80),
    }  # fmt: skip
    # In a thread of its own: an earlier test may leave an event loop running in this one.
    worker = threading.Thread(target=lambda: asyncio.run(app(scope, receive, send)))
    worker.start()
    worker.join(timeout=30)
    rows = b"".join(bodies).count(b"\r\n")
    assert rows > 100
    assert len(bodies) <= 3
