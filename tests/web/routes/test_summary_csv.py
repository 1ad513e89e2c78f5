"""The summary CSV (issue 28, item 6): the file a reviewer opens first, one row per stage, each figure in bytes and
in GB and GiB; the same numbers as the JSON receipt, and the page links it first."""

from __future__ import annotations

import csv
import io
from decimal import Decimal

import pytest
from fastapi.testclient import TestClient

from app.receipts.display import gb, gib
from app.receipts.summary_csv import COLUMNS

SCENARIO = {"model": "llama-2-7b", "dp": "8", "param_bytes": "4", "master_bytes": "0", "grad_bytes": "4",
            "gather_bytes": "2", "capacity_bytes": "80GiB", "reserve_bytes": "2GiB"}  # fmt: skip


def _rows(text: str) -> list[dict[str, str]]:
    assert text.startswith("\ufeff")  # a spreadsheet reads it as UTF-8
    return list(csv.DictReader(io.StringIO(text.removeprefix("\ufeff"))))


def _as_page_spells(value: str, unit: str) -> str:
    """A CSV figure written the way the page writes it (thousands grouped, a typographic minus)."""
    number = Decimal(value)
    return f"{'−' if number < 0 else ''}{abs(number):,.2f} {unit}"


@pytest.mark.parametrize("capacity", ["80GiB", "24GB"])  # fits at some stages; fits at none (negative headroom)
def test_one_row_per_stage_with_the_receipt_s_figures(client: TestClient, capacity: str) -> None:
    query = {**SCENARIO, "capacity_bytes": capacity}
    r = client.get("/summary.csv", params=query)
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/csv")
    assert r.headers["content-disposition"].endswith('.summary.csv"')
    rows = _rows(r.text)
    assert tuple(rows[0]) == COLUMNS
    stages = client.get("/api/estimate", params=query).json()["stages"]
    assert [int(row["stage"]) for row in rows] == [0, 1, 2, 3]
    allocatable = 80 * 2**30 - 2 * 2**30 if capacity == "80GiB" else 24 * 10**9 - 2 * 2**30
    for row, stage in zip(rows, stages, strict=True):
        assert int(row["persistent_bytes"]) == stage["persistent"]["total"]
        assert int(row["peak_bytes"]) == stage["peak"]["total"]
        assert row["peak_instant"] == stage["peak"]["instant"]
        assert int(row["allocatable_bytes"]) == allocatable
        assert row["fits"] == ("yes" if stage["fits"] else "no")
        assert int(row["headroom_bytes"]) == allocatable - stage["peak"]["total"] == stage["headroom_bytes"]
        for figure in ("persistent", "peak", "allocatable", "headroom"):
            exact = int(row[f"{figure}_bytes"])
            assert _as_page_spells(row[f"{figure}_gb"], "GB") == gb(exact)
            assert _as_page_spells(row[f"{figure}_gib"], "GiB") == gib(exact)
    if capacity == "24GB":
        assert all(row["fits"] == "no" and row["headroom_bytes"].startswith("-") for row in rows)
        assert all(Decimal(row["headroom_gb"]) < 0 for row in rows)  # numbers, not text guarded as a formula


def test_without_a_model_the_peak_is_the_declared_sum(client: TestClient) -> None:
    rows = _rows(client.get("/summary.csv").text)
    assert len(rows) == 4 and all(row["peak_instant"].startswith("declared sum of maxima") for row in rows)


def test_bad_input_is_a_422_naming_the_field(client: TestClient) -> None:
    r = client.get("/summary.csv", params={"dp": "0"})
    assert r.status_code == 422
    assert "dp" in r.text


def test_the_page_links_the_summary_first(client: TestClient) -> None:
    page = client.get("/", params=SCENARIO).text
    links = page[page.index('<p class="links">') :]
    assert links.index("/summary.csv?") < links.index("/receipt.csv?") < links.index("/receipt.json?")
