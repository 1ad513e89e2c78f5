"""The bounded scenario: every field at and just past its bounds, one error per bad field."""

from __future__ import annotations

import json

import pytest

from app.ledger.bounds import TEN_13
from app.ledger.scenario import DEFAULT_SCENARIO, FieldError, Scenario, ScenarioError, parse_scenario
from app.ledger.scenario.across import default_unit_params
from app.ledger.scenario.fields import FIELD_BY_NAME, FIELDS, Field, allowed_text

NUMERIC = [f for f in FIELDS if f.kind not in ("text", "choice")]


def context_for(field: Field) -> dict[str, object]:
    """Other inputs a boundary value needs to be valid on its own (U ≤ N: test U with N at its maximum)."""
    if field.name in ("unit_params", "trainable_params"):
        return {"params": TEN_13}
    if field.name == "lora_rank":  # at most the narrowest target's width: PEFT's default q_proj, v_proj, as wide
        return {
            "model": "cfg:model_type=llama;hidden_size=16384;num_hidden_layers=1;num_attention_heads=128;"
            "num_key_value_heads=128;intermediate_size=16384;vocab_size=128"
        }
    if field.name == "frozen_layers":  # at most the model's layers: a model of 1,024
        return {
            "model": "cfg:model_type=llama;hidden_size=64;num_hidden_layers=1024;num_attention_heads=4;"
            "intermediate_size=64;vocab_size=128"
        }
    if field.name == "freeze_embed":
        return {"model": "llama-2-7b"}
    if field.name == "reserve_bytes":  # at most the capacity
        return {"capacity_bytes": 2**46}
    if field.name in ("shard_group", "hpz"):  # each must divide D
        return {"dp": 131_072}
    if field.name == "ep":  # a mixture of experts with as many experts as ep allows, over as many ranks
        return {
            "dp": 1_024,
            "model": "cfg:model_type=mixtral;hidden_size=64;num_hidden_layers=1;"
            "num_attention_heads=4;intermediate_size=64;vocab_size=128;num_local_experts=1024;num_experts_per_tok=2",
        }
    return {}


def only_error(raw: dict[str, object], **kwargs: bool) -> FieldError:
    with pytest.raises(ScenarioError) as info:
        parse_scenario(raw, **kwargs)
    assert len(info.value.errors) == 1, info.value.errors
    return info.value.errors[0]


# --------------------------------------------------------------------------- bounds


@pytest.mark.parametrize("field", NUMERIC, ids=lambda f: f.name)
@pytest.mark.parametrize("edge", ["minimum", "maximum"])
def test_numeric_bound_accepted(field: Field, edge: str) -> None:
    value: int = getattr(field, edge)
    s = parse_scenario({**context_for(field), field.name: value})
    assert getattr(s, field.name) == value
    # the same value as a string from a URL, form or flag
    assert getattr(parse_scenario({**context_for(field), field.name: str(value)}), field.name) == value


@pytest.mark.parametrize("field", NUMERIC, ids=lambda f: f.name)
@pytest.mark.parametrize("text", ["\u0663", "\u00b2", "\uff17", "0" * 40 + "7", "7" * 41])
def test_digits_that_are_not_ascii_or_too_many_are_refused(field: Field, text: str) -> None:
    """Arabic-Indic 3, superscript 2, fullwidth 7 and 41-character digit strings: str.isdigit()
    says yes to all of them, the parser to none (as a field error, never an exception)."""
    assert only_error({**context_for(field), field.name: text}).field == field.name


@pytest.mark.parametrize("field", NUMERIC, ids=lambda f: f.name)
def test_leading_zeros_read_as_the_number(field: Field) -> None:
    text = "0" * (40 - len(str(field.minimum))) + str(field.minimum)  # 40 characters: the longest read
    assert getattr(parse_scenario({**context_for(field), field.name: text}), field.name) == field.minimum


@pytest.mark.parametrize("field", NUMERIC, ids=lambda f: f.name)
@pytest.mark.parametrize("delta", [-1, +1])
def test_numeric_bound_exceeded_rejected(field: Field, delta: int) -> None:
    value = field.minimum - 1 if delta < 0 else field.maximum + 1
    err = only_error({**context_for(field), field.name: value})
    assert err.field == field.name
    assert f"{value:,}" in err.message
    text = str(err)
    assert field.name in text
    # U below 0 or above 10^13 is out of range whatever N is: "0 … params" (the N-specific range is
    # in the error for U > N, below)
    assert err.allowed == allowed_text(field)
    assert err.allowed in text


@pytest.mark.parametrize(
    ("name", "allowed"),
    [
        ("params", "1 … 10,000,000,000,000 (10T)"),
        ("dp", "1 … 131,072"),
        ("param_bytes", "one of 1, 2, 4"),
        ("grad_bytes", "one of 2, 4"),
        ("master_bytes", "one of 0, 4, 8"),
        ("opt_states", "0 … 4"),
        ("opt_bytes", "one of 1, 2, 4, 8"),
        ("gather_bytes", "one of 1, 2, 4"),
        ("reduce_bytes", "one of 2, 4"),
        ("prefetch", "0 … 8"),
        ("reshard_after_forward", "one of 0, 1"),
        ("bucket_bytes", "0 … 1,099,511,627,776 (1 TiB)"),
        ("activation_bytes", "0 … 70,368,744,177,664 (64 TiB)"),
        ("overhead_bytes", "0 … 70,368,744,177,664 (64 TiB)"),
        ("contingency_pct", "0 … 100"),
        ("capacity_bytes", "1 … 70,368,744,177,664 (64 TiB)"),
        ("name", "up to 80 printable characters"),
    ],
)
def test_allowed_ranges_match_the_spec(name: str, allowed: str) -> None:
    """The spec's table of bounds, written out by hand (2^40 = 1,099,511,627,776; 2^46 = 70,368,744,177,664)."""
    assert allowed_text(FIELD_BY_NAME[name]) == allowed


def test_every_spec_field_is_in_the_table() -> None:
    assert {f.name for f in FIELDS} == {
        "stack",
        "loss",
        "wrap",
        "buffers",
        "reserve_bytes",
        "reserve_source",
        "ac_every",
        "optimizer_impl",
        "gqa",
        "loss_chunks",
        "grad_accum",
        "grad_sync",
        "reshard_after_backward",
        "save_path",
        "trainable_params",
        "frozen_bytes",
        "lora_rank",
        "lora_targets",
        "base_quant",
        "frozen_layers",
        "freeze_embed",
        "frozen_modules",
        "params",
        "dp",
        "param_bytes",
        "grad_bytes",
        "master_bytes",
        "opt_states",
        "opt_bytes",
        "unit_params",
        "gather_bytes",
        "prefetch",
        "bucket_bytes",
        "activation_bytes",
        "overhead_bytes",
        "contingency_pct",
        "capacity_bytes",
        "name",
        # issue 5: the model and the activation model's inputs
        "model",
        "seq_len",
        "micro_batch",
        "act_bytes",
        "act_policy",
        "tp",
        "sequence_parallel",
        "logits_bytes",
        "reduce_bytes",
        "reshard_after_forward",
        "norms",
        "stage",
        "offload_optimizer",
        "offload_param",
        "ranks_per_node",
        "host_bytes",
        "load_path",
        "routing_imbalance_pct",
        "shard_group",
        "hpz",
        "pp",
        "pp_stage",
        "ep",
        "cp",
    }


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("param_bytes", 3),
        ("param_bytes", 8),
        ("param_bytes", 16),
        ("param_bytes", 0),
        ("grad_bytes", 1),
        ("grad_bytes", 3),
        ("grad_bytes", 8),
        ("master_bytes", 1),
        ("master_bytes", 2),
        ("master_bytes", 16),
        ("opt_bytes", 3),
        ("opt_bytes", 16),
        ("opt_bytes", 0),
        ("gather_bytes", 3),
        ("gather_bytes", 8),
    ],
)
def test_unsupported_width_rejected_never_rounded(name: str, value: int) -> None:
    for raw in (value, str(value)):
        err = only_error({name: raw})
        assert err.field == name
        assert "not a supported value" in err.message
        assert err.allowed.startswith("one of ")


@pytest.mark.parametrize("value", [1, 2, 4])
def test_supported_param_widths(value: int) -> None:
    assert parse_scenario({"param_bytes": value}).param_bytes == value


# --------------------------------------------------------------------------- dependent defaults


def test_unit_params_above_params_refused_naming_both() -> None:
    err = only_error({"params": 1_000, "unit_params": 1_001})
    assert err.field == "unit_params"
    assert "params" in err.message
    assert "1,001" in err.message
    assert "1,000" in err.message
    assert err.allowed == "0 … params (1,000)"
    text = str(err)
    assert text.startswith("unit_params:")


def test_unit_params_equal_to_params_accepted() -> None:
    assert parse_scenario({"params": 1_000, "unit_params": 1_000}).unit_params == 1_000


def test_unit_params_above_default_params_refused() -> None:
    """params absent: its default 7e9 bounds U."""
    err = only_error({"unit_params": 7_000_000_001})
    assert "7,000,000,000" in err.message


def test_unit_params_with_bad_params_reports_params_only_once() -> None:
    with pytest.raises(ScenarioError) as info:
        parse_scenario({"params": 0, "unit_params": 5})
    assert [e.field for e in info.value.errors] == ["params"]


@pytest.mark.parametrize(
    ("params", "expected"),
    [(1, 1), (399_999_999, 399_999_999), (400_000_000, 400_000_000), (400_000_001, 400_000_000), (TEN_13, 4 * 10**8)],
)
def test_unit_params_default_is_min_400m_n(params: int, expected: int) -> None:
    assert parse_scenario({"params": params}).unit_params == expected
    assert default_unit_params(params) == expected


def test_explicit_zero_unit_params() -> None:
    assert parse_scenario({"unit_params": 0}).unit_params == 0


@pytest.mark.parametrize("param_bytes", [1, 2, 4])
def test_gather_bytes_defaults_to_param_bytes(param_bytes: int) -> None:
    assert parse_scenario({"param_bytes": param_bytes}).gather_bytes == param_bytes


def test_explicit_gather_bytes_kept() -> None:
    s = parse_scenario({"param_bytes": 4, "gather_bytes": 2})
    assert (s.param_bytes, s.gather_bytes) == (4, 2)


def test_empty_input_is_the_seed() -> None:
    assert parse_scenario({}) == DEFAULT_SCENARIO == Scenario()
    s = DEFAULT_SCENARIO
    assert (s.params, s.dp, s.unit_params, s.gather_bytes, s.activation_bytes, s.capacity_bytes) == (
        7_000_000_000,
        8,
        400_000_000,
        2,
        20_000_000_000,
        80_000_000_000,
    )


# --------------------------------------------------------------------------- name


def test_name_of_80_printable_characters_accepted() -> None:
    name = "é" * 40 + "x" * 40
    assert parse_scenario({"name": name}).name == name


def test_empty_name_accepted() -> None:
    assert parse_scenario({"name": ""}).name == ""
    assert parse_scenario({"name": "   "}).name == ""


def test_name_of_81_characters_rejected() -> None:
    err = only_error({"name": "x" * 81})
    assert err.field == "name"
    assert "81" in err.message
    assert err.allowed == "up to 80 printable characters"


@pytest.mark.parametrize("bad", ["a\nb", "a\x00b", "tab\there", "\x1b[31mred", "a\u2028b", "bell\x07"])
def test_name_with_control_character_rejected(bad: str) -> None:
    err = only_error({"name": bad})
    assert err.field == "name"
    assert "non-printable" in err.message


def test_name_surrounding_space_trimmed() -> None:
    assert parse_scenario({"name": "  llama 7B  "}).name == "llama 7B"


@pytest.mark.parametrize("bad", [5, ["x"], True, b"bytes"])
def test_name_must_be_text(bad: object) -> None:
    assert only_error({"name": bad}).field == "name"


# --------------------------------------------------------------------------- errors


def test_one_error_per_bad_field_in_form_order() -> None:
    with pytest.raises(ScenarioError) as info:
        parse_scenario({"dp": 0, "param_bytes": 3, "params": "7.5", "name": "x" * 81, "prefetch": 9})
    errors = info.value.errors
    assert [e.field for e in errors] == ["params", "param_bytes", "dp", "prefetch", "name"]
    by_field = info.value.by_field()
    assert by_field["dp"].allowed == "1 … 131,072"
    assert by_field["param_bytes"].allowed == "one of 1, 2, 4"
    assert by_field["prefetch"].allowed == "0 … 8"
    assert by_field["params"].allowed == "1 … 10,000,000,000,000 (10T)"
    for e in errors:
        assert str(e) == f"{e.field}: {e.message} (allowed: {e.allowed})"
        assert str(e) in str(info.value)


@pytest.mark.parametrize("name", [f.name for f in NUMERIC])
@pytest.mark.parametrize("bad", [True, False, 2.5, 0.1, float("nan"), float("inf"), [8], {"v": 8}, b"8"])
def test_json_bools_fractions_and_structures_rejected(name: str, bad: object) -> None:
    err = only_error({name: bad})
    assert err.field == name
    assert err.message


def test_null_means_the_default() -> None:
    """A JSON null is "use the default", like an absent key, for every field (dependent defaults included)."""
    assert parse_scenario(dict.fromkeys(FIELD_BY_NAME)) == DEFAULT_SCENARIO
    with_model = parse_scenario({"model": "gpt2", "params": None, "unit_params": None, "seq_len": None})
    assert with_model == parse_scenario({"model": "gpt2"})
    assert with_model.seq_len == 1_024  # GPT-2's learned positions


def test_json_bool_is_not_a_number() -> None:
    """True == 1 in Python; a JSON true must still never become dp = 1."""
    assert "true/false" in only_error(json.loads('{"dp": true}')).message


@pytest.mark.parametrize("text", ['{"dp": 8.0}', '{"params": 7e9}', '{"prefetch": 0.0}'])
def test_a_json_float_never_enters_the_scenario(text: str) -> None:
    """A whole JSON number such as 8.0 is either refused or read as the exact int; never kept as a float."""
    raw = json.loads(text)
    ((name, value),) = raw.items()
    assert type(value) is float
    refused: list[str] = []
    try:
        s: Scenario | None = parse_scenario(raw)
    except ScenarioError as exc:
        s, refused = None, [e.field for e in exc.errors]
    if s is None:
        assert refused == [name]
    else:
        assert type(getattr(s, name)) is int
        assert getattr(s, name) == int(value)


def test_unknown_keys_rejected_when_strict() -> None:
    err = only_error({"dp": 8, "gpus": 64}, allow_unknown=False)
    assert err.field == "gpus"
    assert "not a scenario field" in err.message
    assert "params" in err.allowed


def test_unknown_keys_ignored_by_default() -> None:
    assert parse_scenario({"gpus": 64, "format": "csv"}) == DEFAULT_SCENARIO


def test_unknown_and_bad_fields_reported_together() -> None:
    with pytest.raises(ScenarioError) as info:
        parse_scenario({"zz": 1, "aa": 2, "dp": 0}, allow_unknown=False)
    assert [e.field for e in info.value.errors] == ["aa", "zz", "dp"]


@pytest.mark.parametrize(
    ("name", "text", "expected"),
    [
        ("params", "7B", 7_000_000_000),
        ("params", "6.74B", 6_740_000_000),
        ("unit_params", "400M", 400_000_000),
        ("capacity_bytes", "80GiB", 80 * 2**30),
        ("activation_bytes", "512MiB", 512 * 2**20),
        ("dp", "1_024", 1_024),
        ("contingency_pct", "10", 10),
    ],
)
def test_human_strings(name: str, text: str, expected: int) -> None:
    assert getattr(parse_scenario({name: text}), name) == expected


def test_byte_unit_in_plain_field_rejected() -> None:
    """dp is a plain integer: no suffixes at all."""
    assert only_error({"dp": "8k"}).field == "dp"


# --------------------------------------------------------------------------- canonical form


def test_non_default_items_canonical() -> None:
    s = parse_scenario({"dp": 16, "params": "13B", "name": "run a"})
    # params 13e9 > 400M, so U keeps its default 400M and is omitted; gather follows param_bytes
    assert s.non_default_items() == [("dp", 16), ("name", "run a"), ("params", 13_000_000_000)]


def test_non_default_items_dependent_defaults() -> None:
    """U = N below 400M is the default, gather = param width is the default: both omitted."""
    s = parse_scenario({"params": 1_000, "unit_params": 1_000, "param_bytes": 4, "gather_bytes": 4})
    assert s.non_default_items() == [("param_bytes", 4), ("params", 1_000)]
    t = parse_scenario({"param_bytes": 4, "gather_bytes": 2})
    assert t.non_default_items() == [("gather_bytes", 2), ("param_bytes", 4)]


def test_seed_has_no_non_default_items() -> None:
    assert DEFAULT_SCENARIO.non_default_items() == []


def test_non_default_items_round_trip() -> None:
    s = parse_scenario({"dp": 3, "prefetch": 2, "unit_params": 5, "params": 11, "overhead_bytes": "1GB"})
    assert parse_scenario(dict(s.non_default_items())) == s
