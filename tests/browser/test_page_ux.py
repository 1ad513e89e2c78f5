"""Issue 14 in real Chromium: the answer first, presets as state, history safe to share, errors in
view, unit sanity, open <details> kept, "1 rank", and only the verdict announced."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import cast
from urllib.parse import urlsplit

import pytest
from playwright.sync_api import Browser, Page, Request, Response, Route, expect

from app.ledger.scenario.links import link
from app.ledger.scenario.presets import PRESET_BY_ID
from tests.browser.lazy import bring_into_view

pytestmark = pytest.mark.browser

NOT_FITTING = "llama2-70b-dp8"  # no stage fits: the verdict names the device and the smallest peak


def preset_address(preset_id: str) -> str:
    query = link(PRESET_BY_ID[preset_id].scenario)[2:]
    return f"/?preset={preset_id}" + (f"&{query}" if query else "")


def is_fragment(request: Request) -> bool:
    return request.headers.get("hx-request") == "true" and urlsplit(request.url).path == "/"


def fragment_answer(response: Response) -> bool:
    return is_fragment(response.request)


def history_length(page: Page) -> int:
    return cast(int, page.evaluate("history.length"))


@pytest.fixture
def projector(browser: Browser) -> Iterator[Page]:
    """A projector at 150 % zoom: 853 × 480 CSS pixels."""
    ctx = browser.new_context(viewport={"width": 853, "height": 480})
    yield ctx.new_page()
    ctx.close()


# 1. The answer first


def test_the_verdict_is_above_the_fold_on_a_projector(projector: Page, live_server: str) -> None:
    page = projector
    page.goto(live_server + preset_address(NOT_FITTING))
    # The run first (issue 28): its verdict, peak and what sets it above the fold; the stage comparison after.
    for first in ("#run-verdict", "#run-cause"):
        box = page.locator(first).bounding_box()
        assert box is not None and box["y"] + box["height"] <= 480, (first, box)
    expect(page.locator("#run-verdict")).to_contain_text("Does not fit")
    verdict = page.locator("#verdict")
    expect(verdict).to_contain_text(
        "No stage plain-fsdp2 runs fits on D = 8 ranks of NVIDIA H100 SXM5 80GB (85.52 GB / 79.65 GiB)"
    )
    # Every stage's fit in words (the ✓/✗ are decoration), with peak and overshoot in GB and GiB.
    stages = page.locator(".stage-verdicts li")
    expect(stages).to_have_count(4)
    for stage in range(4):
        item = page.locator(f'.stage-verdicts li[data-stage="{stage}"]')
        expect(item).to_contain_text(f"Stage {stage}: does not fit")
        expect(item.locator("[data-peak]")).to_contain_text(" GB / ")
        expect(item.locator("[data-peak]")).to_contain_text(" GiB")
        expect(item.locator("[data-headroom]")).to_contain_text("over by")
    # The results come before the form below 900 px.
    results_top, form_top = cast(
        list[float],
        page.evaluate(
            "[document.getElementById('results').getBoundingClientRect().top,"
            " document.querySelector('aside.inputs').getBoundingClientRect().top]"
        ),
    )
    assert results_top < form_top


def test_the_answer_bar_on_a_wide_screen_and_a_phone(browser: Browser, live_server: str) -> None:
    ctx = browser.new_context(viewport={"width": 1440, "height": 900})
    try:
        page = ctx.new_page()
        page.goto(live_server + "/?capacity_bytes=80GiB")
        # the form stays beside the results, on their left
        left = cast(list[float], page.evaluate(
            "[document.querySelector('aside.inputs').getBoundingClientRect().left,"
            " document.getElementById('results').getBoundingClientRect().left]"
        ))  # fmt: skip
        assert left[0] < left[1]
        expect(page.locator("#verdict")).to_have_text(
            "The ZeRO stages compared (DeepSpeed runs each; FSDP2\u2019s fully_shard runs stage 3, and stage 2 with"
            " reshard_after_forward=False): Stage 2 is the least complex stage plain-fsdp2 runs that fits on D = 8"
            " ranks of NVIDIA A100 80GB (85.90 GB / 80.00 GiB): peak 46.25 GB / 43.07 GiB, headroom 39.65 GB / 36.93"
            " GiB. DeepSpeed\u2019s stage 1 (replicated parameters, which FSDP2 cannot keep) fits too: peak 58.50 GB"
            " / 54.48 GiB, headroom 27.40 GB / 25.52 GiB. Compared with the capacity: the allocated peak (no allocator"
            " reserve given)."
        )
        expect(page.locator('.stage-verdicts li[data-stage="0"]')).to_contain_text("Stage 0: does not fit")
        expect(page.locator('.stage-verdicts li[data-stage="3"]')).to_contain_text("Stage 3: fits")
        expect(page.locator('.stage-verdicts li[data-stage="3"] [data-headroom]')).to_contain_text("headroom")
    finally:
        ctx.close()
    phone = browser.new_context(viewport={"width": 390, "height": 844}, is_mobile=True, has_touch=True)
    try:
        page = phone.new_page()
        page.goto(live_server + "/")
        box = page.locator("#run-verdict").bounding_box()
        assert box is not None and box["y"] + box["height"] <= 844, box
        expect(page.locator("#verdict")).to_contain_text("a device of 80.00 GB / 74.51 GiB")
    finally:
        phone.close()


# 4. Presets are state


def test_the_preset_menu_loads_only_on_enter_or_load(page: Page, live_server: str) -> None:
    page.goto(live_server + "/?dp=16")
    menu = page.locator("#preset")
    menu.focus()
    requests: list[str] = []
    page.on("request", lambda r: requests.append(r.url) if urlsplit(r.url).path == "/" else None)
    # Arrow keys move through every preset without loading any.
    for _ in range(4):
        page.keyboard.press("ArrowDown")
    fourth = list(PRESET_BY_ID)[3]
    expect(menu).to_have_value(fourth)
    page.wait_for_timeout(400)
    assert requests == []
    assert path_of(page) == "/?dp=16"
    with page.expect_navigation(url=live_server + preset_address(fourth)):
        page.keyboard.press("Enter")
    preset = PRESET_BY_ID[fourth]
    expect(page.locator("#results h2")).to_have_text(preset.title)
    expect(page).to_have_title(f"zero3-lab — {preset.title}")
    expect(page.locator("#preset")).to_have_value(fourth)

    # "Load" with nothing picked does nothing: the scenario on the page stays.
    page.goto(live_server + "/?dp=16")
    page.get_by_role("button", name="Load").click()
    page.wait_for_timeout(400)
    assert path_of(page) == "/?dp=16"
    expect(page.locator("#f-dp")).to_have_value("16")
    assert page.evaluate("document.getElementById('preset').validity.valueMissing") is True


def path_of(page: Page) -> str:
    parts = urlsplit(page.url)
    return parts.path + (f"?{parts.query}" if parts.query else "")


def test_a_preset_keeps_its_id_until_the_scenario_changes(page: Page, live_server: str) -> None:
    preset = PRESET_BY_ID[NOT_FITTING]
    page.goto(live_server + f"/?preset={NOT_FITTING}")
    assert path_of(page) == preset_address(NOT_FITTING)
    expect(page.locator("#results h2")).to_have_text(preset.title)
    # A change that leaves the scenario as it is (Compute) keeps the preset.
    with page.expect_response(fragment_answer):
        page.get_by_role("button", name="Compute").click()
    expect(page.locator("#results h2")).to_have_text(preset.title)
    assert path_of(page) == preset_address(NOT_FITTING)
    # An edit makes it another scenario: the id leaves the address, the heading is the scenario's.
    page.locator("#f-dp").fill("64")
    expect(page).to_have_url(live_server + link(preset.scenario.with_(dp=64)))
    expect(page.locator("#results h2")).to_have_text(str(preset.scenario.name))
    expect(page.locator("#scenario-preset")).to_be_disabled()
    page.go_back()
    expect(page).to_have_url(live_server + preset_address(NOT_FITTING))
    expect(page.locator("#results h2")).to_have_text(preset.title)


# 5. History safe to share


def test_typing_makes_one_history_entry_and_the_title_follows(page: Page, live_server: str) -> None:
    page.goto(live_server + "/")
    start = history_length(page)
    pushed: list[str] = []
    page.on("response", lambda r: pushed.append(r.headers.get("hx-push-url", "")) if is_fragment(r.request) else None)
    dp = page.locator("#f-dp")
    dp.click()
    page.keyboard.press("ControlOrMeta+A")
    for key in "128":  # slower than the 300 ms debounce: one update per keystroke
        with page.expect_response(fragment_answer):
            page.keyboard.type(key)
    expect(page).to_have_url(live_server + "/?dp=128")
    expect(page).to_have_title("zero3-lab — 7B parameters on 128 ranks")
    with page.expect_response(fragment_answer):
        page.keyboard.press("Tab")  # the blur settles the edit: no second entry for it
    with page.expect_response(fragment_answer):
        dp.press("Enter")  # nor for Enter on it
    assert history_length(page) == start + 1
    assert [p for p in pushed if p] == ["/?dp=1"]  # the first keystroke opened the entry, the rest replaced it

    # A select is a settled change of its own: one more entry.
    page.locator("#f-master_bytes").select_option("0")
    expect(page).to_have_url(live_server + "/?dp=128&master_bytes=0")
    assert history_length(page) == start + 2
    expect(page).to_have_title("zero3-lab — 7B parameters on 128 ranks")

    # Each Back fetches its entry (historyCacheSize 0): wait for the entry's own state, not only its
    # address, before the next Back, or the two restores race and the later answer wins.
    page.go_back()
    expect(page).to_have_url(live_server + "/?dp=128")
    expect(page.locator("#f-master_bytes")).to_have_value("")  # empty again: the stack's width
    page.go_back()
    expect(page).to_have_url(live_server + "/")
    expect(page.locator("#f-dp")).to_have_value("8")
    page.go_forward()
    expect(page).to_have_url(live_server + "/?dp=128")
    expect(page.locator("#f-dp")).to_have_value("128")


def test_one_rank_is_singular(page: Page, live_server: str) -> None:
    page.goto(live_server + "/")
    page.locator("#f-dp").fill("1")
    expect(page.locator("#results h2")).to_have_text("7B parameters on 1 rank")
    expect(page.locator("#verdict")).to_contain_text("D = 1 rank of")
    expect(page).to_have_title("zero3-lab — 7B parameters on 1 rank")


# 6. Errors in view


def test_a_bad_paste_is_shown_where_it_was_made_focused_and_kept(projector: Page, live_server: str) -> None:
    page = projector
    page.goto(live_server + "/?dp=4")
    page.locator("details.paste summary").click()
    paste = '{"model_type": "t5"}'
    page.locator("#config").fill(paste)
    page.get_by_role("button", name="Use this config").click()
    alert = page.locator('#config-error [role="alert"]')
    expect(alert).to_contain_text("config:")
    expect(page.locator("#config")).to_be_focused()
    expect(page.locator("#config")).to_have_value(paste)
    expect(page.locator("#config")).to_have_attribute("aria-invalid", "true")
    assert path_of(page) == "/?dp=4"  # the page did not move to another address
    box = page.locator("#config").bounding_box()
    assert box is not None and 0 <= box["y"] < 480, box  # in view, not thousands of pixels down
    # and a good paste still takes the page to its scenario
    from app.ledger.models.known import KNOWN_BY_ID

    page.locator("#config").fill(json.dumps(dict(KNOWN_BY_ID["gpt2"].config)))
    with page.expect_navigation():
        page.get_by_role("button", name="Use this config").click()
    expect(page.locator("#sec-model")).to_contain_text("custom gpt2 config")
    assert "dp=4" in urlsplit(page.url).query.split("&")


def test_a_bad_paste_without_javascript_is_focused_too(browser: Browser, live_server: str) -> None:
    ctx = browser.new_context(viewport={"width": 853, "height": 480}, java_script_enabled=False)
    try:
        page = ctx.new_page()
        page.goto(live_server + "/?dp=4")
        page.locator("details.paste summary").click()
        page.locator("#config").fill("{")
        with page.expect_navigation():
            page.get_by_role("button", name="Use this config").click()
        expect(page.locator('#config-error [role="alert"]')).to_contain_text("not valid JSON")
        expect(page.locator("#config")).to_be_focused()
        expect(page.locator("#config")).to_have_value("{")
    finally:
        ctx.close()


@pytest.mark.parametrize("failure", ["server", "network"])
def test_a_failed_update_says_so_in_place_of_the_results(page: Page, live_server: str, failure: str) -> None:
    page.goto(live_server + "/")
    broken = {"on": True}

    def handle(route: Route) -> None:
        if broken["on"] and is_fragment(route.request):
            if failure == "server":
                route.fulfill(status=500, body="internal error")
            else:
                route.abort("connectionrefused")
        else:
            route.continue_()

    page.route("**/*", handle)
    page.locator("#f-dp").fill("16")
    alert = page.locator('#results [role="alert"]')
    expect(alert).to_be_visible()
    expect(alert).to_contain_text("The update failed")
    expect(alert).to_contain_text("server answered 500" if failure == "server" else "could not be reached")
    expect(alert).to_contain_text("out of date")
    expect(page.locator("#results")).to_have_class(re.compile(r"\bstale\b"))
    expect(page.locator("#verdict")).to_be_hidden()  # the old verdict is not left to be misread
    broken["on"] = False
    with page.expect_response(fragment_answer):
        alert.get_by_role("button", name="Try again").click()
    expect(page.locator('#results [role="alert"]')).to_have_count(0)
    expect(page.locator("#verdict")).to_contain_text("D = 16 ranks")
    expect(page).to_have_url(live_server + "/?dp=16")


def test_updating_shows_where_the_user_types(page: Page, live_server: str) -> None:
    page.goto(live_server + "/")
    held: list[Route] = []
    page.route("**/*", lambda route: held.append(route) if is_fragment(route.request) else route.continue_())
    page.locator("#f-capacity_bytes").fill("40GiB")  # the form's last field: far below the top
    expect(page.locator("#scenario")).to_have_class(re.compile(r"\bhtmx-request\b"))
    label = page.locator('label[for="f-capacity_bytes"]')
    after = label.evaluate("el => getComputedStyle(el, '::after').content")
    assert "updating" in str(after)
    busy = page.locator("#busy")
    expect(busy).to_be_visible()
    box = busy.bounding_box()
    assert box is not None and box["y"] >= 0 and box["y"] + box["height"] <= 900, box  # sticky, on screen
    for route in held:
        route.continue_()
    expect(page).to_have_url(live_server + "/?capacity_bytes=42949672960")
    expect(page.locator("#scenario")).not_to_have_class(re.compile(r"\bhtmx-request\b"))


# 7. Unit sanity


def test_implausible_values_warn_inline(page: Page, live_server: str) -> None:
    page.goto(live_server + "/")
    seq = page.locator("#f-seq_len")
    expect(seq).to_have_value("4,096")  # not 4.096K
    capacity = page.locator("#f-capacity_bytes")
    assert "w-capacity_bytes" in (capacity.get_attribute("aria-describedby") or "").split()
    capacity.fill("80")
    warning = page.locator("#w-capacity_bytes")
    expect(warning).to_have_attribute("role", "status")
    expect(warning).to_contain_text("80 means 80 bytes — did you mean 80GB or 80GiB?")
    expect(page.locator("#verdict")).to_contain_text("a device of only 80 bytes")
    expect(page.locator('#scenario [role="alert"]')).to_have_count(0)  # a warning, not an error

    capacity.fill("81559MiB")  # what an H100 80GB reports (nvidia-smi)
    expect(warning).not_to_contain_text("did you mean")
    expect(warning).to_contain_text("85,520,809,984 B = 79.65 GiB = 85.52 GB")
    expect(warning).to_contain_text("NVIDIA H100 SXM5 80GB")

    seq.fill("4k")
    expect(page.locator("#w-seq_len")).to_contain_text("4,000 tokens — did you mean 4Ki = 4,096?")
    seq.fill("4096")
    expect(page.locator("#w-seq_len")).to_be_empty()

    # where capacity is chosen: the devices table says what an "80GB" H100 reports, in both units
    page.locator("details.devices summary").click()
    expect(page.locator("#gib-convention")).to_contain_text("reports 81,559 MiB")
    expect(page.locator("#gib-convention")).to_contain_text("85.52 GB")
    expect(page.locator("#gib-convention")).to_contain_text("79.65 GiB")


# 8 and 9. Open <details> stay open; only the verdict is announced


def test_open_details_stay_open_across_updates(page: Page, live_server: str) -> None:
    page.goto(live_server + "/")
    page.locator("details.lines summary").click()
    expect(page.locator("details.lines table")).to_be_visible()
    page.locator("#h-kill ~ details summary").click()
    page.locator("#f-dp").fill("16")
    expect(page).to_have_url(live_server + "/?dp=16")
    expect(page.locator("details.lines")).to_have_attribute("open", "")
    expect(page.locator("details.lines")).to_contain_text("⌈7,000,000,000 ÷ 16⌉")  # loaded again, for D = 16
    bring_into_view(page, "#kills")  # a live update's kill lists load as they come into view
    expect(page.locator("#h-kill ~ details")).to_have_attribute("open", "")  # and reopen their <details>
    bring_into_view(page, "#lower")  # the fit finder's sections load as they come into view
    expect(page.locator("details.fit-numbers")).not_to_have_attribute("open", "")  # closed ones stay closed


def test_a_live_update_loads_the_kill_lists_as_they_come_into_view(page: Page, live_server: str) -> None:
    """A live update defers the kill lists (seven mutants checked against the scenario, most of the work of
    an answer with a model) until they scroll into view; then they are the new scenario's."""
    page.goto(live_server + "/")
    expect(page.locator("#kills table.kills")).to_have_count(2)  # the page itself has them
    # typed without scrolling to the field (fill() would, and where the form is as long as the results the
    # field sits level with the kill lists): the page stays at its top, the kill lists below the fold
    page.locator("#f-dp").evaluate("e => { e.value = '1'; e.dispatchEvent(new Event('input', {bubbles: true})) }")
    expect(page).to_have_url(live_server + "/?dp=1")
    expect(page.locator("#kills[data-pending]")).to_have_count(1)  # off screen: not asked for yet
    bring_into_view(page, "#kills")
    expect(page.locator("#kills[data-pending]")).to_have_count(0)
    expect(page.locator("#kills table.kills").first).to_contain_text("survived: dp = 1")


def test_only_the_verdict_is_announced(page: Page, live_server: str) -> None:
    page.goto(live_server + "/")
    results = page.locator("#results")
    assert results.get_attribute("aria-live") is None
    announce = page.locator("#announce")
    expect(announce).to_have_attribute("role", "status")
    page.locator("#f-dp").fill("64")
    expect(page.locator("#verdict")).to_contain_text("D = 64 ranks")
    # the run's verdict, then the stage comparison's
    expect(announce).to_contain_text("Your run, stage 3 on 64 ranks: ")
    expect(announce).to_contain_text(page.locator("#verdict").inner_text().split(": ", 1)[1])
    page.locator("#f-dp").fill("0")
    expect(announce).to_have_text("Waiting for valid input: 1 field needs attention.")


def test_on_a_phone_chart_text_stays_readable_and_wide_tables_scroll_in_place(
    browser: Browser, live_server: str
) -> None:
    """Issue 28: chart text was ~6 CSS px on a phone, and a table in the form was cut off. At 390 × 844 no chart
    text is under 9 px high, every table wider than its box scrolls inside it, and the page never scrolls sideways."""
    ctx = browser.new_context(viewport={"width": 390, "height": 844})
    try:
        page = ctx.new_page()
        for url in ("/?model=llama-2-7b", "/compare?a=dp%3D8&b=dp%3D64"):
            page.goto(live_server + url)
            page.evaluate("document.querySelectorAll('details').forEach(d => d.open = true)")
            tiny = page.evaluate(
                "Array.from(document.querySelectorAll('svg text')).map(t => t.getBoundingClientRect().height)"
                ".filter(h => h > 0 && h < 9).length"
            )
            assert tiny == 0, url
            cut = page.evaluate(
                "Array.from(document.querySelectorAll('table')).filter(t => t.scrollWidth > t.parentElement.clientWidth"
                " && getComputedStyle(t.parentElement).overflowX !== 'auto').map(t => t.outerHTML.slice(0, 80))"
            )
            assert cut == [], url
            assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth"), url
    finally:
        ctx.close()
