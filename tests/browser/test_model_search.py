"""The model field's search box in real Chromium: it narrows the list by name, family or size, Enter picks the first
match (a model change, so the page updates and the link follows), typing in it never sends a live update, and
without JavaScript it is not there (the whole list is)."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import Browser, Page, Request, expect

from app.ledger.models.known import KNOWN_MODELS

pytestmark = pytest.mark.browser

SHOWN = "#f-model optgroup:not([hidden]) option:not([hidden])"


def test_search_narrows_the_list_and_enter_picks_the_first_match(page: Page, live_server: str) -> None:
    page.goto(live_server + "/?dp=8")
    box = page.locator("#model-search")
    expect(box).to_be_visible()
    updates: list[Request] = []
    page.on("request", lambda r: updates.append(r) if r.headers.get("hx-request") else None)

    box.fill("qwen moe")  # the words may come from the title, the family label or the id
    expect(page.locator(SHOWN)).to_have_count(2)
    ids = page.locator(SHOWN).evaluate_all("options => options.map(o => o.value)")
    assert ids == ["qwen3-30b-a3b", "qwen3-235b-a22b"]
    expect(page.locator("#model-search-count")).to_have_text(f"2 of {len(KNOWN_MODELS)} models")

    box.fill("70b llama")
    expect(page.locator(SHOWN)).to_have_count(3)  # Llama 2 70B, Llama 3.1 70B, Llama 3.3 70B
    box.fill("no such model")
    expect(page.locator(SHOWN)).to_have_count(0)
    expect(page.locator("#model-search-count")).to_have_text(f"0 of {len(KNOWN_MODELS)} models")
    assert updates == []  # the box is not part of the scenario: typing in it updates nothing
    assert "model=" not in page.url

    box.press("Escape")
    expect(page.locator(SHOWN)).to_have_count(len(KNOWN_MODELS))
    expect(page.locator("#model-search-count")).to_have_text("")

    box.fill("a3b")
    box.press("Enter")
    expect(page).to_have_url(re.compile(r"[?&]model=qwen3-30b-a3b(&|$)"))
    expect(page.locator("#f-model")).to_have_value("qwen3-30b-a3b")
    expect(page.locator("#sec-model")).to_contain_text("Qwen3-30B-A3B")
    expect(page.locator("ul.traits")).to_contain_text("Experts in two tensors")


def test_without_javascript_the_whole_list_and_no_search_box(browser: Browser, live_server: str) -> None:
    context = browser.new_context(java_script_enabled=False)
    page = context.new_page()
    page.goto(live_server + "/")
    expect(page.locator("#model-search")).to_be_hidden()
    expect(page.locator(SHOWN)).to_have_count(len(KNOWN_MODELS))
    context.close()
