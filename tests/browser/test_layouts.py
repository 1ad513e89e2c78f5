"""The layout search in real Chromium: a search made by htmx swaps the table in and pushes its address, a bad field
is named beside it, and a row opens its scenario in the lab."""

from __future__ import annotations

from urllib.parse import parse_qsl, urlsplit

import pytest
from playwright.sync_api import Page, expect

pytestmark = pytest.mark.browser


def test_search_swaps_the_table_and_a_row_opens_its_scenario(page: Page, live_server: str) -> None:
    page.goto(f"{live_server}/layouts?model=llama-3.1-8b&gpus=8&rows=3")
    rows = page.locator("table.layouts tbody tr")
    expect(rows).to_have_count(3)
    page.fill("#f-gpus", "16")
    page.fill("#f-rows", "4")
    page.click("button[type=submit]")
    expect(rows).to_have_count(4)
    expect(page).to_have_url(f"{live_server}/layouts?gpus=16&model=llama-3.1-8b&rows=4")  # pushed by the fragment
    href = rows.first.locator("a").get_attribute("href")
    assert href is not None
    fields = dict(parse_qsl(urlsplit(href).query))
    assert int(fields.get("dp", 8)) * int(fields.get("tp", 1)) * int(fields.get("pp", 1)) == 16
    rows.first.locator("a").click()
    expect(page).to_have_url(f"{live_server}{href}")
    expect(page.locator("#verdict")).to_be_visible()


def test_a_bad_field_is_named_beside_it(page: Page, live_server: str) -> None:
    page.goto(f"{live_server}/layouts?model=llama-3.1-8b&gpus=8&rows=2")
    page.fill("#f-gpus", "70000")
    page.click("button[type=submit]")
    alert = page.locator("#e-gpus [role=alert]")
    expect(alert).to_contain_text("gpus: 70,000 is more GPUs than the search's bound")
    expect(alert).to_contain_text("allowed: 1 … 65,536")
    expect(page.locator("#f-gpus")).to_have_attribute("aria-invalid", "true")
    expect(page.locator("table.layouts")).to_have_count(0)
