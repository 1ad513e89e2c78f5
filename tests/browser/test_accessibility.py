"""Accessibility in real Chromium (issue 14, items 9 and 11): axe-core reports no violation on the
page, an error state, a model preset, the comparison (and its error state), presenter mode and a
detail table, at 1440 × 900 and 390 × 844, as loaded and again with every <details> open (the
lazy tables loaded) and every exact-bytes switch on; and a keyboard or touch user reaches the
exact bytes and formulas that a mouse user gets on hover.

axe-core comes from the npm registry, pinned in package.json / package-lock.json (scripts/setup
installs it into node_modules/; it is never committed nor served). The page's CSP allows only its
own scripts, so these tests' browser contexts bypass CSP to inject it.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

import pytest
from playwright.sync_api import Browser, Page, ViewportSize, expect

from tests.browser.lazy import bring_into_view

pytestmark = pytest.mark.browser

ROOT = Path(__file__).resolve().parents[2]
AXE = ROOT / "node_modules" / "axe-core" / "axe.min.js"

VIEWPORTS: dict[str, ViewportSize] = {
    "1440x900": {"width": 1440, "height": 900},
    "390x844": {"width": 390, "height": 844},
}
STATES = {
    "page": "/",
    "error": "/?dp=0",
    "model-preset": "/?preset=model-mixtral-full-dp64",  # redirects to its canonical address
    "compare": "/compare?a=dp%3D8&b=dp%3D64",
    "compare-error": "/compare?a=dp%3D0&b=dp%3D64",
    "presenter": "/?present=1",
    "detail-table": "/lines?dp=16",
    "layouts": "/layouts?model=llama-3.1-8b&gpus=16&rows=5&seq_len=8192",
    "layouts-error": "/layouts?model=llama-3.1-8b&gpus=70000",
    "layouts-empty": "/layouts",
}

# Open every <details> (some fetch their table with htmx when toggled) and turn every switch on.
OPEN_EVERYTHING = """() => {
    document.querySelectorAll('details').forEach(d => { d.open = true; });
    document.querySelectorAll('input.show-exact').forEach(i => { i.checked = true; });
}"""


def pinned_axe_version() -> str:
    lock = json.loads((ROOT / "package-lock.json").read_text(encoding="utf-8"))
    return cast(str, lock["packages"]["node_modules/axe-core"]["version"])


@pytest.fixture(scope="module")
def axe_source() -> Path:
    if not AXE.exists():
        raise RuntimeError(f"{AXE} is missing: run scripts/setup (npm ci installs the pinned axe-core)")
    return AXE


@pytest.fixture(params=list(VIEWPORTS), ids=list(VIEWPORTS))
def axe_page(request: pytest.FixtureRequest, browser: Browser) -> Iterator[Page]:
    """A page at one of the two viewports whose context lets axe in despite the CSP (this module only)."""
    ctx = browser.new_context(viewport=VIEWPORTS[request.param], bypass_csp=True)
    page = ctx.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    yield page
    ctx.close()
    assert errors == []


def describe(violations: list[dict[str, Any]]) -> str:
    """One line per offending element: the rule's id, its impact, the element and the rule's help."""
    lines = []
    for v in violations:
        for node in v["nodes"]:
            target = " ".join(str(t) for t in node["target"])
            lines.append(f"{v['id']} ({v['impact']}) {target}: {v['help']}")
    return "\n".join(lines)


def axe_violations(page: Page, axe: Path) -> list[dict[str, Any]]:
    if not page.evaluate("typeof window.axe !== 'undefined'"):
        page.add_script_tag(path=str(axe))
    assert page.evaluate("axe.version") == pinned_axe_version()
    result = page.evaluate("axe.run(document, {resultTypes: ['violations']})")
    return cast(list[dict[str, Any]], result["violations"])


@pytest.mark.parametrize("state", list(STATES))
def test_axe_finds_no_violation(axe_page: Page, axe_source: Path, live_server: str, state: str) -> None:
    page = axe_page
    page.goto(live_server + STATES[state])
    found = {"as loaded": axe_violations(page, axe_source)}
    page.evaluate(OPEN_EVERYTHING)
    expect(page.locator(".lazy .hint")).to_have_count(0)  # every lazy table has arrived
    found["everything open"] = axe_violations(page, axe_source)
    report = {when: describe(v) for when, v in found.items() if v}
    if report:
        pytest.fail("\n".join(f"axe on {state} ({when}):\n{text}" for when, text in report.items()), pytrace=False)


# Formulas and exact bytes without hover


def stage3_peak_bytes(page: Page) -> str:
    cell = page.locator('table.peak tr[data-stage="3"] td[data-part="total"]')
    return f"{int(cell.get_attribute('data-bytes') or ''):,} B"


def on_screen(page: Page, selector: str) -> bool:
    """Whether the element is laid out readable and inside the viewport (a visually hidden 1 px box is not)."""
    box = page.locator(selector).bounding_box()
    size = page.viewport_size
    assert size is not None
    return (
        box is not None
        and box["width"] > 20
        and box["x"] >= 0
        and box["x"] + box["width"] <= size["width"]
        and box["y"] >= 0
        and box["y"] + box["height"] <= size["height"]
    )


@pytest.fixture
def phone(browser: Browser) -> Iterator[Page]:
    ctx = browser.new_context(viewport=VIEWPORTS["390x844"], has_touch=True, is_mobile=True)
    yield ctx.new_page()
    ctx.close()


PEAK3_EXACT = 'table.peak tr[data-stage="3"] td[data-part="total"] .raw'


def test_a_keyboard_user_reaches_the_exact_bytes_of_the_stage_3_peak(phone: Page, live_server: str) -> None:
    """Keys only, on a phone-sized page where the peak table is wider than the screen: the skip link,
    Tab to the table's switch, Space, Tab into the table's scroll box, → until the cell shows."""
    page = phone
    page.goto(live_server + "/")
    exact = stage3_peak_bytes(page)
    # A screen reader reads the exact bytes at once; on screen they wait for the switch.
    expect(page.locator(PEAK3_EXACT)).to_have_text(exact)
    assert not on_screen(page, PEAK3_EXACT)

    page.keyboard.press("Tab")
    expect(page.locator(":focus")).to_have_text("Skip to the ledger")
    page.keyboard.press("Enter")
    for _ in range(60):
        page.keyboard.press("Tab")
        if page.evaluate("document.activeElement.id") == "exact-peak":
            break
    else:
        pytest.fail("Tab never reached the peak table's exact-bytes switch")
    page.keyboard.press("Space")
    expect(page.locator("#exact-peak")).to_be_checked()

    page.keyboard.press("Tab")
    region = page.get_by_role("region", name="Training peak table")
    expect(region).to_be_focused()
    for _ in range(80):
        if on_screen(page, PEAK3_EXACT):
            break
        page.keyboard.press("ArrowRight")
    else:
        pytest.fail("the arrow keys never scrolled the stage-3 peak's exact bytes into view")
    expect(page.locator(PEAK3_EXACT)).to_have_text(exact)
    assert cast(int, region.evaluate("el => el.scrollLeft")) > 0  # it was the keyboard that scrolled


def test_touch_shows_the_exact_bytes_and_formulas_and_a_live_update_keeps_them(phone: Page, live_server: str) -> None:
    page = phone
    page.goto(live_server + "/")
    page.locator('label[for="exact-peak"]').tap()
    expect(page.locator("#exact-peak")).to_be_checked()
    page.locator('label[for="exact-ckpt"]').tap()
    formula = page.locator("table.checkpoint tr").nth(2).locator(".formula").first
    expect(formula).to_contain_text("× 2 B = ")
    box = formula.bounding_box()
    assert box is not None and box["width"] > 20, box

    # A live update re-renders the results: the switches stay on, the new numbers show.
    page.locator("#f-dp").fill("16")
    expect(page).to_have_url(live_server + "/?dp=16")
    expect(page.locator("#exact-peak")).to_be_checked()
    # the checkpoint's switch is in the sections a live update defers: on again once they load, in view
    bring_into_view(page, "#lower")
    expect(page.locator("#exact-ckpt")).to_be_checked()
    expect(page.locator(PEAK3_EXACT)).to_have_text(stage3_peak_bytes(page))
    box = page.locator(PEAK3_EXACT).bounding_box()
    assert box is not None and box["width"] > 20, box


def test_every_cell_formula_is_in_the_ledger_lines_one_keypress_away(page: Page, live_server: str) -> None:
    """The persistent table's formulas (a hover title too) are all in the ledger lines' table, which a
    <summary> opens from the keyboard."""
    page.goto(live_server + "/")
    titles: list[str] = page.evaluate("[...document.querySelectorAll('table.stages td[title]')].map(td => td.title)")
    assert titles
    page.locator("details.lines summary").focus()
    page.keyboard.press("Enter")
    lines = page.locator("details.lines table")
    expect(lines).to_be_visible()
    shown = set(lines.locator("code").all_inner_texts())
    assert set(titles) <= shown
