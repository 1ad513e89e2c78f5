"""The layout search in the browser's and the API's terms: ``/layouts`` (the page and its htmx fragment) and
``/api/layouts``; every row a link to a scenario that fits, every bad field named with its range, never a 500."""

from __future__ import annotations

import re
from html.parser import HTMLParser
from urllib.parse import parse_qsl, urlsplit

import pytest
from fastapi.testclient import TestClient

from app.ledger.estimate import estimate
from app.ledger.scenario import parse_scenario
from app.receipts.layouts import LayoutsOut

QUERY = "/api/layouts?model=llama-3.1-70b&gpus=512"


class Links(HTMLParser):
    """The hrefs of the layouts table's rows."""

    def __init__(self) -> None:
        super().__init__()
        self.in_table = False
        self.hrefs: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "table" and ("class", "layouts") in attrs:
            self.in_table = True
        if tag == "a" and self.in_table:
            self.hrefs.append(dict(attrs)["href"] or "")

    def handle_endtag(self, tag: str) -> None:
        if tag == "table":
            self.in_table = False


def row_links(html: str) -> list[str]:
    parser = Links()
    parser.feed(html)
    return parser.hrefs


def alerts(html: str) -> list[str]:
    return re.findall(r'role="alert">([^<]*)', html)


def test_api_answers_the_issue_s_case(client: TestClient) -> None:
    r = client.get(QUERY)
    assert r.status_code == 200
    data = LayoutsOut.model_validate(r.json())
    assert data.gpus == 512 and len(data.rows) == 20 and not data.search.cut_short
    assert [row.communication_bytes for row in data.rows] == sorted(row.communication_bytes for row in data.rows)
    assert "lower bound" in data.lower_bound and data.device.links.inter_node_bytes_per_s == 50 * 10**9


def test_api_rows_open_scenarios_that_fit(client: TestClient) -> None:
    for row in client.get(QUERY + "&rows=5&rank=time").json()["rows"]:
        s = parse_scenario(dict(parse_qsl(row["link"])))
        assert estimate(s, with_kill_lists=False).ledger.stages[s.stage].peak.fits


@pytest.mark.parametrize(
    ("query", "fields"),
    [("model=llama-3.1-70b&gpus=70000", ["gpus"]), ("model=llama-3.1-70b&gpus=0&rows=99", ["gpus", "rows"]),
     ("model=llama-3.1-70b&device=seed-80gb", ["device"]), ("gpus=8", ["model"]),
     ("model=llama-3.1-70b&params=7B", ["params"]), ("model=llama-3.1-70b&dp=x&global_batch=y", ["global_batch", "dp"]),
     ("model=llama-3.1-70b&nonsense=1", ["nonsense"]), ("model=no-such-model", ["model"])],
)  # fmt: skip
def test_api_bad_input_is_a_422_naming_each_field(client: TestClient, query: str, fields: list[str]) -> None:
    r = client.get("/api/layouts?" + query)
    assert r.status_code == 422
    detail = r.json()["detail"]
    assert [d["field"] for d in detail] == fields
    assert all(d["loc"] == ["query", d["field"]] and d["allowed"] for d in detail)


def test_api_more_gpus_than_the_bound_says_why(client: TestClient) -> None:
    (d,) = client.get("/api/layouts?model=llama-3.1-70b&gpus=70000").json()["detail"]
    assert "more GPUs than the search's bound" in d["msg"] and d["allowed"] == "1 … 65,536"


def test_openapi_documents_the_search_fields(client: TestClient) -> None:
    op = client.get("/openapi.json").json()["paths"]["/api/layouts"]["get"]
    params = {p["name"]: p for p in op["parameters"]}
    assert params["gpus"]["schema"]["maximum"] == 65_536 and params["model"]["required"]
    assert "422" in op["responses"]


def test_the_page_lists_rows_that_link_to_their_scenarios(client: TestClient) -> None:
    r = client.get("/layouts?model=llama-3.1-70b&gpus=512&rows=5")
    assert r.status_code == 200 and "HX-Request" in r.headers["vary"]
    assert '<link rel="alternate" type="application/json" href="/api/layouts?' in r.text
    hrefs = row_links(r.text)
    assert len(hrefs) == 5
    for href in hrefs:
        parts = urlsplit(href)
        assert parts.path == "/"
        page = client.get(href)
        assert page.status_code == 200  # the lab opens it
        s = parse_scenario(dict(parse_qsl(parts.query)))
        assert s.dp * s.tp * s.pp == 512
        assert estimate(s, with_kill_lists=False).ledger.stages[s.stage].peak.fits
    assert "lower bound" in r.text


def test_the_page_shows_a_bad_field_inline_with_its_range(client: TestClient) -> None:
    r = client.get("/layouts?model=llama-3.1-70b&gpus=70000")
    assert r.status_code == 422
    assert alerts(r.text) == [
        "gpus: 70,000 is more GPUs than the search&#39;s bound: its work grows with the layouts (the divisors of the "
        "count), so the count is capped &mdash; allowed: 1 … 65,536"
    ]
    assert 'aria-invalid="true" aria-describedby="e-gpus"' in r.text and 'id="e-gpus"' in r.text
    assert row_links(r.text) == []


def test_the_page_without_a_model_asks_for_one(client: TestClient) -> None:
    """/layouts as linked: the form and a prompt, no error yet; a bad field beside it is still named."""
    r = client.get("/layouts")
    assert r.status_code == 200 and alerts(r.text) == [] and "Name a model" in r.text
    bad = client.get("/layouts?gpus=0")
    assert bad.status_code == 422 and alerts(bad.text)[0].startswith("gpus: ")


def test_a_scenario_field_error_is_named_on_the_page(client: TestClient) -> None:
    r = client.get("/layouts?model=llama-3.1-70b&seq_len=0")
    assert r.status_code == 422 and alerts(r.text)[0].startswith("seq_len: ")


def test_the_fragment_answers_200_with_errors_and_pushes_the_canonical_address(client: TestClient) -> None:
    ok = client.get("/layouts?gpus=512&model=llama-3.1-70b&rows=3&dp=4", headers={"HX-Request": "true"})
    assert ok.status_code == 200 and ok.text.startswith('<div id="layouts">')
    assert ok.headers["hx-push-url"] == "/layouts?model=llama-3.1-70b&rows=3"  # 512 GPUs the default, dp the search's
    assert len(row_links(ok.text)) == 3 and "not read from the address: dp" in ok.text
    bad = client.get("/layouts?model=llama-3.1-70b&gpus=70000", headers={"HX-Request": "true"})
    assert bad.status_code == 200 and alerts(bad.text)


def test_scenario_fields_are_carried_by_the_form(client: TestClient) -> None:
    r = client.get("/layouts?model=llama-3.1-8b&gpus=16&seq_len=8192&rows=2")
    assert '<input type="hidden" name="seq_len" value="8192">' in r.text
    assert "its own inputs kept: seq_len=8192" in r.text and 'href="/?model=llama-3.1-8b&amp;seq_len=8192"' in r.text
    assert all("seq_len=8192" in href for href in row_links(r.text))


def test_head_answers_like_get(client: TestClient) -> None:
    assert client.head("/layouts?model=llama-3.1-8b&gpus=8").status_code == 200


def test_the_address_is_canonical(client: TestClient) -> None:
    """The form sends every field, empty or at its default: the pushed address keeps only what differs, sorted."""
    r = client.get(
        "/layouts?model=llama-3.1-8b&gpus=16&global_batch=&device=h100-80gb&rank=bytes&rows=20&seq_len=",
        headers={"HX-Request": "true"},
    )
    assert r.headers["hx-push-url"] == "/layouts?gpus=16&model=llama-3.1-8b"


def test_a_field_given_twice_is_named(client: TestClient) -> None:
    r = client.get("/api/layouts?model=llama-3.1-8b&gpus=8&gpus=16")
    assert r.status_code == 422 and [d["field"] for d in r.json()["detail"]] == ["gpus"]


def test_unknown_names_are_not_carried_by_the_form(client: TestClient) -> None:
    r = client.get("/layouts?model=llama-3.1-8b&gpus=8&rows=2&bogus=1")
    assert r.status_code == 200 and 'name="bogus"' not in r.text


def test_the_lab_page_links_to_a_search_from_its_own_scenario(client: TestClient) -> None:
    """The answer's links carry the scenario to /layouts, which searches from it (its model, stack and batch)."""
    page = client.get("/", params={"model": "llama-3.1-70b", "stack": "hf-fsdp2", "seq_len": "2048"}).text
    href = re.search(r'<a href="(/layouts\?[^"]+)">Search layouts</a>', page)
    assert href is not None
    target = href.group(1).replace("&amp;", "&")
    assert dict(parse_qsl(urlsplit(target).query)) == {"model": "llama-3.1-70b", "stack": "hf-fsdp2", "seq_len": "2048"}
    links = row_links(client.get(target).text)
    assert links and all("stack=hf-fsdp2" in link and "seq_len=2048" in link for link in links)
