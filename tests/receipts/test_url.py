"""The receipt's absolute URL under a checked base, and the scenario's canonical link."""

from __future__ import annotations

import pytest
from hypothesis import given

from app.ledger.estimate import estimate
from app.ledger.scenario import DEFAULT_SCENARIO, Scenario, parse_scenario
from app.ledger.scenario.links import canonical_query, link, slug
from app.receipts.receipt import receipt
from app.receipts.url import DEFAULT_BASE_URL, check_base_url, page_url
from tests.support.strategies import names, scenarios


def test_url_is_the_scenarios_page_under_the_base() -> None:
    s = parse_scenario({"params": "13B", "dp": 16})
    e = estimate(s)
    assert receipt(e)["link"] == "dp=16&params=13000000000"  # unchanged: other tools read it
    assert receipt(e)["url"] == f"{DEFAULT_BASE_URL}/?dp=16&params=13000000000" == page_url(s)
    assert (
        receipt(e, "https://lab.example.org/zero3")["url"] == "https://lab.example.org/zero3/?dp=16&params=13000000000"
    )
    assert receipt(e, "https://lab.example.org/")["url"] == "https://lab.example.org/?dp=16&params=13000000000"
    assert receipt(estimate(DEFAULT_SCENARIO))["url"] == f"{DEFAULT_BASE_URL}/"


@given(scenarios(name=names))
def test_url_is_absolute_and_ends_with_the_canonical_query(s: Scenario) -> None:
    data = receipt(estimate(s), "https://lab.example.org")
    assert data["url"].startswith("https://lab.example.org/")
    assert data["url"].endswith("/?" + data["link"] if data["link"] else "/")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("http://127.0.0.1:8000", "http://127.0.0.1:8000"),
        ("https://Lab.Example.org/", "https://lab.example.org"),
        ("https://lab.example.org/zero3/", "https://lab.example.org/zero3"),
        ("http://[::1]:8000", "http://[::1]:8000"),
        ("HTTP://localhost", "http://localhost"),
        ("http://zero3_lab:8000", "http://zero3_lab:8000"),  # a container's name
    ],
)
def test_check_base_url_accepts_plain_bases(text: str, expected: str) -> None:
    assert check_base_url(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        "",
        "127.0.0.1:8000",
        "ftp://example.org",
        "javascript:alert(1)",
        "https://user:pw@example.org",
        "https://example.org/?dp=1",
        "https://example.org/#x",
        "https://example.org:99999",
        "https://exa mple.org",
        "https://example.org\n.evil",
        "https://example.org/a/../b",
        "https://example.org/<script>",
        "https://",
        "https://evil.org\\@example.org",
    ],
)
def test_check_base_url_refuses_anything_else(text: str) -> None:
    with pytest.raises(ValueError, match=r"must|has a"):
        check_base_url(text)


# --------------------------------------------------------------------------- display


def test_canonical_query_omits_defaults() -> None:
    assert canonical_query(DEFAULT_SCENARIO) == ""
    assert link(DEFAULT_SCENARIO) == "/"


def test_canonical_query_sorted() -> None:
    s = parse_scenario({"params": "13B", "dp": 16, "prefetch": 1, "activation_bytes": "30GB"})
    assert canonical_query(s) == "activation_bytes=30000000000&dp=16&params=13000000000&prefetch=1"
    assert link(s, "/lab") == "/lab?activation_bytes=30000000000&dp=16&params=13000000000&prefetch=1"


def test_canonical_query_one_address_per_scenario() -> None:
    """Spelling U = N or gather = param width explicitly gives the same link as leaving them out."""
    explicit = parse_scenario({"params": 1_000, "unit_params": 1_000, "param_bytes": 4, "gather_bytes": 4})
    implicit = parse_scenario({"params": 1_000, "param_bytes": 4})
    assert canonical_query(explicit) == canonical_query(implicit) == "param_bytes=4&params=1000"


def test_canonical_query_encodes_the_name() -> None:
    assert canonical_query(DEFAULT_SCENARIO.with_(name="a b&c")) == "name=a+b%26c"


def test_slug() -> None:
    assert slug(DEFAULT_SCENARIO) == "7000000000p-dp8"
    assert slug(DEFAULT_SCENARIO.with_(name="Llama 2 / 7B")) == "Llama-2-7B"
    assert slug(DEFAULT_SCENARIO.with_(name="ééé")) == "scenario"
