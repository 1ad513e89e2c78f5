"""The CSV receipt: its rows and columns, formula-safe cells, the BOM, and a receipt read back into its scenario."""

from __future__ import annotations

import csv
import io
import re
import unicodedata
from decimal import ROUND_HALF_UP, Context, Decimal
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.ledger.estimate import Estimate, estimate
from app.ledger.models.known import KNOWN_MODELS
from app.ledger.scenario import DEFAULT_SCENARIO, Scenario, parse_scenario
from app.ledger.scenario.fields import FIELDS
from app.receipts.csv_format import BOM, neutralise, restore
from app.receipts.csv_format import read_csv as parse_csv
from app.receipts.csv_rows import COLUMNS, csv_lines, csv_text, rows, scenario_inputs
from app.receipts.receipt import receipt
from tests.support.strategies import names, scenarios

DANGEROUS = ("=", "+", "-", "@", "\t", "\r")


def read_csv(e: Estimate) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(csv_text(e), newline="")))


def scenario_from_csv(table: list[dict[str, str]]) -> Scenario:
    """Rebuild the scenario from the CSV's ``input`` rows alone."""
    return parse_scenario(scenario_inputs(table), allow_unknown=False)


def test_csv_starts_with_its_header_and_ends_lines_with_crlf(seed_estimate: Estimate) -> None:
    text = csv_text(seed_estimate)
    assert text.startswith(",".join(COLUMNS) + "\r\n")
    assert text.endswith("\r\n")


def test_csv_readable_by_dictreader(seed_estimate: Estimate) -> None:
    table = read_csv(seed_estimate)
    reader = csv.DictReader(io.StringIO(csv_text(seed_estimate), newline=""))
    assert reader.fieldnames is not None
    assert {"stage", "ledger", "category", "bytes"} <= set(reader.fieldnames)
    assert len(table) == len(list(rows(seed_estimate)))
    keys = [(r["stage"], r["ledger"], r["category"]) for r in table]
    assert len(keys) == len(set(keys)), "one row per (stage, ledger, category)"
    assert {r["ledger"] for r in table} == {
        "host",
        "parallelism",
        "input",
        "persistent",
        "peak",
        "declared_peak",
        "fit",
        "fit_finder",
        "communication",
        "checkpoint",
        "mutation",
        "reference_mutation",
    }


def test_csv_persistent_rows_worked_example(seed_estimate: Estimate) -> None:
    table = read_csv(seed_estimate)
    cell = {(r["stage"], r["ledger"], r["category"]): r for r in table}
    assert cell[("3", "persistent", "parameters")]["bytes"] == "1750000000"
    assert cell[("3", "persistent", "parameters")]["owners"] == "8"
    assert cell[("3", "persistent", "parameters")]["elements"] == "875000000"
    assert cell[("0", "persistent", "total")]["bytes"] == "112000000000"
    assert cell[("3", "peak", "gather")]["bytes"] == "700000000"
    # 56e9 of 112e9 = 50.00 % = 5000 basis points
    assert cell[("0", "persistent", "optimizer_states")]["share_bp"] == "5000"


def test_csv_input_rows_reconstruct_the_receipt() -> None:
    s = parse_scenario({"params": "13B", "dp": 64, "prefetch": 2, "param_bytes": 4, "name": 'llama, "13B"'})
    e = estimate(s)
    rebuilt = scenario_from_csv(read_csv(e))
    assert rebuilt == s
    assert receipt(estimate(rebuilt)) == receipt(e)
    inputs = [r["category"] for r in read_csv(e) if r["ledger"] == "input"]
    assert inputs == [f.name for f in FIELDS]


@given(scenarios(name=names))
def test_csv_round_trip_property(s: Scenario) -> None:
    """Names that a spreadsheet would run as formulas are neutralised, and restored on reading."""
    e = estimate(s)
    assert receipt(estimate(scenario_from_csv(read_csv(e)))) == receipt(e)


def csv_integers(table: list[dict[str, str]], ledger: str) -> dict[tuple[int, str], int]:
    return {(int(r["stage"]), r["category"]): int(r["bytes"]) for r in table if r["ledger"] == ledger}


def json_integers(data: dict[str, Any], key: str) -> dict[tuple[int, str], int]:
    return {(s["stage"], part): value for s in data["stages"] for part, value in s[key].items() if part in PARTS[key]}


PARTS = {
    "persistent": {"parameters", "gradients", "master_weights", "optimizer_states", "total"},
    "peak": {"persistent", "gather", "buckets", "activations", "overhead", "contingency", "total"},
}


@given(scenarios())
def test_csv_and_json_agree_on_every_persistent_and_peak_integer(s: Scenario) -> None:
    e = estimate(s)
    table, data = read_csv(e), receipt(e)
    for key in ("persistent", "peak"):
        from_csv, from_json = csv_integers(table, key), json_integers(data, key)
        assert len(from_json) == 4 * len(PARTS[key])
        assert from_csv == from_json
    headroom = {int(r["stage"]): int(r["bytes"]) for r in table if r["ledger"] == "fit"}
    assert headroom == {st["stage"]: st["headroom_bytes"] for st in data["stages"]}
    comm = {int(r["stage"]): int(r["bytes"]) for r in table if r["ledger"] == "communication"}
    assert comm == {st["stage"]: st["communication_bytes"] for st in data["stages"]}
    for policy, values in data["checkpoint"].items():
        by_category = {r["category"]: int(r["bytes"]) for r in table if r["ledger"] == "checkpoint" and not r["stage"]}
        assert by_category[f"{policy}.device"] == values["device_bytes"]
        assert by_category[f"{policy}.host"] == values["host_bytes"]


@pytest.mark.parametrize("lead", DANGEROUS)
def test_formula_like_name_is_neutralised(lead: str) -> None:
    name = f'{lead}HYPERLINK("http://x")'
    e = estimate(DEFAULT_SCENARIO.with_(name=name))
    table = read_csv(e)
    (row,) = [r for r in table if r["ledger"] == "input" and r["category"] == "name"]
    assert row["value"] == "'" + name
    for r in table:
        for value in r.values():
            if value and value.startswith(DANGEROUS):
                Decimal(value)  # only a (negative) number may start like a formula


def test_negative_headroom_stays_a_number(seed_estimate: Estimate) -> None:
    """Stage 0 peak 132 GB against 80 GB: headroom −52,000,000,000, written as a plain integer."""
    (row,) = [r for r in read_csv(seed_estimate) if r["ledger"] == "fit" and r["stage"] == "0"]
    assert row["bytes"] == "-52000000000"
    assert row["value"] == "does not fit"


@pytest.mark.parametrize(
    ("text", "expected"),
    [("=1+1", "'=1+1"), ("+x", "'+x"), ("-x", "'-x"), ("@x", "'@x"), ("\tx", "'\tx"), ("\rx", "'\rx"), ("ok", "ok")],
)
def test_neutralise(text: str, expected: str) -> None:
    assert neutralise(text) == expected


# Regression (issue 11, item 5): full-width ＝ ＋ － ＠ at the start of a name were written as is.
FULLWIDTH = ("\uff1d", "\uff0b", "\uff0d", "\uff20")  # ＝ ＋ － ＠
FORMULA_LIKE = (*DANGEROUS, "\u2212")  # U+2212 minus sign too


def starts_like_a_formula(cell: str) -> bool:
    """Independent of the implementation: the first non-blank character, NFKC-normalised."""
    head = cell.lstrip()
    return cell.startswith(("\t", "\r")) or unicodedata.normalize("NFKC", head[:1]).startswith(FORMULA_LIKE)


@pytest.mark.parametrize("lead", FULLWIDTH)
def test_fullwidth_formula_name_is_neutralised(lead: str) -> None:
    """Through the real parser and the real CSV: the name is quoted, and reads back unchanged."""
    name = f'{lead}HYPERLINK("x")'
    s = parse_scenario({"name": name})
    e = estimate(s)
    table = read_csv(e)
    (row,) = [r for r in table if r["ledger"] == "input" and r["category"] == "name"]
    assert row["value"] == "'" + name
    assert scenario_from_csv(table) == s
    for r in table:
        for value in r.values():
            if value and starts_like_a_formula(value):
                Decimal(value)  # only a (negative) number may start like a formula


@pytest.mark.parametrize(
    "text",
    [
        "\ufe66x",  # ﹦ small equals sign
        "\ufe62x",  # ﹢ small plus sign
        "\ufe63x",  # ﹣ small hyphen-minus
        "\ufe6bx",  # ﹫ small commercial at
        "\u207cx",  # ⁼ superscript equals
        "\u207ax",  # ⁺ superscript plus
        "\u2a75x",  # ⩵ two equals signs (NFKC "==")
        "\u2212x",  # − minus sign: some locales read it as a minus on input
        "\u207bx",  # ⁻ superscript minus (NFKC U+2212)
        " =1+1",  # leading blanks that a spreadsheet may skip
        "  @SUM(A1)",
        "\u3000\uff1d1+1",  # ideographic space, then ＝
        "\u00a0-x",  # no-break space
        " \tx",
        "\u200b=1",  # zero-width space (a format character)
    ],
)
def test_lookalike_formula_leads_are_neutralised(text: str) -> None:
    assert neutralise(text) == "'" + text
    assert restore(neutralise(text)) == text


@pytest.mark.parametrize("text", ["ok", " ok", "'ok", "1-1", "x=1", "\u2014x", "\u2010x", "(=1)", ""])
def test_ordinary_text_is_left_alone(text: str) -> None:
    assert neutralise(text) == text


def test_a_quoted_formula_survives_the_round_trip() -> None:
    """A name that already starts with ``'=`` gets a second quote, so reading back removes just one."""
    assert neutralise("'=1") == "''=1"
    assert restore("''=1") == "'=1"
    s = parse_scenario({"name": "'=1"})
    assert scenario_from_csv(read_csv(estimate(s))) == s


@given(st.text(max_size=20))
def test_neutralise_round_trips_and_leaves_no_formula(text: str) -> None:
    cell = neutralise(text)
    assert restore(cell) == text
    assert cell.startswith("'") or not starts_like_a_formula(cell)


# --------------------------------------------------------------------------- CSV for spreadsheets (issue 14, item 10)


def test_the_bom_is_asked_for_and_a_reader_with_utf8_sig_sees_the_same_rows(seed_estimate: Estimate) -> None:
    plain, marked = csv_text(seed_estimate), csv_text(seed_estimate, bom=True)
    assert not plain.startswith(BOM)
    assert marked == BOM + plain
    assert next(csv_lines(seed_estimate, bom=True)).startswith(BOM + "stage,ledger,")
    data = marked.encode("utf-8")
    assert data.startswith(b"\xef\xbb\xbf")
    # Python's csv module on the bytes decoded as utf-8-sig: the very rows of the plain text
    with_sig = list(csv.DictReader(io.StringIO(data.decode("utf-8-sig"), newline="")))
    assert with_sig == read_csv(seed_estimate)
    assert parse_csv(data) == parse_csv(marked) == parse_csv(plain) == with_sig


def test_a_receipt_read_back_with_its_bom_rebuilds_the_scenario() -> None:
    """Even by a reader that keeps the BOM in the first column's name (plain "utf-8")."""
    s = parse_scenario({"params": "13B", "dp": 64, "name": "=cmd|' /C calc'!A0"})
    data = csv_text(estimate(s), bom=True).encode("utf-8")
    naive = list(csv.DictReader(io.StringIO(data.decode("utf-8"), newline="")))
    assert next(iter(naive[0])) == BOM + "stage"
    assert parse_scenario(scenario_inputs(naive), allow_unknown=False) == s
    assert parse_scenario(scenario_inputs(parse_csv(data)), allow_unknown=False) == s


# The rule for the formula column: a formula cell is empty, or each of its lines is arithmetic with
# its numbers substituted: a digit and "=" (or "≈" for a rounded fraction), and no prose: no three
# words in a row, no colon or semicolon (the marks of an explanation). "per layer = …",
# "7,000,000,000 elements × 2 B × 1 copy = …" and "⌈(Ψ_g + Ψ_p = …) × 7 ÷ 8⌉ = …" pass.
THREE_WORDS = re.compile(r"[^\W\d_]{2,}(?:\s+[^\W\d_]{2,}){2,}")


def prose_in_formula(cell: str) -> str | None:
    """The first line of a formula cell that breaks the rule, or None."""
    for line in cell.split("\n") if cell else ():
        arithmetic = re.search(r"\d", line) and ("=" in line or "≈" in line)
        if not arithmetic or THREE_WORDS.search(line) or ":" in line or ";" in line:
            return line
    return None


def assert_formulas_hold_no_prose(e: Estimate) -> None:
    for row in read_csv(e):
        bad = prose_in_formula(row["formula"])
        assert bad is None, (row["stage"], row["ledger"], row["category"], bad)


@pytest.mark.parametrize(
    ("cell", "ok"),
    [
        ("", True),
        ("7,000,000,000 elements × 2 B × 1 copy = 14,000,000,000 B", True),
        ("⌈(Ψ_g + Ψ_p = 14 + 14) × 7 ÷ 8⌉ = 25 B", True),
        ("1,024 ÷ 21,975 ≈ 0.0466", True),
        ("per layer (checkpoint) = s·b·h × 2 B with s=4,096, b=1\n  = 16 × 2 B = 32 B", True),
        ("stages 0–2 hold full parameters: nothing to gather", False),
        ("20,000,000,000 B, not divided by D", False),
        ("400,000,000 × 2 B = 800,000,000 B (one unit at a time)", False),
        ("0 B: every rank writes its own shards", False),
        ("oracle-agreement", False),
        ("x = 1 B; see the notes", False),
    ],
)
def test_the_formula_rule_itself(cell: str, ok: bool) -> None:
    assert (prose_in_formula(cell) is None) is ok


@given(scenarios(name=names))
def test_no_formula_cell_holds_prose(s: Scenario) -> None:
    assert_formulas_hold_no_prose(estimate(s))


MODEL_RAWS = [
    {"model": m.id, "act_policy": policy, "dp": dp}
    for m in KNOWN_MODELS
    for policy, dp in (("none", 8), ("selective", 1), ("full", 64))
] + [
    {"model": "gpt2", "activation_bytes": "3GB"},
    {"model": "llama-2-7b", "tp": 4, "sequence_parallel": 1},
    {"model": "llama-2-7b", "tp": 4},
    {"model": "gpt2", "tp": 4, "sequence_parallel": 1},
]


@pytest.mark.parametrize("raw", MODEL_RAWS, ids=lambda r: "-".join(str(v) for v in r.values()))
def test_no_formula_cell_holds_prose_for_a_model(raw: dict[str, object]) -> None:
    e = estimate(parse_scenario(raw))
    assert_formulas_hold_no_prose(e)
    cell = {(r["stage"], r["ledger"], r["category"]): r for r in read_csv(e)}
    if e.activation_source == "modelled":
        total = cell[("", "activations", "total")]
        assert total["formula"].splitlines()[-1].endswith(f"= {e.model.activations.total_bytes:,} B")  # type: ignore[union-attr]
        assert total["detail"]  # the assumptions
        assert cell[("", "activations", "recompute_flops_fraction")]["formula"]


def test_explanations_are_in_the_detail_column(seed: Scenario) -> None:
    """What the formula column used to carry besides arithmetic now leads or follows the detail."""
    e = estimate(seed.with_(master_bytes=0))
    cell = {(r["stage"], r["ledger"], r["category"]): r for r in read_csv(e)}
    gather0 = cell[("0", "peak", "gather")]
    assert (gather0["formula"], gather0["detail"]) == ("", "stages 0–2 hold full parameters: nothing to gather")
    assert cell[("3", "peak", "gather")]["formula"].endswith("= 700,000,000 B")
    activations = cell[("0", "peak", "activations")]
    assert activations["formula"] == ""
    assert activations["detail"] == "placeholder; 20,000,000,000 B, not divided by D"
    device = cell[("", "checkpoint", "full_params.device")]
    assert device["formula"] == "400,000,000 × 2 B = 800,000,000 B"
    assert "one unit at a time" in device["detail"]
    sharded = cell[("", "checkpoint", "sharded.host")]
    assert (sharded["formula"], sharded["detail"]) == ("", "0 B: every rank writes its own shards")
    master = cell[("0", "persistent", "master_weights")]
    assert master["formula"] == "7,000,000,000 elements × 0 B × 0 copies = 0 B"
    assert "no separate master copy (master_bytes = 0)" in master["detail"]  # the line's note
    mutation = cell[("", "mutation", "shard-params-stage2")]
    assert mutation["formula"] == ""
    assert mutation["detail"].startswith("killed by oracle-agreement: stage 2 parameters:")
    comm = cell[("0", "communication", "total")]
    assert comm["detail"].startswith("all-reduce of gradients; ring collectives send")


def test_a_survivor_explains_itself_in_the_detail(seed: Scenario) -> None:
    cell = {(r["ledger"], r["category"]): r for r in read_csv(estimate(seed.with_(dp=1)))}
    survivor = cell[("mutation", "shard-params-stage2")]
    assert (survivor["value"], survivor["formula"]) == ("survived", "")
    assert survivor["detail"] == "survived: dp = 1: sharding is the identity"


@settings(max_examples=30, deadline=None)
@given(scenarios())
def test_every_byte_count_is_also_in_gb_and_gib(s: Scenario) -> None:
    """A reviewer reads sizes without dividing: ``gb`` and ``gib`` beside every ``bytes``, two decimals rounded
    half up (checked here with Decimal's own rounding, not the display's integer arithmetic); none without."""
    exact_enough = Context(prec=80)  # x ÷ 2^30 has up to 30 decimals: no rounding before the quantize
    for r in read_csv(estimate(s)):
        if not r["bytes"]:
            assert r["gb"] == r["gib"] == ""
            continue
        exact = Decimal(int(r["bytes"]))
        for column, unit in (("gb", 10**9), ("gib", 2**30)):
            want = exact_enough.divide(exact, Decimal(unit)).quantize(Decimal("0.01"), rounding=ROUND_HALF_UP)
            assert Decimal(r[column]) == want, (r, column)
