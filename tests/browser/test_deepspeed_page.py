"""DeepSpeed configs in real Chromium: pick a ds_config.json, read what the lab made of every key, open
the scenario it describes; and the scenario out as a ds_config.json and an FSDP2 snippet."""

from __future__ import annotations

import json
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from playwright.sync_api import Browser, Page, expect

pytestmark = pytest.mark.browser

DS = Path(__file__).resolve().parents[1] / "data" / "deepspeed"


def path_of(page: Page) -> str:
    parts = urlsplit(page.url)
    return parts.path + ("?" + parts.query if parts.query else "")


def test_a_picked_config_is_read_key_by_key_and_opens_its_scenario(page: Page, live_server: str) -> None:
    """LLaVA's ZeRO-3 config on Llama-2-13B: the report swaps in place (the page does not move), the
    link opens the scenario, whose receipt has the config's bucket (5,120² elements × 2 B)."""
    page.goto(live_server + "/?model=llama-2-13b&dp=16")
    page.locator("details.ds-paste summary").click()
    page.locator("#ds-config-file").set_input_files(str(DS / "llava-zero3.json"))
    expect(page.locator("#ds-config")).to_have_value((DS / "llava-zero3.json").read_text(encoding="utf-8"))
    page.get_by_role("button", name="Read this DeepSpeed config").click()
    expect(page.locator("#ds-import-title")).to_contain_text("stage 3")
    row = page.locator('ol.ds-lines li:has(code.key:text-is("zero_optimization.reduce_bucket_size"))')
    expect(row).to_contain_text("26,214,400 elements × 2 B")
    assert path_of(page) == "/?model=llama-2-13b&dp=16"
    with page.expect_navigation():
        page.get_by_role("link", name="Open the scenario it describes").click()
    assert path_of(page) == "/?bucket_bytes=52428800&dp=16&model=llama-2-13b"
    expect(page.locator('li[data-run="yes"]')).to_have_attribute("data-stage", "3")


def test_a_refused_config_is_said_beside_the_box(page: Page, live_server: str) -> None:
    page.goto(live_server + "/?dp=4")
    page.locator("details.ds-paste summary").click()
    paste = (DS / "hf-docs-zero3-nvme.json").read_text(encoding="utf-8")
    page.locator("#ds-config").fill(paste)
    page.get_by_role("button", name="Read this DeepSpeed config").click()
    alert = page.locator('#ds-config-error [role="alert"]')
    expect(alert).to_contain_text("zero_optimization.aio")
    expect(page.locator("#ds-config")).to_be_focused()
    expect(page.locator("#ds-config")).to_have_value(paste)
    box = page.locator("#ds-config").bounding_box()
    assert box is not None and 0 <= box["y"] < page.viewport_size["height"], box  # type: ignore[index]


def test_the_import_works_without_javascript(browser: Browser, live_server: str) -> None:
    """Stage 2 with DeepSpeed's defaults: contiguous_gradients on, overlap_comm off below stage 3, so
    one flat bucket of 500,000,000 elements × 2 B = 1,000,000,000 B."""
    ctx = browser.new_context(java_script_enabled=False)
    try:
        page = ctx.new_page()
        page.goto(live_server + "/?model=llama-2-7b")
        page.locator("details.ds-paste summary").click()
        page.locator("#ds-config").fill(json.dumps({"zero_optimization": {"stage": 2}, "bf16": {"enabled": True}}))
        with page.expect_navigation():
            page.get_by_role("button", name="Read this DeepSpeed config").click()
        link = page.get_by_role("link", name="Open the scenario it describes")
        expect(link).to_have_attribute("href", "/?bucket_bytes=1000000000&model=llama-2-7b&stage=2")
    finally:
        ctx.close()


def test_run_it_shows_both_snippets_and_downloads_the_config(page: Page, live_server: str) -> None:
    page.goto(live_server + "/?model=llama-2-7b&stage=2&bucket_bytes=400MB")
    page.locator("details.run summary").click()
    expect(page.locator("#snippet-fsdp2")).to_contain_text("reshard_after_forward=False")
    shown = json.loads(page.locator("#snippet-deepspeed").inner_text())
    assert shown["zero_optimization"] == {
        "stage": 2, "contiguous_gradients": True, "overlap_comm": True, "reduce_bucket_size": 100_000_000,
    }  # fmt: skip
    with page.expect_download() as info:
        page.get_by_role("link", name="Download ds_config.json").click()
    download = info.value
    assert download.suggested_filename.endswith(".ds_config.json")
    assert json.loads(Path(download.path()).read_text(encoding="utf-8")) == shown
    # the scenario's own link, the config it downloads and the lab's API agree
    api = page.request.get(live_server + "/api/snippets?model=llama-2-7b&stage=2&bucket_bytes=400000000").json()
    assert api["deepspeed"]["config"] == shown
