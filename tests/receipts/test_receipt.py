"""The receipts: JSON names, the streamed CSV, display rounding and the canonical link."""

from __future__ import annotations

import csv
import io
import json
import re
import unicodedata
from fractions import Fraction
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from app.ledger.estimate import Estimate, estimate
from app.ledger.models.known import KNOWN_MODELS
from app.ledger.scenario import DEFAULT_SCENARIO, Scenario, parse_scenario
from app.ledger.scenario.fields import FIELDS
from app.ledger.scenario.links import canonical_query, link, slug
from app.receipts.csv_rows import (
    BOM,
    COLUMNS,
    csv_lines,
    csv_text,
    neutralise,
    restore,
    rows,
    scenario_inputs,
    split_formula,
)
from app.receipts.csv_rows import read_csv as parse_csv
from app.receipts.display import gb, gib, integer, percent_bp
from app.receipts.receipt import DEFAULT_BASE_URL, SCHEMA_VERSION, check_base_url, page_url, receipt
from app.receipts.schema import Receipt
from app.receipts.table import render_table
from tests.support.json_data import as_json_data
from tests.support.strategies import names, scenarios

SCHEDULE_MUTANTS = ("drop-reduce-scatter-buffer", "keep-all-grads-at-activation-peak")
DANGEROUS = ("=", "+", "-", "@", "\t", "\r")


def read_csv(e: Estimate) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(csv_text(e), newline="")))


def scenario_from_csv(table: list[dict[str, str]]) -> Scenario:
    """Rebuild the scenario from the CSV's ``input`` rows alone."""
    return parse_scenario(scenario_inputs(table), allow_unknown=False)


# --------------------------------------------------------------------------- JSON


def test_json_receipt_top_level_names(seed_estimate: Estimate) -> None:
    data = receipt(seed_estimate)
    assert data["schema_version"] == SCHEMA_VERSION == 2
    assert {"schema_version", "scenario", "stages", "checkpoint", "mutations"} <= set(data)
    assert data["scenario"] == {
        "params": 7_000_000_000,
        "dp": 8,
        "param_bytes": 2,
        "grad_bytes": 2,
        "master_bytes": 4,
        "opt_states": 2,
        "opt_bytes": 4,
        "unit_params": 400_000_000,
        "gather_bytes": 2,
        "prefetch": 0,
        "stage": 3,
        "bucket_bytes": 0,
        "activation_bytes": 20_000_000_000,
        "overhead_bytes": 0,
        "contingency_pct": 0,
        "capacity_bytes": 80_000_000_000,
        "name": "",
        "model": "",
        "seq_len": 4096,
        "micro_batch": 1,
        "act_bytes": 2,
        "act_policy": "none",
        "tp": 1,
        "sequence_parallel": 0,
        "logits_bytes": 4,
        "reduce_bytes": 2,
        "reshard_after_forward": 1,
        "norms": "unfused",
        "offload_optimizer": "none",
        "offload_param": "none",
        "ranks_per_node": 8,
        "host_bytes": 2_000_000_000_000,
        "zero_init": 1,
        "shard_group": 8,
        "hpz": 1,
        "pp": 1,
        "pp_stage": "first",
        "ep": 1,
    }


def test_json_receipt_stages(seed_estimate: Estimate) -> None:
    stages = receipt(seed_estimate)["stages"]
    assert [s["stage"] for s in stages] == [0, 1, 2, 3]
    for s in stages:
        assert {"persistent", "peak", "fits", "headroom_bytes", "communication_bytes", "lines"} <= set(s)
        assert set(s["persistent"]) >= {"parameters", "gradients", "master_weights", "optimizer_states", "total"}
        assert set(s["peak"]) >= {"persistent", "gather", "buckets", "activations", "overhead", "contingency", "total"}
        assert len(s["lines"]) == 4
        for ln in s["lines"]:
            assert {"width", "copies", "owners", "elements", "bytes", "formula", "evidence"} <= set(ln)
    # the worked example through the receipt: 112 / 38.5 / 26.25 / 14 GB, 0.7 GB gather at stage 3
    assert [s["persistent"]["total"] for s in stages] == [112 * 10**9, 38_500_000_000, 26_250_000_000, 14 * 10**9]
    assert stages[3]["peak"]["gather"] == 700_000_000
    assert [s["fits"] for s in stages] == [False, True, True, True]
    assert stages[0]["headroom_bytes"] == -52 * 10**9
    assert stages[0]["communication_bytes"] == 24_500_000_000


def test_json_receipt_checkpoint_and_mutations(seed_estimate: Estimate) -> None:
    data = receipt(seed_estimate)
    assert list(data["checkpoint"]) == ["sharded", "full_params", "full_state"]
    for policy in data["checkpoint"].values():
        assert {"device_bytes", "host_bytes"} <= set(policy)
    assert data["checkpoint"]["full_state"]["host_bytes"] == 98 * 10**9
    assert data["checkpoint"]["full_state"]["flagged"] is True
    assert len(data["mutations"]) == 9
    for m in data["mutations"]:
        assert {"id", "killed", "check", "message"} <= set(m)
        assert isinstance(m["killed"], bool)
        # the seed has no model: the two schedule mutants survive, equivalent there
        assert m["killed"] is (m["id"] not in SCHEDULE_MUTANTS)
        assert bool(m["check"]) is m["killed"]
    assert [m["id"] for m in data["mutations"]] == [
        "replicate-optimizer-stage1",
        "shard-params-stage2",
        "omit-master-copy",
        "divide-activations-by-dp",
        "erase-gather-peak",
        *SCHEDULE_MUTANTS,
        "flatten-shard-groups",
        "forget-pinned-buffers",
    ]
    assert all(m["killed"] for m in data["reference_mutations"])


def test_json_receipt_survivor(seed: Scenario) -> None:
    data = receipt(estimate(seed.with_(dp=1)))
    survivor = next(m for m in data["mutations"] if m["id"] == "shard-params-stage2")
    assert survivor["killed"] is False
    assert survivor["check"] == ""
    assert "dp = 1" in survivor["message"]
    assert all(m["killed"] for m in data["reference_mutations"])


def test_json_receipt_is_json(seed_estimate: Estimate) -> None:
    data = receipt(seed_estimate)
    assert json.loads(json.dumps(data)) == as_json_data(data)


# --------------------------------------------------------------------------- parallelism


def test_the_parallelism_key_of_a_plain_scenario(seed_estimate: Estimate) -> None:
    assert receipt(seed_estimate)["parallelism"] == {
        "world": 8, "dp": 8, "tp": 1, "pp": 1, "ep": 1, "shard_group": 8, "replicas": 1, "hpz": 1,
        "params_per_rank": 7_000_000_000, "expert_params_per_rank": 0,
        "share": None, "activations": None, "pipeline": None,
    }  # fmt: skip
    assert "Parallelism" not in render_table(seed_estimate)


def test_the_parallelism_key_of_llama_2_70b_on_128_gpus() -> None:
    """tp 8 × pp 4 × dp 4 = 128 GPUs. Each rank of the first stage holds 80 ÷ 4 = 20 decoder layers' tensor-parallel
    shares and the embedding's vocabulary share: one layer's 8,192·8,192 (q) + 2 · 1,024·8,192 (k, v; 8 key-value
    heads of 128) + 8,192·8,192 (o) + 3 · 28,672·8,192 (MLP) split 8 ways, plus both norms' 2 · 8,192 whole."""
    layer = (8192 * 8192 + 2 * 1024 * 8192 + 8192 * 8192 + 3 * 28672 * 8192) // 8 + 2 * 8192
    embed = 32000 * 8192 // 8
    assert layer == 106_971_136 and embed == 32_768_000
    e = estimate(parse_scenario({"model": "llama-2-70b", "tp": 8, "pp": 4, "dp": 4}), with_kill_lists=False)
    data = receipt(e)
    par = data["parallelism"]
    assert (par["world"], par["dp"], par["tp"], par["pp"], par["ep"]) == (128, 4, 8, 4, 1)
    assert par["params_per_rank"] == 20 * layer + embed == 2_172_190_720 == data["scenario"]["params"]
    assert par["expert_params_per_rank"] == 0
    share = par["share"]
    assert (share["stage"], share["layers"], share["dense"], share["experts"]) == ("first", 20, 2_172_190_720, 0)
    assert share["largest_unit"] == {"name": "layers.0", "params": layer}
    assert share["whole_model"] == 68_976_648_192
    assert share["lines"][-1].endswith("= 2,172,190,720 parameters per rank")
    assert par["activations"] == {"stage": "first", "in_flight": 4, "all_to_all_bytes": 0}
    pipe = par["pipeline"]
    assert (pipe["budgeted"], pipe["busier"], pipe["budgeted_is_busier"], pipe["other_problem"]) == (
        "first", "first", True, "")  # fmt: skip
    first, last = pipe["ends"]
    assert first["pp_stage"] == "first" and last["pp_stage"] == "last"
    # the first end is the scenario's own ledger at the run's stage
    assert first["peak"] == data["stages"][3]["peak"]["total"]
    assert first["activation_bytes"] == e.scenario.activation_bytes
    # the last end: 20 layers, the final norm 8,192 and the LM head's share 32,000 · 8,192 ÷ 8 (untied)
    assert last["params"] == 20 * layer + 8192 + embed == 2_172_198_912
    assert first["peak"] > last["peak"]
    Receipt.model_validate(data)
    table = read_csv(e)
    cell = {(r["stage"], r["ledger"], r["category"]): r for r in table}
    assert cell[("", "parallelism", "world")]["value"] == "128"
    assert cell[("", "parallelism", "world")]["formula"] == "4 × 8 × 4 = 128"
    assert cell[("", "parallelism", "params_per_rank")]["value"] == "2172190720"
    assert cell[("3", "parallelism", "pipeline.first.peak")]["bytes"] == str(first["peak"])
    assert cell[("3", "parallelism", "pipeline.last.peak")]["bytes"] == str(last["peak"])
    text = render_table(e)
    assert "world size = D × tp × pp = 4 × 8 × 4 = 128 GPUs" in text
    assert "first (budgeted, busier)" in text and "WARNING" not in text


def test_the_parallelism_key_of_mixtral_with_expert_parallelism() -> None:
    """ep 4 on D = 8: each rank holds 2 of every layer's 8 experts, 32 × 2 × 3 · 14,336·4,096 = 11,274,289,152
    expert parameters (sharded over D ÷ ep = 2), beside 1,605,636,096 dense ones (sharded over D)."""
    experts = 32 * 2 * 3 * 14336 * 4096
    assert experts == 11_274_289_152
    e = estimate(parse_scenario({"model": "mixtral-8x7b-v0.1", "ep": 4, "dp": 8}), with_kill_lists=False)
    data = receipt(e)
    par = data["parallelism"]
    assert (par["world"], par["ep"], par["pipeline"]) == (8, 4, None)
    assert par["expert_params_per_rank"] == experts
    assert par["share"]["dense"] == 1_605_636_096
    assert par["share"]["experts"] == experts
    assert par["params_per_rank"] == 1_605_636_096 + experts
    assert par["activations"]["stage"] == "only" and par["activations"]["all_to_all_bytes"] > 0
    Receipt.model_validate(data)
    cell = {(r["stage"], r["ledger"], r["category"]): r for r in read_csv(e)}
    assert cell[("", "parallelism", "expert_params_per_rank")]["value"] == str(experts)
    assert not any(r["category"].startswith("pipeline.") for r in read_csv(e) if r["ledger"] == "parallelism")
    assert "of which 11,274,289,152 expert, sharded over D ÷ ep = 2" in render_table(e)


def test_the_table_warns_when_the_budgeted_end_is_not_the_busier() -> None:
    """GPT-2 on two stages with full recomputation: the last stage's logits outweigh the first's embedding."""
    e = estimate(parse_scenario({"model": "gpt2", "pp": 2, "act_policy": "full"}), with_kill_lists=False)
    pipe = receipt(e)["parallelism"]["pipeline"]
    assert (pipe["budgeted"], pipe["busier"], pipe["budgeted_is_busier"]) == ("first", "last", False)
    text = render_table(e)
    assert "WARNING: the last stage is busier than the budgeted first stage" in text
    assert "--pp-stage last" in text


@pytest.mark.parametrize("raw", [{"dp": 16, "hpz": 8}, {"dp": 16, "shard_group": 8}, {"tp": 2}])
def test_the_table_shows_parallelism_for_any_non_trivial_layout(raw: dict[str, object]) -> None:
    e = estimate(parse_scenario(raw), with_kill_lists=False)
    text = render_table(e)
    assert "Parallelism: world size" in text
    par = receipt(e)["parallelism"]
    assert par["replicas"] == par["dp"] // par["shard_group"]


# --------------------------------------------------------------------------- CSV


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
                int(value)  # only a (negative) number may start like a formula


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
                int(value)  # only a (negative) number may start like a formula


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


@pytest.mark.parametrize(
    ("text", "formula", "remarks"),
    [
        ("⌈1 ÷ 2⌉ = 1 B", "⌈1 ÷ 2⌉ = 1 B", ()),
        ("all-gather not counted", "", ("all-gather not counted",)),
        ("", "", ()),
        ("4 × 2 B = 8 B (one unit at a time)", "4 × 2 B = 8 B", ("one unit at a time",)),
        ("9 × (2 + 4 + 2 × 4) B = 126 B", "9 × (2 + 4 + 2 × 4) B = 126 B", ()),
        (
            "per layer (attention core recomputed) = s·b·h × 2 B with s=8, t=2 with sequence parallelism\n"
            "  = 8 × 2 B = 16 B = 34·s·b·h (Korthikanti et al. 2022, Table 2)\nlogits = 4 B",
            "per layer = s·b·h × 2 B with s=8, t=2\n  = 8 × 2 B = 16 B = 34·s·b·h\nlogits = 4 B",
            (
                "per layer: attention core recomputed",
                "per layer: with sequence parallelism",
                "per layer: Korthikanti et al. 2022, Table 2",
            ),
        ),
    ],
)
def test_split_formula(text: str, formula: str, remarks: tuple[str, ...]) -> None:
    assert split_formula(text) == (formula, remarks)


# --------------------------------------------------------------------------- absolute URL


def test_url_is_the_scenarios_page_under_the_base() -> None:
    s = parse_scenario({"params": "13B", "dp": 16})
    e = estimate(s)
    assert receipt(e)["link"] == "dp=16&params=13000000000"  # unchanged: other tools read it
    assert receipt(e)["url"] == f"{DEFAULT_BASE_URL}/?dp=16&params=13000000000" == page_url(s)
    assert (
        receipt(e, "https://lab.example.org/zero3")["url"] == "https://lab.example.org/zero3/?dp=16&params=13000000000"
    )
    assert receipt(e, "https://lab.example.org/")["url"] == "https://lab.example.org/?dp=16&params=13000000000"
    assert receipt(estimate(DEFAULT_SCENARIO))["url"] == f"{DEFAULT_BASE_URL}/"


@given(scenarios(name=names))
def test_url_is_absolute_and_ends_with_the_canonical_query(s: Scenario) -> None:
    data = receipt(estimate(s), "https://lab.example.org")
    assert data["url"].startswith("https://lab.example.org/")
    assert data["url"].endswith("/?" + data["link"] if data["link"] else "/")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("http://127.0.0.1:8000", "http://127.0.0.1:8000"),
        ("https://Lab.Example.org/", "https://lab.example.org"),
        ("https://lab.example.org/zero3/", "https://lab.example.org/zero3"),
        ("http://[::1]:8000", "http://[::1]:8000"),
        ("HTTP://localhost", "http://localhost"),
        ("http://zero3_lab:8000", "http://zero3_lab:8000"),  # a container's name
    ],
)
def test_check_base_url_accepts_plain_bases(text: str, expected: str) -> None:
    assert check_base_url(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        "",
        "127.0.0.1:8000",
        "ftp://example.org",
        "javascript:alert(1)",
        "https://user:pw@example.org",
        "https://example.org/?dp=1",
        "https://example.org/#x",
        "https://example.org:99999",
        "https://exa mple.org",
        "https://example.org\n.evil",
        "https://example.org/a/../b",
        "https://example.org/<script>",
        "https://",
        "https://evil.org\\@example.org",
    ],
)
def test_check_base_url_refuses_anything_else(text: str) -> None:
    with pytest.raises(ValueError, match=r"must|has a"):
        check_base_url(text)


# --------------------------------------------------------------------------- display


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (14 * 10**9, "14.00 GB"),
        (112 * 10**9, "112.00 GB"),
        (1_750_000_000, "1.75 GB"),
        (700_000_000, "0.70 GB"),
        (0, "0.00 GB"),
        (5_000_000, "0.01 GB"),  # 0.005 GB rounds half up
        (4_999_999, "0.00 GB"),
        (1_234 * 10**9, "1,234.00 GB"),
        (-52 * 10**9, "−52.00 GB"),
        (2**30, "1.07 GB"),  # 1.073741824
    ],
)
def test_gb_exact_rounding(value: int, expected: str) -> None:
    assert gb(value) == expected


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (2**30, "1.00 GiB"),
        (80 * 10**9, "74.51 GiB"),  # 80e9 ÷ 2^30 = 74.5058…
        (14 * 10**9, "13.04 GiB"),  # 13.0385…
        (112 * 10**9, "104.31 GiB"),  # 104.3081…
        (2**29, "0.50 GiB"),
        (5_368_710, "0.01 GiB"),  # half a hundredth is 2^30 ÷ 200 = 5,368,709.12 B: above it rounds up
        (5_368_709, "0.00 GiB"),  # just below it rounds down
        (0, "0.00 GiB"),
    ],
)
def test_gib_exact_rounding(value: int, expected: str) -> None:
    assert gib(value) == expected


def _half_up(value: int, unit: int, label: str) -> str:
    """Independent reference: exact rational arithmetic, then Python's own formatting."""
    magnitude = Fraction(abs(value), unit)
    hundredths = int(magnitude * 100 + Fraction(1, 2))  # floor of a non-negative value: half up
    sign = "−" if value < 0 else ""
    return f"{sign}{hundredths // 100:,}.{hundredths % 100:02d} {label}"


# Where the rounding or the formatting changes branch: zero hundredths, and 999.99 → 1,000.00.
_GIB_1000 = 1000 * 2**30 - 2**29 // 100  # about where 999.995 GiB rounds up to 1,000.00
EDGES = st.sampled_from(
    [
        0,
        4_999_999,
        5_000_000,
        5_368_709,
        5_368_710,
        999_994_999_999,
        999_995_000_000,
        *range(_GIB_1000 - 3, _GIB_1000 + 3),
    ]
).flatmap(lambda v: st.sampled_from([v, -v]))


@given(st.integers(min_value=-(2**53), max_value=2**53) | EDGES)
def test_gb_and_gib_round_half_up_like_exact_fractions(value: int) -> None:
    assert gb(value) == _half_up(value, 10**9, "GB")
    assert gib(value) == _half_up(value, 2**30, "GiB")


def test_binary_never_labelled_gb() -> None:
    assert (gb(80 * 10**9), gib(80 * 10**9)) == ("80.00 GB", "74.51 GiB")
    assert integer(7 * 10**9) == "7,000,000,000"
    assert percent_bp(1_250) == "12.50 %"
    assert percent_bp(5) == "0.05 %"


# --------------------------------------------------------------------------- links


def test_canonical_query_omits_defaults() -> None:
    assert canonical_query(DEFAULT_SCENARIO) == ""
    assert link(DEFAULT_SCENARIO) == "/"


def test_canonical_query_sorted() -> None:
    s = parse_scenario({"params": "13B", "dp": 16, "prefetch": 1, "activation_bytes": "30GB"})
    assert canonical_query(s) == "activation_bytes=30000000000&dp=16&params=13000000000&prefetch=1"
    assert link(s, "/lab") == "/lab?activation_bytes=30000000000&dp=16&params=13000000000&prefetch=1"


def test_canonical_query_one_address_per_scenario() -> None:
    """Spelling U = N or gather = param width explicitly gives the same link as leaving them out."""
    explicit = parse_scenario({"params": 1_000, "unit_params": 1_000, "param_bytes": 4, "gather_bytes": 4})
    implicit = parse_scenario({"params": 1_000, "param_bytes": 4})
    assert canonical_query(explicit) == canonical_query(implicit) == "param_bytes=4&params=1000"


def test_canonical_query_encodes_the_name() -> None:
    assert canonical_query(DEFAULT_SCENARIO.with_(name="a b&c")) == "name=a+b%26c"


def test_slug() -> None:
    assert slug(DEFAULT_SCENARIO) == "7000000000p-dp8"
    assert slug(DEFAULT_SCENARIO.with_(name="Llama 2 / 7B")) == "Llama-2-7B"
    assert slug(DEFAULT_SCENARIO.with_(name="ééé")) == "scenario"


# --------------------------------------------------------------------------- table


def test_table_shows_the_worked_example(seed_estimate: Estimate) -> None:
    text = render_table(seed_estimate)
    for figure in ("112.00 GB", "38.50 GB", "26.25 GB", "14.00 GB", "700,000,000 B", "DOES NOT FIT", "74.51 GiB"):
        assert figure in text
    assert "FLAGGED" in text
