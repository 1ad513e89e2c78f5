"""The layout search's renderings: exact integers in JSON and CSV, formatted figures only in the table."""

from __future__ import annotations

import csv
import io

import pytest

from app.ledger.layouts import LayoutSearch, read_search, search_layouts
from app.ledger.scenario import parse_scenario
from app.receipts.layouts import CSV_COLUMNS, csv_text, layouts_out, milliseconds, render_table

BASE = parse_scenario({"model": "llama-3.1-8b"})


@pytest.fixture(scope="module")
def found() -> LayoutSearch:
    return search_layouts(BASE, read_search({"gpus": 16, "rows": 4}))


@pytest.mark.parametrize(
    ("ns", "text"), [(0, "0.0 ms"), (49_999, "0.0 ms"), (50_000, "0.1 ms"), (3_447_507_252, "3,447.5 ms")]
)
def test_milliseconds_round_half_up_in_integers(ns: int, text: str) -> None:
    assert milliseconds(ns) == text


def test_json_rows_are_the_search_s_rows(found: LayoutSearch) -> None:
    out = layouts_out(BASE, found, "https://lab.example.org/")
    assert [r.rank for r in out.rows] == [1, 2, 3, 4]
    for row, r in zip(out.rows, found.rows, strict=True):
        assert (row.dp, row.tp, row.pp, row.peak_bytes) == (r.scenario.dp, r.scenario.tp, r.scenario.pp, r.peak)
        assert row.intra_node_bytes + row.inter_node_bytes == row.communication_bytes == r.traffic.bytes
        assert row.url.startswith("https://lab.example.org/?") and row.url.endswith(row.link)
    assert out.search.searched + out.search.pruned == out.search.candidates


def test_csv_carries_the_same_integers(found: LayoutSearch) -> None:
    rows = list(csv.DictReader(io.StringIO(csv_text(BASE, found))))
    assert tuple(rows[0]) == CSV_COLUMNS
    assert [int(r["communication_bytes"]) for r in rows] == [r.traffic.bytes for r in found.rows]


def test_the_table_labels_the_time_a_lower_bound(found: LayoutSearch) -> None:
    text = render_table(BASE, found)
    assert "≥ time: a lower bound" in text and "ignores latency, compute" in text
    assert text.count("/?") == 4


def test_an_empty_table_says_so() -> None:
    empty = search_layouts(parse_scenario({"model": "llama-3.2-1b"}), read_search({"gpus": 3}))
    assert "no layout fits" in render_table(parse_scenario({"model": "llama-3.2-1b"}), empty)
