"""Presenter mode in real Chromium (issue 14, items 3 and 11): a projector's 853 × 480 CSS px, help
hidden and type larger, the kill list stepped one mutant at a time with the keyboard and announced,
the flag kept through live updates, history and the toggle, and every mutant listed without
JavaScript."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser, Page, ViewportSize, expect

from app.ledger.scenario import Scenario
from app.web.views.results import kills

pytestmark = pytest.mark.browser

PROJECTOR: ViewportSize = {"width": 853, "height": 480}  # 1280 × 720 at 150 % zoom
MUTANTS = kills(Scenario(dp=16)).scenario


@pytest.fixture
def projector(browser: Browser) -> Iterator[Page]:
    ctx = browser.new_context(viewport=PROJECTOR)
    page = ctx.new_page()
    errors: list[str] = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(str(e)))
    yield page
    ctx.close()
    assert errors == []


def shown_card(page: Page) -> int:
    """The 1-based index of the one mutant card shown (0 when none or several are)."""
    shown: list[int] = page.evaluate(
        """() => [...document.querySelectorAll('[data-step-card]')]
                 .map((c, i) => c.hidden ? 0 : i + 1).filter(Boolean)"""
    )
    return shown[0] if len(shown) == 1 else 0


def expect_card(page: Page, index: int) -> None:
    cards = page.locator("[data-step-card]")
    expect(cards.nth(index - 1)).to_be_visible()
    expect(cards.nth(index - 1)).to_contain_text(MUTANTS[index - 1].id)
    assert shown_card(page) == index


def test_presenter_mode_steps_through_the_kill_list_with_the_keyboard(
    projector: Page, live_server: str, artifacts: Path
) -> None:
    page = projector
    page.goto(live_server + "/?dp=16&present=1")
    expect(page.locator("body")).to_have_class("present")

    # help hidden, type and chart text larger, the capacity labelled, the current D marked
    expect(page.locator("#h-dp")).to_be_hidden()
    assert page.locator(".help").first.is_hidden()
    assert page.evaluate("getComputedStyle(document.documentElement).fontSize") == "20px"
    assert page.evaluate("getComputedStyle(document.querySelector('.fit-chart .tick')).fontSize") == "14px"
    expect(page.locator(".fit-chart .now-label")).to_have_text("D = 16")
    expect(page.locator(".fit-chart .now-line")).to_have_count(1)
    expect(page.locator(".peak-chart .capacity-label")).to_have_text("capacity 80.00 GB")

    # the stepper replaces the scenario's list; the first mutant shows, with its rule, check, message
    stepper = page.locator("[data-stepper]")
    expect(stepper).to_be_visible()
    expect(page.locator(".stepped-list")).to_be_hidden()
    expect_card(page, 1)
    first = page.locator("[data-step-card]").first
    expect(first).to_contain_text(MUTANTS[0].rule)
    expect(first).to_contain_text(MUTANTS[0].check)
    expect(first).to_contain_text(MUTANTS[0].message)
    previous = page.get_by_role("button", name="Previous mutant")
    following = page.get_by_role("button", name="Next mutant")
    expect(previous).to_have_attribute("aria-disabled", "true")
    page.locator("[data-stepper]").scroll_into_view_if_needed()
    page.screenshot(path=str(artifacts / "presenter-853x480.png"), caret="initial")  # no injected style (CSP)

    # the buttons are reachable and work from the keyboard; the status announces the mutant
    following.focus()
    page.keyboard.press("Enter")
    expect_card(page, 2)
    status = page.locator("[data-step-status]")
    expect(status).to_have_text(
        f"Mutant 2 of {len(MUTANTS)}, {MUTANTS[1].id}: {MUTANTS[1].rule}. "
        f"Killed by {MUTANTS[1].check}: {MUTANTS[1].message}"
    )
    page.keyboard.press("ArrowRight")  # ←/→ step with the focus on the stepper …
    expect_card(page, 3)
    page.evaluate("document.activeElement.blur()")
    page.keyboard.press("ArrowLeft")  # … and with the focus nowhere in particular
    expect_card(page, 2)
    expect(status).to_contain_text(f"Mutant 2 of {len(MUTANTS)}")
    page.keyboard.press("Space")  # not a step key: nothing moves (the page may scroll)
    expect_card(page, 2)
    for _ in range(len(MUTANTS) + 2):  # past the end: the last one stays
        page.keyboard.press("ArrowRight")
    expect_card(page, len(MUTANTS))
    expect(following).to_have_attribute("aria-disabled", "true")
    expect(previous).not_to_have_attribute("aria-disabled", "true")
    following.click(force=True)  # an inactive (aria-disabled) button does nothing
    expect_card(page, len(MUTANTS))

    # arrows typed in a field move its caret, not the mutant
    page.locator("#f-dp").focus()
    page.keyboard.press("ArrowLeft")
    expect_card(page, len(MUTANTS))

    # a live update keeps presenter mode, its address, and the mutant on screen
    page.locator("#f-dp").fill("32")
    expect(page).to_have_url(live_server + "/?dp=32&present=1")
    expect(page.locator("[data-step-card]").first).to_be_attached()
    expect(page.locator(".fit-chart .now-label")).to_have_text("D = 32")
    expect(page.locator("body")).to_have_class("present")
    expect(stepper).to_be_visible()
    expect_card(page, len(MUTANTS))
    toggle = page.locator("#present-toggle")
    expect(toggle).to_have_attribute("href", "/?dp=32")

    # the toggle leaves presenter mode on the same scenario, and history comes back into it
    toggle.click()
    expect(page).to_have_url(live_server + "/?dp=32")
    expect(page.locator("body")).not_to_have_class("present")
    expect(page.locator("#h-dp")).to_be_visible()
    expect(page.locator(".stepped-list")).to_be_visible()
    expect(page.locator("[data-stepper]")).to_have_count(0)
    expect(page.locator("#f-dp")).to_have_value("32")
    page.go_back()
    expect(page).to_have_url(live_server + "/?dp=32&present=1")
    expect(page.locator("body")).to_have_class("present")
    expect(page.locator("[data-stepper]")).to_be_visible()


def test_the_toggle_enters_presenter_mode_on_the_scenario_on_screen(projector: Page, live_server: str) -> None:
    page = projector
    page.goto(live_server + "/?dp=16")
    toggle = page.get_by_role("link", name="Presenter mode")
    expect(toggle).to_have_attribute("href", "/?dp=16&present=1")
    page.locator("#f-dp").fill("24")
    expect(page).to_have_url(live_server + "/?dp=24")
    expect(toggle).to_have_attribute("href", "/?dp=24&present=1")  # follows the live update
    toggle.focus()
    page.keyboard.press("Enter")
    expect(page).to_have_url(live_server + "/?dp=24&present=1")
    expect(page.locator("body")).to_have_class("present")
    expect(page.locator("#f-dp")).to_have_value("24")
    expect(page.get_by_role("link", name="Leave presenter mode")).to_have_attribute("href", "/?dp=24")
    expect_card(page, 1)


def test_without_javascript_presenter_mode_lists_every_mutant(browser: Browser, live_server: str) -> None:
    ctx = browser.new_context(viewport=PROJECTOR, java_script_enabled=False)
    page = ctx.new_page()
    page.goto(live_server + "/?dp=16&present=1")
    expect(page.locator("#h-dp")).to_be_hidden()  # the stylesheet alone hides the help
    expect(page.locator("[data-stepper]")).to_be_hidden()
    rows = page.locator(".stepped-list tr[data-mutant]")
    expect(rows).to_have_count(len(MUTANTS))
    for i in range(len(MUTANTS)):
        expect(rows.nth(i)).to_be_visible()
    # the form carries the flag, so a plain submit stays in presenter mode
    page.locator("#f-dp").fill("64")
    with page.expect_navigation():
        page.locator("#f-dp").press("Enter")
    assert "present=1" in page.url.split("?", 1)[1].split("&")
    expect(page.locator("body")).to_have_class("present")
    ctx.close()
