"""The lab in real Chromium: live edits, history, errors, no-JS, downloads, keyboard, origin, screenshots.

Every expected number here is an exact integer: either derived by hand from the spec's formula
(stage-3 persistent = ⌈N ÷ D⌉ × (2 + 2 + 4 + 8) for the seed's widths) or read from the JSON API
for the same scenario, so the page, the API and the downloads are held to one receipt.
"""

from __future__ import annotations

import csv
import io
import json
import re
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast
from urllib.parse import urlsplit

import pytest
from playwright.sync_api import Browser, BrowserContext, ConsoleMessage, Locator, Page, Request, Response, expect

from app.ledger.scenario.links import link
from app.ledger.scenario.presets import PRESET_BY_ID
from tests.browser.lazy import bring_into_view

pytestmark = pytest.mark.browser

# The seed scenario's widths: parameters 2 B, gradients 2 B, FP32 master 4 B, Adam 2 × 4 B.
SEED_BYTES_PER_PARAM = 2 + 2 + 4 + 2 * 4
SEED_PARAMS = 7_000_000_000
SEED_DP = 8
DP_MAX = 131_072
PARAMS_MAX = 10**13
KEYBOARD_PRESET = "llama2-7b-dp8"  # the first preset whose title starts with "L"


def preset_address(preset_id: str) -> str:
    """Where a preset lands: ``/?preset=<id>&<its canonical query>``."""
    return f"/?preset={preset_id}&" + link(PRESET_BY_ID[preset_id].scenario)[2:]


def stage3_persistent(params: int, dp: int) -> int:
    """Stage 3 shards every class: ⌈N ÷ D⌉ elements per rank, times the summed widths."""
    return -(-params // dp) * SEED_BYTES_PER_PARAM


def stage3_total(page: Page) -> Locator:
    """The stage-3 cell of the persistent table's total row."""
    return page.locator('table.stages tfoot td[data-stage="3"][data-class="total"]')


def fetch_json(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=10) as response:
        return json.loads(response.read())


def api_receipt(base: str, query: str) -> dict[str, Any]:
    receipt: dict[str, Any] = fetch_json(f"{base}/api/estimate" + (f"?{query}" if query else ""))
    return receipt


def dom_ledger(page: Page) -> dict[tuple[int, str, str], int]:
    """Every persistent cell and peak cell of the page, keyed like the CSV: (stage, ledger, category)."""
    cells = page.evaluate(
        """() => {
            const out = [];
            for (const td of document.querySelectorAll('table.stages td[data-bytes]')) {
                out.push([+td.dataset.stage, 'persistent', td.dataset.class, td.dataset.bytes]);
            }
            for (const td of document.querySelectorAll('table.peak tr[data-stage] td[data-part]')) {
                const part = td.dataset.part;
                const ledger = part === 'headroom' ? 'fit' : 'peak';
                out.push([+td.closest('tr').dataset.stage, ledger, part, td.dataset.bytes]);
            }
            return out;
        }"""
    )
    return {(int(s), str(ledger), str(cat)): int(b) for s, ledger, cat, b in cast(list[list[Any]], cells)}


def receipt_ledger(receipt: dict[str, Any]) -> dict[tuple[int, str, str], int]:
    """The same cells from a JSON receipt (the peak's subtotal, formulas and instants have no cell)."""
    out: dict[tuple[int, str, str], int] = {}
    for st in receipt["stages"]:
        stage = int(st["stage"])
        for cat, value in st["persistent"].items():
            out[(stage, "persistent", cat)] = int(value)
        for cat, value in st["peak"].items():
            # the peak's parts are its integers (schema 2 adds its kind, instant and instant list)
            if cat != "subtotal" and type(value) is int:
                out[(stage, "peak", cat)] = value
        out[(stage, "fit", "headroom")] = int(st["headroom_bytes"])
    return out


def path_and_query(url: str) -> str:
    parts = urlsplit(url)
    return parts.path + (f"?{parts.query}" if parts.query else "")


@pytest.fixture
def server_errors(page: Page) -> list[str]:
    """Every 5xx answer the page receives during a test."""
    bad: list[str] = []

    def record(response: Response) -> None:
        if response.status >= 500:
            bad.append(f"{response.status} {response.url}")

    page.on("response", record)
    return bad


def test_edit_updates_url_and_ledger_then_reload_back_forward(page: Page, live_server: str) -> None:
    page.goto(live_server + "/")
    cell = stage3_total(page)
    expect(cell).to_have_attribute("data-bytes", str(stage3_persistent(SEED_PARAMS, SEED_DP)))

    page.locator("#f-dp").fill("16")
    expect(page).to_have_url(live_server + "/?dp=16")
    expect(cell).to_have_attribute("data-bytes", str(stage3_persistent(SEED_PARAMS, 16)))
    assert stage3_persistent(SEED_PARAMS, 16) == 7_000_000_000
    expect(page.locator("a#share")).to_have_attribute("href", "/?dp=16")
    # Every persistent and peak cell equals the API's receipt for the pushed URL.
    assert dom_ledger(page) == receipt_ledger(api_receipt(live_server, "dp=16"))

    page.reload()
    expect(page).to_have_url(live_server + "/?dp=16")
    expect(page.locator("#f-dp")).to_have_value("16")
    expect(cell).to_have_attribute("data-bytes", "7000000000")
    assert dom_ledger(page) == receipt_ledger(api_receipt(live_server, "dp=16"))

    # A second edit: the pushed URL stays canonical (sorted, "13B" written as an integer).
    page.locator("#f-params").fill("13B")
    expect(page).to_have_url(live_server + "/?dp=16&params=13000000000")
    expect(cell).to_have_attribute("data-bytes", str(stage3_persistent(13_000_000_000, 16)))

    page.go_back()
    expect(page).to_have_url(live_server + "/?dp=16")
    expect(cell).to_have_attribute("data-bytes", "7000000000")
    # params is a derived field: empty means its default, and the hint beside it says which
    expect(page.locator("#f-params")).to_have_value("")
    expect(page.locator("#d-params")).to_contain_text("7,000,000,000")
    expect(page.locator("#f-dp")).to_have_value("16")

    page.go_back()
    expect(page).to_have_url(live_server + "/")
    expect(cell).to_have_attribute("data-bytes", str(stage3_persistent(SEED_PARAMS, SEED_DP)))
    expect(page.locator("#f-dp")).to_have_value(str(SEED_DP))
    assert dom_ledger(page) == receipt_ledger(api_receipt(live_server, ""))

    page.go_forward()
    expect(page).to_have_url(live_server + "/?dp=16")
    expect(cell).to_have_attribute("data-bytes", "7000000000")
    expect(page.locator("#f-dp")).to_have_value("16")

    page.go_forward()
    expect(page).to_have_url(live_server + "/?dp=16&params=13000000000")
    expect(cell).to_have_attribute("data-bytes", "13000000000")
    assert dom_ledger(page) == receipt_ledger(api_receipt(live_server, "dp=16&params=13000000000"))


def test_bad_values_show_inline_alerts_and_recover(
    page: Page, live_server: str, server_errors: list[str], artifacts: Path
) -> None:
    fragments: list[int] = []
    page.on(
        "response",
        lambda r: fragments.append(r.status) if r.request.headers.get("hx-request") == "true" else None,
    )
    page.goto(live_server + "/")
    dp, params = page.locator("#f-dp"), page.locator("#f-params")
    results = page.locator("#results")

    dp.fill("0")
    dp_alert = page.locator('#e-dp [role="alert"]')
    expect(dp_alert).to_be_visible()
    expect(dp_alert).to_contain_text(re.compile(r"\bdp\b"))
    expect(dp_alert).to_contain_text(f"1 … {DP_MAX:,}")
    expect(dp).to_have_attribute("aria-describedby", re.compile(r"(^|\s)e-dp(\s|$)"))
    expect(dp).to_have_attribute("aria-invalid", "true")
    expect(results.get_by_role("heading", name="Waiting for valid input")).to_be_visible()
    expect(results.locator("td[data-bytes]")).to_have_count(0)

    params.fill("7.5")
    params_alert = page.locator('#e-params [role="alert"]')
    expect(params_alert).to_contain_text(re.compile(r"\bparams\b"))
    expect(params_alert).to_contain_text(f"1 … {PARAMS_MAX:,}")
    expect(params).to_have_attribute("aria-invalid", "true")
    expect(dp).to_have_attribute("aria-invalid", "true")  # still bad
    expect(results).to_contain_text("2 fields need attention")
    page.screenshot(path=str(artifacts / "lab-error-state.png"), full_page=True)

    dp.fill("16")
    expect(page.locator('#e-dp [role="alert"]')).to_have_count(0)
    expect(dp).not_to_have_attribute("aria-invalid", "true")
    expect(params).to_have_attribute("aria-invalid", "true")
    expect(results).to_contain_text("1 field needs attention")

    params.fill("7B")
    expect(page.locator('#scenario [role="alert"]')).to_have_count(0)
    expect(params).not_to_have_attribute("aria-invalid", "true")
    expect(page).to_have_url(live_server + "/?dp=16")
    expect(stage3_total(page)).to_have_attribute("data-bytes", "7000000000")

    # The same error, loaded as a full page (a reload or a shared link): rendered by the server.
    response = page.goto(live_server + "/?dp=0")
    assert response is not None
    assert response.status == 422
    expect(page.locator('#e-dp [role="alert"]')).to_contain_text(f"1 … {DP_MAX:,}")
    expect(page.locator("#f-dp")).to_have_attribute("aria-invalid", "true")
    expect(page.locator("#results")).to_contain_text("Waiting for valid input")

    assert fragments
    assert set(fragments) == {200}, fragments
    assert server_errors == []


@pytest.fixture
def no_js_page(browser: Browser) -> Iterator[Page]:
    ctx = browser.new_context(viewport={"width": 1400, "height": 900}, java_script_enabled=False)
    yield ctx.new_page()
    ctx.close()


def test_form_works_without_javascript(no_js_page: Page, live_server: str) -> None:
    page = no_js_page
    page.goto(live_server + "/")
    assert page.evaluate("1 + 1") == 2  # Playwright's own evaluation still works; the page's scripts do not
    assert page.evaluate("typeof window.htmx") == "undefined"

    page.locator("#f-dp").fill("16")
    with page.expect_navigation():
        page.locator("#f-dp").press("Enter")
    assert urlsplit(page.url).path == "/"
    assert "dp=16" in urlsplit(page.url).query.split("&")
    expect(stage3_total(page)).to_have_attribute("data-bytes", "7000000000")
    expect(page.locator("a#share")).to_have_attribute("href", "/?dp=16")
    expect(page.locator("#f-dp")).to_have_value("16")

    page.locator("#f-params").fill("13B")
    with page.expect_navigation():
        page.get_by_role("button", name="Compute").click()
    expect(stage3_total(page)).to_have_attribute("data-bytes", str(stage3_persistent(13_000_000_000, 16)))
    expect(page.locator("a#share")).to_have_attribute("href", "/?dp=16&params=13000000000")
    assert dom_ledger(page) == receipt_ledger(api_receipt(live_server, "dp=16&params=13000000000"))

    # The long tables are fetched when their <details> opens; without JavaScript, its link opens
    # the same table as a page of its own, with a way back.
    page.locator("details.lines summary").click()
    with page.expect_navigation():
        page.locator("details.lines").get_by_role("link", name="the table on a page of its own").click()
    assert path_and_query(page.url) == "/lines?dp=16&params=13000000000"
    expect(page.locator("main table tbody tr")).to_have_count(16)
    expect(page.locator("main")).to_contain_text("⌈13,000,000,000 ÷ 16⌉ = 812,500,000")
    with page.expect_navigation():
        page.get_by_role("link", name="← back to the scenario").click()
    expect(stage3_total(page)).to_have_attribute("data-bytes", str(stage3_persistent(13_000_000_000, 16)))

    # The preset form is a plain GET form too: pick, press Load, land on the canonical link (the
    # preset's id first, so the address says which preset it still is).
    page.locator("#preset").select_option(KEYBOARD_PRESET)
    with page.expect_navigation():
        page.get_by_role("button", name="Load").click()
    assert path_and_query(page.url) == preset_address(KEYBOARD_PRESET)
    expect(page.locator("#results h2")).to_have_text(PRESET_BY_ID[KEYBOARD_PRESET].title)


def test_downloads_match_the_api_receipt(page: Page, live_server: str) -> None:
    query = "contingency_pct=5&dp=16&params=13000000000"
    page.goto(f"{live_server}/?{query}")
    expected = api_receipt(live_server, query)
    assert expected["link"] == query

    json_link = page.get_by_role("link", name="JSON receipt")
    csv_link = page.get_by_role("link", name="full ledger CSV")
    summary_link = page.get_by_role("link", name="Download summary CSV")
    expect(json_link).to_have_attribute("href", f"/receipt.json?{query}")
    expect(csv_link).to_have_attribute("href", f"/receipt.csv?{query}")

    with page.expect_download() as summary_info:
        summary_link.click()
    summary = summary_info.value
    assert summary.suggested_filename == "zero3-lab-13000000000p-dp16.summary.csv"
    summary_rows = list(csv.DictReader(io.StringIO(Path(summary.path()).read_text(encoding="utf-8-sig"))))
    assert [int(r["peak_bytes"]) for r in summary_rows] == [st["peak"]["total"] for st in expected["stages"]]

    with page.expect_download() as json_info:
        json_link.click()
    json_download = json_info.value
    assert json_download.failure() is None
    assert json_download.suggested_filename == "zero3-lab-13000000000p-dp16.json"
    assert json.loads(Path(json_download.path()).read_text(encoding="utf-8")) == expected

    with page.expect_download() as csv_info:
        csv_link.click()
    csv_download = csv_info.value
    assert csv_download.failure() is None
    assert csv_download.suggested_filename == "zero3-lab-13000000000p-dp16.csv"
    text = Path(csv_download.path()).read_text(encoding="utf-8-sig")  # with or without a BOM
    reader = csv.DictReader(io.StringIO(text, newline=""))
    assert reader.fieldnames is not None
    assert reader.fieldnames[:4] == ["stage", "ledger", "category", "bytes"]
    rows = list(reader)

    from_csv: dict[tuple[int, str, str], int] = {}
    for row in rows:
        if row["ledger"] in ("persistent", "peak", "fit"):
            key = (int(row["stage"]), row["ledger"], row["category"])
            assert key not in from_csv, f"duplicate CSV row {key}"
            from_csv[key] = int(row["bytes"])
    # Every (stage, ledger, category) both ways: no row missing, none extra, every value equal.
    assert from_csv == receipt_ledger(expected)

    communication = {int(r["stage"]): int(r["bytes"]) for r in rows if r["ledger"] == "communication"}
    assert communication == {int(st["stage"]): int(st["communication_bytes"]) for st in expected["stages"]}
    inputs = {r["category"]: r["value"] for r in rows if r["ledger"] == "input"}
    assert inputs == {k: str(v) for k, v in expected["scenario"].items()}
    # And the page shows the very same numbers.
    assert dom_ledger(page) == receipt_ledger(expected)


def active_id(page: Page) -> str:
    return str(page.evaluate("document.activeElement ? document.activeElement.id : ''"))


def tab_to(page: Page, element_id: str, key: str = "Tab", limit: int = 40) -> int:
    """Press ``key`` until the element with ``element_id`` has focus; return how many presses it took."""
    for presses in range(1, limit + 1):
        page.keyboard.press(key)
        if active_id(page) == element_id:
            return presses
    raise AssertionError(f"{key} never reached #{element_id} in {limit} presses (focus is on {active_id(page)!r})")


def test_keyboard_only(page: Page, live_server: str) -> None:
    page.goto(live_server + "/")
    # The skip link is the first stop, then the form's fields in order.
    page.keyboard.press("Tab")
    expect(page.locator("a.skip")).to_be_focused()
    tab_to(page, "f-dp")
    page.keyboard.press("Tab")
    expect(page.locator("#f-stage")).to_be_focused()  # the parallelism group: D, the stage run, the shard group
    page.keyboard.press("Tab")
    expect(page.locator("#f-shard_group")).to_be_focused()
    page.keyboard.press("Shift+Tab")
    page.keyboard.press("Shift+Tab")
    expect(page.locator("#f-dp")).to_be_focused()

    page.keyboard.press("ControlOrMeta+A")
    page.keyboard.type("32")
    expect(page).to_have_url(live_server + "/?dp=32")
    expect(stage3_total(page)).to_have_attribute("data-bytes", str(stage3_persistent(SEED_PARAMS, 32)))
    expect(page.locator("#f-dp")).to_be_focused()  # the swap leaves the focus where it was

    # Leaving the field fires `change` (one more identical request); let it finish before navigating.
    with page.expect_response(lambda r: r.request.headers.get("hx-request") == "true"):
        page.keyboard.press("Shift+Tab")
    tab_to(page, "preset", key="Shift+Tab")

    # Typing a letter on a focused <select> picks the first matching option (and fires `change`,
    # which no longer loads it); Enter loads it.
    target = preset_address(KEYBOARD_PRESET)
    page.keyboard.press("L")
    expect(page.locator("#preset")).to_have_value(KEYBOARD_PRESET)
    with page.expect_navigation(url=live_server + target):
        page.keyboard.press("Enter")
    assert path_and_query(page.url) == target
    expect(page.locator("#f-name")).to_have_value(PRESET_BY_ID[KEYBOARD_PRESET].scenario.name)
    expect(page.locator("#results h2")).to_have_text(PRESET_BY_ID[KEYBOARD_PRESET].title)
    query = link(PRESET_BY_ID[KEYBOARD_PRESET].scenario)[2:]
    assert dom_ledger(page) == receipt_ledger(api_receipt(live_server, query))


def test_no_foreign_requests_and_no_console_errors(context: BrowserContext, live_server: str) -> None:
    page = context.new_page()
    origin = urlsplit(live_server)
    foreign: list[str] = []
    requests: list[str] = []
    problems: list[str] = []

    def on_request(request: Request) -> None:
        parts = urlsplit(request.url)
        requests.append(request.url)
        if parts.scheme in ("data", "blob", "about"):
            return
        if (parts.scheme, parts.netloc) != (origin.scheme, origin.netloc):
            foreign.append(request.url)

    def on_console(message: ConsoleMessage) -> None:
        if message.type in ("error", "assert"):
            problems.append(f"console.{message.type}: {message.text}")

    context.on("request", on_request)
    page.on("console", on_console)
    page.on("pageerror", lambda error: problems.append(f"pageerror: {error}"))

    page.goto(live_server + "/")
    page.locator("#f-dp").fill("16")
    expect(page).to_have_url(live_server + "/?dp=16")
    page.locator("#f-dp").fill("0")
    expect(page.locator('#e-dp [role="alert"]')).to_be_visible()
    page.locator("#f-dp").fill("32")
    expect(stage3_total(page)).to_have_attribute("data-bytes", str(stage3_persistent(SEED_PARAMS, 32)))
    page.locator("details.lines summary").click()
    page.locator("details.devices summary").click()
    page.get_by_role("button", name="Copy link").click()
    expect(page.locator(".copied")).not_to_be_empty()
    page.locator("#f-master_bytes").select_option("0")
    expect(page).to_have_url(re.compile(r"master_bytes=0"))
    page.go_back()
    expect(page).to_have_url(live_server + "/?dp=32")
    expect(stage3_total(page)).to_have_attribute("data-bytes", str(stage3_persistent(SEED_PARAMS, 32)))
    page.locator("#preset").select_option("seed-fsdp2")
    with page.expect_navigation():
        page.get_by_role("button", name="Load").click()
    expect(page.locator("#results h2")).to_have_text(PRESET_BY_ID["seed-fsdp2"].title)
    page.get_by_role("link", name="Link to this scenario").click()
    expect(page.locator("#results h2")).to_have_text(PRESET_BY_ID["seed-fsdp2"].title)

    assert len(requests) > 10
    assert foreign == []
    assert problems == []


def test_full_page_screenshot(page: Page, live_server: str, artifacts: Path) -> None:
    page.goto(live_server + "/")
    expect(stage3_total(page)).to_have_attribute("data-bytes", str(stage3_persistent(SEED_PARAMS, SEED_DP)))
    target = artifacts / "lab-full-page.png"
    page.screenshot(path=str(target), full_page=True)
    assert target.stat().st_size > 10_000
    # Nothing spills sideways: the page is as wide as the viewport.
    widths = page.evaluate("[document.documentElement.scrollWidth, window.innerWidth]")
    scroll_width, inner_width = cast(list[int], widths)
    assert scroll_width <= inner_width


def test_back_into_an_invalid_scenario_shows_its_errors(page: Page, live_server: str) -> None:
    problems: list[str] = []
    page.on("console", lambda m: problems.append(m.text) if m.type == "error" else None)
    page.goto(live_server + "/")
    page.locator("#f-dp").fill("0")
    expect(page.locator('#e-dp [role="alert"]')).to_be_visible()
    invalid_url = page.url
    # Leaving the field settles the edit (its entry stays); the next edit opens an entry of its own.
    with page.expect_response(lambda r: r.request.headers.get("hx-request") == "true"):
        page.locator("#f-dp").blur()
    page.locator("#f-dp").fill("16")
    expect(page).to_have_url(live_server + "/?dp=16")
    expect(page.locator('#e-dp [role="alert"]')).to_have_count(0)

    page.go_back()
    expect(page).to_have_url(invalid_url)
    # The address bar says dp=0, so the page must show dp=0 and its error, not the ledger for dp=16.
    expect(page.locator("#f-dp")).to_have_value("0")
    expect(page.locator('#e-dp [role="alert"]')).to_contain_text(f"1 … {DP_MAX:,}")
    expect(page.locator("#results")).to_contain_text("Waiting for valid input")
    assert problems == []

    page.go_forward()
    expect(page).to_have_url(live_server + "/?dp=16")
    expect(stage3_total(page)).to_have_attribute("data-bytes", "7000000000")


def test_narrow_viewport_has_no_horizontal_scroll(browser: Browser, live_server: str, artifacts: Path) -> None:
    ctx = browser.new_context(viewport={"width": 390, "height": 844}, is_mobile=True, has_touch=True)
    try:
        page = ctx.new_page()
        page.goto(live_server + "/")
        expect(stage3_total(page)).to_have_attribute("data-bytes", str(stage3_persistent(SEED_PARAMS, SEED_DP)))
        page.screenshot(path=str(artifacts / "lab-narrow.png"), full_page=False)
        widths = page.evaluate(
            "[document.documentElement.scrollWidth, document.documentElement.clientWidth,"
            " Math.round(document.querySelector('aside.inputs').getBoundingClientRect().right)]"
        )
        scroll_width, client_width, inputs_right = cast(list[int], widths)
        # Wide tables scroll inside their own .scroll boxes; the page itself must not scroll sideways.
        assert max(scroll_width, inputs_right) <= client_width, widths
    finally:
        ctx.close()


@pytest.mark.browser
def test_picking_a_model_fills_the_ledger_from_its_config(page: Page, live_server: str) -> None:
    """Llama-2-7B: 6,738,415,616 params, U = one 202,383,360-parameter layer; stage 3 at D = 8 holds
    ⌈6,738,415,616 ÷ 8⌉ = 842,301,952 elements × 16 B = 13,476,831,232 B."""
    page.goto(live_server + "/?dp=8")
    page.locator("#f-model").select_option("llama-2-7b")
    expect(page).to_have_url(live_server + "/?model=llama-2-7b")
    expect(stage3_total(page)).to_have_attribute("data-bytes", str(842_301_952 * 16))
    expect(page.locator("#sec-model")).to_contain_text("Llama-2-7B")
    expect(page.locator("#d-params")).to_contain_text("from config: 6,738,415,616")
    expect(page.locator("#d-activation_bytes")).to_contain_text("modelled")
    assert dom_ledger(page) == receipt_ledger(api_receipt(live_server, "model=llama-2-7b"))

    # full recomputation shrinks the modelled activations; the fit finder follows
    page.locator("#f-act_policy").select_option("full")
    expect(page).to_have_url(live_server + "/?act_policy=full&model=llama-2-7b")
    receipt = api_receipt(live_server, "act_policy=full&model=llama-2-7b")
    peak3 = page.locator('table.peak tr[data-stage="3"] td[data-part="activations"]')
    # the schedule-aware peak holds the activations still saved at its instant
    expect(peak3).to_have_attribute("data-bytes", str(receipt["stages"][3]["peak"]["activations"]))
    smallest = page.locator('table.fit tr[data-stage="3"] td[data-fit="smallest_dp"]')
    bring_into_view(page, "#lower")  # a live update loads the fit finder as it comes into view
    expect(smallest).to_have_text(f"{receipt['fit']['stages'][3]['smallest_dp']:,}")

    # the chart's table twin loads when opened
    page.locator("details.fit-numbers summary").click()
    expect(page.locator("details.fit-numbers table.fit-curve tbody tr")).to_have_count(18)


@pytest.mark.browser
def test_the_fit_finder_comes_inline_when_on_screen_and_is_deferred_when_not(page: Page, live_server: str) -> None:
    """A live update defers the sections below the peak when they are off screen, and brings them
    inline when they are on screen as the edit is sent (the page says so, X-In-View): one request either way
    until they are scrolled to, and the page does not move. A placeholder keeps the sections' height and loads
    them (/lower) when it comes into view."""
    page.goto(live_server + "/?model=llama-2-7b")
    requests: list[str] = []
    page.on("request", lambda r: requests.append(r.url) if r.url.startswith(live_server + "/") else None)
    frame = "new Promise(done => requestAnimationFrame(() => requestAnimationFrame(() => setTimeout(done))))"

    page.evaluate("document.getElementById('h-fit').scrollIntoView({block: 'start'})")
    page.evaluate(frame)  # the IntersectionObserver has seen it
    before = page.evaluate("window.scrollY")
    top = page.evaluate("document.getElementById('h-fit').getBoundingClientRect().top")
    # an edit made without scrolling the page (the field is off screen), as a keyboard user's change is
    page.locator("#f-dp").evaluate("el => { el.value = '16'; el.dispatchEvent(new Event('change', {bubbles: true})); }")
    expect(page).to_have_url(live_server + "/?dp=16&model=llama-2-7b")
    expect(page.locator("#lower .fit-chart .now-label")).to_have_text("D = 16")
    expect(page.locator("[data-pending]#lower")).to_have_count(0)
    assert page.evaluate("window.scrollY") == before
    assert abs(page.evaluate("document.getElementById('h-fit').getBoundingClientRect().top") - top) < 2
    assert [u for u in requests if "/lower?" in u] == []  # inline: no second request

    # at the top of the page the fit finder is off screen: the update defers it until it is scrolled to
    page.evaluate("window.scrollTo(0, 0)")
    page.evaluate(frame)
    height = page.evaluate("document.getElementById('lower').offsetHeight")
    # set without scrolling (fill() would scroll the field, and with it the fit finder, into view)
    page.locator("#f-dp").evaluate("el => { el.value = '32'; el.dispatchEvent(new Event('change', {bubbles: true})); }")
    expect(page).to_have_url(live_server + "/?dp=32&model=llama-2-7b")
    expect(page.locator("[data-pending]#lower")).to_have_count(1)
    assert page.evaluate("document.getElementById('lower').offsetHeight") == height  # the page keeps its length
    assert [u for u in requests if "/lower?" in u] == []
    bring_into_view(page, "#lower")
    expect(page.locator("#lower .fit-chart .now-label")).to_have_text("D = 32")
    assert [u for u in requests if "/lower?" in u] == [live_server + "/lower?dp=32&model=llama-2-7b"]


def test_pasting_a_config_json_uses_it(page: Page, live_server: str) -> None:
    from app.ledger.models.known import KNOWN_BY_ID

    page.goto(live_server + "/?dp=4")
    page.locator("details.paste summary").click()
    page.locator("#config").fill(json.dumps(dict(KNOWN_BY_ID["gpt2"].config)))
    page.get_by_role("button", name="Use this config").click()
    expect(page).to_have_url(re.compile(r"dp=4&model=cfg%3Amodel_type%3Dgpt2"))
    expect(page.locator("#sec-model")).to_contain_text("custom gpt2 config")
    expect(page.locator("#results")).to_contain_text("124,439,808")


@pytest.mark.browser
def test_a_paste_on_an_fsdp2_run_keeps_its_layout_and_names_what_moved_in_view(page: Page, live_server: str) -> None:
    """Issue 28's report: after the FSDP2 preset a paste reset the BF16 all-gather to FP32 and kept the old name.
    Now the layout stays, the name goes, and the notice naming it is in view where the page lands."""
    from app.ledger.models.known import KNOWN_BY_ID

    page.goto(live_server + "/?preset=seed-fsdp2")
    page.locator("details.paste summary").click()
    page.locator("#config").fill(json.dumps(dict(KNOWN_BY_ID["mistral-7b-v0.1"].config)))
    page.get_by_role("button", name="Use this config").click()
    expect(page).to_have_url(re.compile(r"gather_bytes=2.*model=cfg%3Amodel_type%3Dmistral.*param_bytes=4"))
    expect(page.locator("#f-gather_bytes")).to_have_value("2")
    notice = page.locator("#moved-inputs")
    expect(notice).to_contain_text("Scenario name")
    expect(notice).to_be_in_viewport()


@pytest.mark.browser
def test_after_a_paste_live_edits_keep_the_answer_and_the_console_clean(page: Page, live_server: str) -> None:
    """Issue 28's report: after a paste the results went blank while capacity was edited, and htmx logged CSP
    errors. A paste on the FSDP2 preset, then a capacity and a D edit as typed: the run's verdict stays in the
    results with the new figures, and the console has no error or warning."""
    from app.ledger.models.known import KNOWN_BY_ID

    problems: list[str] = []
    page.on("console", lambda m: problems.append(f"{m.type}: {m.text}") if m.type in ("error", "warning") else None)
    page.on("pageerror", lambda error: problems.append(f"pageerror: {error}"))
    page.goto(live_server + "/?preset=seed-fsdp2")
    page.locator("details.paste summary").click()
    page.locator("#config").fill(json.dumps(dict(KNOWN_BY_ID["mistral-7b-v0.1"].config)))
    page.get_by_role("button", name="Use this config").click()
    expect(page).to_have_url(re.compile(r"model=cfg%3Amodel_type%3Dmistral"))
    page.locator("#f-capacity_bytes").fill("143771MiB")  # an H200, as the list suggests it
    expect(page).to_have_url(re.compile(r"capacity_bytes=150754820096"))
    expect(page.locator("#run")).to_contain_text("NVIDIA H200 SXM 141GB")
    page.locator("#f-dp").fill("16")
    expect(page).to_have_url(re.compile(r"dp=16"))
    expect(page.locator("#run-verdict")).to_be_visible()
    expect(page.locator("#run")).to_contain_text("D = 16 ranks")
    assert problems == []
