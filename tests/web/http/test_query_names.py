"""Names in a query string, alike for the page and the API: a scenario field given twice (``dp=16&dp=32&dp=64``) is
refused naming it (the API, the downloads, the page inline, each side of a comparison), never the last value
silently; a name that is no field (``DP``) is a 422 from the API and a notice in view on the page, which says what
it most likely meant."""

from __future__ import annotations

import re

import pytest
from fastapi.testclient import TestClient


@pytest.mark.parametrize("path", ["/api/estimate", "/api/mutations", "/receipt.json", "/receipt.csv",
                                  "/ds_config.json"])  # fmt: skip
def test_a_repeated_field_is_a_422_naming_it(client: TestClient, path: str) -> None:
    r = client.get(f"{path}?dp=16&dp=32&dp=64")
    assert r.status_code == 422
    (detail,) = r.json()["detail"]
    assert (detail["loc"], detail["field"]) == (["query", "dp"], "dp")
    assert "given 3 times" in detail["msg"]


def test_the_page_names_a_repeated_field_inline(client: TestClient) -> None:
    for headers in ({}, {"HX-Request": "true"}):
        text = client.get("/?model=llama-2-7b&dp=16&dp=32", headers=headers).text
        alerts = re.findall(r'role="alert"[^>]*>([^<]*)', text)
        assert any(a.startswith("dp: given 2 times in the query string") for a in alerts), alerts


def test_a_repeated_non_field_is_left_alone(client: TestClient) -> None:
    """Only scenario fields: the page's own parameters (present, keep) are not scenario inputs."""
    assert client.get("/api/estimate?dp=16").status_code == 200
    assert client.get("/?dp=16&present=1&present=1").status_code == 200


@pytest.mark.parametrize("path", ["/compare", "/compare.csv", "/compare.json"])
def test_a_side_with_a_repeated_field_names_it(client: TestClient, path: str) -> None:
    r = client.get(f"{path}?a=dp%3D8&b=dp%3D8%26dp%3D16")
    assert r.status_code == 422
    assert "given 2 times in the side" in r.text


def test_the_compare_forms_field_given_twice_names_it(client: TestClient) -> None:
    r = client.get("/compare?a=dp%3D8&dp=16&dp=32")
    assert r.status_code == 422
    assert "given 2 times in the query string" in r.text


def test_a_mixed_case_name_is_refused_by_the_api_and_noticed_by_the_page(client: TestClient) -> None:
    r = client.get("/api/estimate?DP=8")
    assert r.status_code == 422
    assert [d["field"] for d in r.json()["detail"]] == ["DP"]
    for headers in ({}, {"HX-Request": "true"}):
        text = client.get("/?model=llama-2-7b&DP=8", headers=headers).text
        (notice,) = re.findall(r'<p class="notice" role="alert" id="ignored-names">([^<]*)</p>', text)
        assert "DP (did you mean dp?)" in notice
        assert 'id="ignored-names"' in text.split('id="results"')[1][:400]  # first thing in the results section
