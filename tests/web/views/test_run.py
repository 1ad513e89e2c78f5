"""The page leads with the run (issue 28, item 1): the run as described, its peak at the stage it runs (the same
figure as the receipt), fits or not, what sets the peak, and, when it does not fit, the smallest change that fits in
the stack's own terms, each change checked against the ledger itself."""

from __future__ import annotations

import html
import re
from urllib.parse import parse_qsl

import pytest
from fastapi.testclient import TestClient

from app.ledger.ledger import compute_ledger
from app.ledger.scenario import parse_scenario

HX = {"HX-Request": "true"}
TOO_SMALL = {"model": "llama-2-7b", "dp": "8", "capacity_bytes": "40GB", "micro_batch": "2"}


def _run_block(text: str) -> str:
    return text[text.index('<div class="run') : text.index('id="verdict"')]


def _plain(fragment: str) -> str:
    return html.unescape(re.sub(r"\s+", " ", re.sub(r"<[^>]+>", "", fragment)))


@pytest.mark.parametrize(
    "query",
    [{}, {"model": "llama-2-7b", "stack": "hf-fsdp2", "capacity_bytes": "80GiB"}, {**TOO_SMALL, "stack": "hf-fsdp2"}],
)
def test_the_run_comes_first_with_the_receipt_s_figures(client: TestClient, query: dict[str, str]) -> None:
    page = client.get("/", params=query).text
    answer = page[page.index('<header class="summary answer">') :]
    assert answer.index('id="run"') < answer.index('id="verdict"') < answer.index('class="stage-verdicts"')
    receipt = client.get("/api/estimate", params=query).json()
    stage = receipt["scenario"]["stage"]
    st = receipt["stages"][stage]
    block = _run_block(page)
    assert f'data-peak="{st["peak"]["total"]}"' in block and f'data-stage="{stage}"' in block
    assert f'data-fits="{"yes" if st["fits"] else "no"}"' in block
    text = _plain(block)
    assert ("Fits" if st["fits"] else "Does not fit") in text
    assert f"Set by {st['peak']['instant']}" in text if st["peak"].get("instant") else "declared sum" in text


def test_a_run_that_does_not_fit_shows_changes_that_each_fit(client: TestClient) -> None:
    for stack, capacity, terms in (
        ("torchtitan", "18GB", "activation-checkpoint:full"),  # its default is per-op SAC: full recomputation next
        ("hf-fsdp2", "40GB", "per_device_train_batch_size"),
    ):
        page = client.get("/", params={**TOO_SMALL, "stack": stack, "capacity_bytes": capacity}).text
        change = _plain(page[page.index('id="run-change"') :].split("</p>", 1)[0])
        assert change.startswith("> Smallest change that fits:") or "Smallest change that fits:" in change
        assert terms in change
    s = parse_scenario({**TOO_SMALL, "stack": "hf-fsdp2"})
    assert not compute_ledger(s).stages[3].peak.fits
    b = int(re.search(r"micro batch (\d+) at D", change).group(1))  # type: ignore[union-attr]
    assert compute_ledger(parse_scenario({**TOO_SMALL, "micro_batch": str(b), "stack": "hf-fsdp2"})).stages[3].peak.fits
    torchtitan = {**TOO_SMALL, "stack": "torchtitan", "capacity_bytes": "18GB"}
    assert not compute_ledger(parse_scenario(torchtitan)).stages[3].peak.fits
    assert compute_ledger(parse_scenario({**torchtitan, "act_policy": "full"})).stages[3].peak.fits
    if "full recomputation at D = 8" in change:
        full = parse_scenario({**TOO_SMALL, "act_policy": "full", "stack": "hf-fsdp2"})
        assert compute_ledger(full).stages[3].peak.fits


def test_more_ranks_is_the_smallest_d_that_fits(client: TestClient) -> None:
    query = {"params": "70B", "dp": "2"}
    change = _plain(client.get("/run-change", params=query, headers=HX).text)
    dp = int(re.search(r"D = (\d+) ranks", change).group(1))  # type: ignore[union-attr]
    assert f"torchrun with a world size of {dp}" in change
    assert compute_ledger(parse_scenario({**query, "dp": str(dp)})).stages[3].peak.fits
    assert not compute_ledger(parse_scenario({**query, "dp": str(dp - 1)})).stages[3].peak.fits


def test_a_live_update_asks_for_the_change_at_once_and_gets_the_page_s_own(client: TestClient) -> None:
    update = client.get("/", params=TOO_SMALL, headers=HX).text
    pending = re.search(r'<p class="run-change" id="run-change" data-pending[^>]*>', update)
    assert pending is not None and 'hx-trigger="load"' in pending.group()
    asked = html.unescape(re.search(r'hx-get="([^"]+)"', pending.group()).group(1))  # type: ignore[union-attr]
    assert dict(parse_qsl(asked.split("?", 1)[1])) == {"capacity_bytes": str(40 * 10**9),
                                                         "micro_batch": "2", "model": "llama-2-7b"}  # fmt: skip
    loaded = client.get(asked, headers=HX).text
    page = client.get("/", params=TOO_SMALL).text
    assert loaded.strip() in page  # the very lines the whole page shows
    fits = client.get("/", params={**TOO_SMALL, "capacity_bytes": "80GiB"}, headers=HX).text
    assert 'id="run-change"' not in fits  # a run that fits needs no change


def test_the_change_refuses_bad_input_naming_the_field(client: TestClient) -> None:
    r = client.get("/run-change", params={"dp": "0"})
    assert r.status_code == 422 and "dp" in r.text


def test_equal_stage_1_and_2_peaks_are_explained_where_they_show(client: TestClient) -> None:
    """Issue 28's item 8: identical stage 1 and 2 peaks look wrong unless the page says why."""
    for query in ({"model": "llama-2-7b"}, {"model": "llama-2-7b", "act_policy": "full"}, {}):
        stages = client.get("/api/estimate", params=query).json()["stages"]
        page = client.get("/", params=query).text
        alike = stages[1]["peak"]["total"] == stages[2]["peak"]["total"]
        assert ('id="stages-alike"' in page) is alike
        if alike:
            note = _plain(page[page.index('id="stages-alike"') :].split("</p>", 1)[0])
            assert stages[2]["peak"]["instant"] in note and "before any gradient exists" in note


def _host_line(text: str) -> str:
    start = text.index('id="run-host"')
    return _plain(text[text.index(">", start) + 1 : text.index("</p>", start)])


def test_the_run_says_whether_the_host_holds_it_and_the_loading_that_would(client: TestClient) -> None:
    """Llama 3.1 70B under hf-fsdp2 (every rank loads and upcasts: 8 × N × 6 B per node) cannot load on a 2 TB host;
    cpu_ram_efficient_loading (one copy per node) can: the line says so, with the receipt's figures."""
    query = {"model": "llama-3.1-70b", "stack": "hf-fsdp2", "dp": "64"}
    line = _host_line(client.get("/", params=query).text)
    host = client.get("/api/estimate", params=query).json()["host"]
    peak = host["stages"][3]["peak"]
    assert peak == host["stages"][3]["load_peak"] == 8 * 70_553_706_496 * 6
    assert "while loading" in line and "does not fit" in line and "cpu_ram_efficient_loading" in line
    assert f"{peak / 1e9:,.2f} GB" in line
    efficient = parse_scenario({**query, "load_path": "rank0"})
    assert compute_ledger(efficient).host.stages[3].fits  # the change offered fits, by the ledger itself
    fits = _host_line(client.get("/", params={**query, "load_path": "rank0"}).text)
    assert client.get("/api/estimate", params=query).json()["scenario"]["load_path"] == "every-rank"  # the stack's
    # one copy per node loads in less than the full state dicts rank 0 gathers at save (transformers' default)
    assert fits.endswith(": fits.") and "while saving" in fits


def test_the_run_says_what_trains(client: TestClient) -> None:
    query = {"model": "llama-3.1-8b", "stack": "hf-fsdp2", "lora_rank": "16", "lora_targets": "all-linear"}
    what = _plain(_run_block(client.get("/", params=query).text))
    assert "41,943,040 of 8,072,204,288 parameters train (LoRA r = 16), 8,030,261,248 frozen" in what
    assert "parameters train" not in _plain(_run_block(client.get("/", params={"model": "llama-3.1-8b"}).text))
    frozen = {"model": "llama-3.1-8b", "frozen_modules": "self_attn", "freeze_embed": "1"}
    page = client.get("/", params=frozen)
    said = _plain(_run_block(page.text))
    assert (
        "6,162,747,392 of 8,030,261,248 parameters train, 1,867,513,856 frozen (the embedding, every layer's "
        "self_attn)" in said
    )
    typed = _plain(_run_block(client.get("/", params={**frozen, "trainable_params": "6B"}).text))
    assert "6,000,000,000 of 8,030,261,248 parameters train" in typed and "self_attn" not in typed  # a typed count
    refused = client.get("/", params={**frozen, "frozen_modules": "self_attn,cross_attn"}).text
    assert 'role="alert"' in refused and "cross_attn: not a module of llama" in refused
