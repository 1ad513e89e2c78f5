"""A newcomer sees the run first (issue 28, item 1), in real Chromium at the four viewports the issue names: the
run's verdict, its peak and, when it does not fit, the smallest change that fits, on the first screen; for the
seed scenario, an FSDP2 preset and a pasted config; and after a live update the change arrives by itself."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator

import pytest
from playwright.sync_api import Browser, Page, ViewportSize, expect

from app.ledger.models.known import KNOWN_BY_ID

pytestmark = pytest.mark.browser

VIEWPORTS: dict[str, ViewportSize] = {
    "1440x900": {"width": 1440, "height": 900},
    "1280x720": {"width": 1280, "height": 720},
    "853x480": {"width": 853, "height": 480},
    "390x844": {"width": 390, "height": 844},
}


@pytest.fixture(params=list(VIEWPORTS), ids=list(VIEWPORTS))
def sized(request: pytest.FixtureRequest, browser: Browser) -> Iterator[Page]:
    ctx = browser.new_context(viewport=VIEWPORTS[request.param])
    page = ctx.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    yield page
    ctx.close()
    assert errors == []


def _sees_the_run(page: Page) -> None:
    for part in ("#run-verdict", "#run-cause"):
        expect(page.locator(part)).to_be_in_viewport()
    expect(page.locator("#run-verdict")).to_contain_text("peak")


@pytest.mark.parametrize("path", ["/", "/?preset=seed-fsdp2"])
def test_the_run_is_the_first_thing_seen(sized: Page, live_server: str, path: str) -> None:
    sized.goto(live_server + path)
    _sees_the_run(sized)


def test_a_run_that_does_not_fit_shows_its_smallest_change_first(sized: Page, live_server: str) -> None:
    sized.goto(live_server + "/?model=llama-2-7b&stack=hf-fsdp2&capacity_bytes=40GB&micro_batch=2")
    _sees_the_run(sized)
    change = sized.locator("#run-change")
    expect(change).to_contain_text("Smallest change that fits")
    expect(change).to_be_in_viewport()
    # a live update defers the fit finder: the change is asked for at once and replaces its placeholder
    sized.locator("#f-micro_batch").fill("4")
    expect(sized.locator("#run-verdict")).to_contain_text("Does not fit")
    expect(change).to_contain_text("Smallest change that fits")
    expect(sized.locator("#run-change[data-pending]")).to_have_count(0)


def test_a_pasted_config_leads_with_its_run(sized: Page, live_server: str) -> None:
    sized.goto(live_server + "/?preset=seed-fsdp2")
    sized.locator("details.paste summary").click()
    sized.locator("#config").fill(json.dumps(dict(KNOWN_BY_ID["mistral-7b-v0.1"].config)))
    sized.get_by_role("button", name="Use this config").click()
    expect(sized).to_have_url(re.compile(r"model=cfg%3Amodel_type%3Dmistral"))
    _sees_the_run(sized)
    expect(sized.locator("#run")).to_contain_text("custom mistral config")


def test_presenter_mode_shows_the_demo_inputs_beside_the_verdict(browser: Browser, live_server: str) -> None:
    """Issue 28: at 853 × 480 the D field was ~7,000 px below the verdict, so the room could not see D change."""
    ctx = browser.new_context(viewport=VIEWPORTS["853x480"])
    try:
        page = ctx.new_page()
        page.goto(live_server + "/?model=llama-2-7b&present=1")
        for name in ("dp", "micro_batch"):
            expect(page.locator(f"#f-{name}")).to_be_in_viewport()
        expect(page.locator("#run-verdict")).to_be_in_viewport()
        page.locator("#f-dp").fill("1")
        expect(page.locator("#run-verdict")).to_contain_text("Does not fit")
        expect(page.locator("#run-verdict")).to_be_in_viewport()
        expect(page.locator("#f-dp")).to_be_in_viewport()
        # each demo input once: the form carries no field twice
        assert page.locator('#scenario [name="dp"]').count() == 1
    finally:
        ctx.close()


def test_on_a_wide_screen_the_run_stays_in_view_while_a_late_field_is_edited(browser: Browser,
                                                                              live_server: str) -> None:  # fmt: skip
    """Issue 28: the answer scrolled away while editing. The form scrolls in its own pane beside the results."""
    ctx = browser.new_context(viewport=VIEWPORTS["1440x900"])
    try:
        page = ctx.new_page()
        page.goto(live_server + "/?model=llama-2-7b")
        late = page.locator("#f-ranks_per_node")
        late.fill("4")
        expect(late).to_be_in_viewport()
        expect(page.locator("#run-verdict")).to_be_in_viewport()
        expect(page).to_have_url(re.compile(r"ranks_per_node=4"))
        expect(page.locator("#run-verdict")).to_be_in_viewport()
    finally:
        ctx.close()
