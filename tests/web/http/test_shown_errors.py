"""A live update swaps the error slots the page shows filled (``X-Shown-Errors``, sent by static/app.js) and those
of the fields with an error now, not every field's empty slot: each out-of-band swap costs the browser
(docs/performance.md). Without the header every slot comes, as before."""

from __future__ import annotations

import re

import pytest
from fastapi.testclient import TestClient

from app.ledger.scenario import FIELD_NAMES
from app.web.app import create_app

LIVE = {"HX-Request": "true"}


@pytest.fixture(scope="module")
def client() -> TestClient:
    return TestClient(create_app())


def _slots(html: str) -> dict[str, str]:
    """Each error slot in the fragment: its field and its text."""
    found = re.findall(r'<div class="field-error" id="e-([a-z_]+)" hx-swap-oob="true">(.*?)</div>', html, re.S)
    return {name: re.sub(r"<[^>]+>", "", text).strip() for name, text in found}


def test_without_the_header_every_slot_is_swapped(client: TestClient) -> None:
    assert set(_slots(client.get("/", params={"dp": "12"}, headers=LIVE).text)) == set(FIELD_NAMES)


def test_with_nothing_shown_only_the_fields_in_error_come(client: TestClient) -> None:
    assert _slots(client.get("/", params={"dp": "12"}, headers={**LIVE, "X-Shown-Errors": "-"}).text) == {}
    bad = _slots(client.get("/", params={"dp": "0"}, headers={**LIVE, "X-Shown-Errors": "-"}).text)
    assert list(bad) == ["dp"] and bad["dp"].startswith("dp: ") and "allowed: 1" in bad["dp"]


def test_a_shown_error_that_is_fixed_comes_back_empty(client: TestClient) -> None:
    fixed = _slots(client.get("/", params={"dp": "12"}, headers={**LIVE, "X-Shown-Errors": "dp seq_len"}).text)
    assert fixed == {"dp": "", "seq_len": ""}


def test_the_fragment_varies_on_the_header(client: TestClient) -> None:
    vary = client.get("/", params={"dp": "12"}, headers=LIVE).headers["vary"]
    assert "X-Shown-Errors" in vary
