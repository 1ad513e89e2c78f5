"""Bringing a region that loads as it comes into view (htmx `intersect once`) into view."""

from __future__ import annotations

from playwright.sync_api import Page


def bring_into_view(page: Page, selector: str) -> None:
    """Scroll `selector` into view by script.

    The region swaps itself out (`hx-swap="outerHTML"`) as soon as it intersects the viewport, which can happen
    while Playwright's own `scroll_into_view_if_needed` waits for the element to be stable; that call then fails
    with "Element is not attached to the DOM". A script scroll does not wait, so a swap mid-scroll is not an
    error, and the assertions that follow wait for the swapped-in content themselves.
    """
    page.locator(selector).wait_for(state="attached")
    page.evaluate("selector => document.querySelector(selector)?.scrollIntoView({block: 'center'})", selector)
