"""The stage recommendation is made among the stages the run's stack can run (issue 28, item 1): FSDP2's fully_shard
shards parameters between steps whatever it is given, so for every stack here (all FSDP2) the least complex stage
that fits is 2 or 3; a less complex stage only DeepSpeed runs is named beside it, with its own peak from the receipt.
"""

from __future__ import annotations

import html
import re

import pytest
from fastapi.testclient import TestClient

from app.ledger.scenario.stacks import STACKS


def _verdict(page: str) -> str:
    fragment = page[page.index('id="verdict"') : page.index('class="stage-verdicts"')]
    return html.unescape(re.sub(r"\s+", " ", re.sub(r"<[^>]+>", "", fragment)))


@pytest.mark.parametrize("stack", STACKS)
@pytest.mark.parametrize("dp", ["1", "8", "64"])
def test_the_least_stage_that_fits_is_one_the_stack_runs(client: TestClient, stack: str, dp: str) -> None:
    query = {"stack": stack, "dp": dp}
    receipt = client.get("/api/estimate", params=query).json()
    fits = [st["fits"] for st in receipt["stages"]]
    peaks = [st["peak"]["total"] for st in receipt["stages"]]
    verdict = _verdict(client.get("/", params=query).text)
    chosen = next((stage for stage in (2, 3) if fits[stage]), None)
    if chosen is None:
        assert f"No stage {stack} runs fits" in verdict
    else:
        assert f"Stage {chosen} is the least complex stage {stack} runs that fits" in verdict
    other = next((stage for stage in (0, 1) if fits[stage]), None)
    if other is not None and (chosen is None or other < chosen):
        said = re.search(r"DeepSpeed’s stage (\d) .*? fits(?: too)?: peak ([\d.,]+) GB", verdict)
        assert said is not None, verdict
        assert int(said.group(1)) == other
        assert said.group(2) == f"{peaks[other] / 1e9:,.2f}"
    else:
        assert "DeepSpeed’s stage" not in verdict


def test_the_seed_fits_at_stage_2_for_fsdp2_and_stage_1_is_deepspeed_s(client: TestClient) -> None:
    """The seed's 7B at D = 8 on 80 GB: stages 1, 2 and 3 fit; FSDP2 cannot run stage 1 (it was recommended)."""
    page = client.get("/").text
    verdict = _verdict(page)
    assert "Stage 2 is the least complex stage plain-fsdp2 runs that fits" in verdict
    assert "DeepSpeed’s stage 1 (replicated parameters, which FSDP2 cannot keep) fits too: peak 58.50 GB" in verdict
    cards = page[page.index('class="stage-verdicts"') :]
    for stage in (0, 1):
        card = cards[cards.index(f'data-stage="{stage}"') :]
        assert "(DeepSpeed only)" in card[: card.index("</li>")]
