"""The comparison leads with the verdicts and peaks (issue 28, item 4): each side titled so the two differ, and each
side's peak at the stage it runs with B − A, the receipts' own figures."""

from __future__ import annotations

import re

from fastapi.testclient import TestClient

FSDP2_PRESET = "gather_bytes=2&grad_bytes=4&master_bytes=0&name=seed+model%2C+FSDP2+layout&param_bytes=4&reduce_bytes=2"


def _heading(text: str) -> str:
    found = re.search(r'<header class="summary">\s*<h2>(.*?)</h2>', text, re.S)
    assert found is not None
    return re.sub(r"<[^>]+>", "", found.group(1))


def test_b_copied_from_a_is_titled_by_what_differs(client: TestClient) -> None:
    """The report: both sides carried the same title (B copies A's name)."""
    text = client.get("/compare", params={"a": FSDP2_PRESET, "b": FSDP2_PRESET + "&dp=64"}).text
    heading = _heading(text)
    assert heading == "A: seed model, FSDP2 layout (dp = 8) vs B: seed model, FSDP2 layout (dp = 64)"
    named = client.get("/compare", params={"a": "name=ours", "b": "name=theirs&dp=64"}).text
    assert _heading(named) == "A: ours vs B: theirs"  # names that differ already tell them apart


def test_each_side_s_peak_at_its_stage_comes_first_with_b_minus_a(client: TestClient) -> None:
    a, b = FSDP2_PRESET + "&model=llama-2-7b", FSDP2_PRESET + "&model=llama-2-7b&dp=64&stage=2"
    text = client.get("/compare", params={"a": a, "b": b}).text
    summary = text[text.index('<header class="summary">') :]
    assert summary.index('id="compare-runs"') < summary.index('class="answers"') < summary.index('class="changes"')
    ra = client.get("/api/estimate?" + a).json()
    rb = client.get("/api/estimate?" + b).json()
    peak_a, peak_b = ra["stages"][3]["peak"]["total"], rb["stages"][2]["peak"]["total"]
    assert f'data-peak-a="{peak_a}" data-peak-b="{peak_b}"' in summary
    line = re.sub(r"<[^>]+>", "", summary[summary.index('id="compare-runs"') : summary.index("</p>")])
    assert "A (stage 3)" in line and "B (stage 2)" in line
    sign = "+" if peak_b > peak_a else "−"
    assert f"B &minus; A = {sign}" in line
