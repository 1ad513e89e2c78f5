"""The pydantic scenario model: the one source of bounds, read exactly, with field-level errors."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Annotated, Any

import pytest
from fastapi import FastAPI, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from fastapi.testclient import TestClient
from pydantic import BaseModel, ValidationError
from pydantic import Field as PydanticField
from pydantic_core import ErrorDetails

from app.ledger.scenario import (
    DEFAULT_SCENARIO,
    MAX_UNKNOWN_REPORTED,
    FieldError,
    Scenario,
    ScenarioError,
    field_errors,
    parse_scenario,
    to_scenario,
)
from app.ledger.scenario.fields import FIELDS, GROUPS, NAME_PATTERN, STATIC_DEFAULTS, Field, allowed_text, derive_field
from app.ledger.scenario.inputs import UNCHECKED, ScenarioIn, StrictScenarioIn
from app.ledger.scenario.readers import Plain, read_count

SCHEMA = ScenarioIn.model_json_schema()


def prop(name: str) -> dict[str, Any]:
    """A field's schema without the ``null`` branch (every field is optional)."""
    schema: dict[str, Any] = SCHEMA["properties"][name]
    (value,) = [s for s in schema["anyOf"] if s.get("type") != "null"]
    return {**schema, **value}


def errors_of(raw: Mapping[str, object], model: type[ScenarioIn] = ScenarioIn) -> list[ErrorDetails]:
    with pytest.raises(ValidationError) as info:
        model.model_validate(raw)
    return info.value.errors(include_url=False)


# --------------------------------------------------------------------------- the schema carries the bounds


def test_the_schema_states_the_spec_bounds() -> None:
    assert (prop("dp")["minimum"], prop("dp")["maximum"]) == (1, 131_072)
    assert (prop("params")["minimum"], prop("params")["maximum"]) == (1, 10**13)
    assert (prop("unit_params")["minimum"], prop("unit_params")["maximum"]) == (0, 10**13)
    assert prop("bucket_bytes")["maximum"] == 2**40
    assert prop("capacity_bytes")["maximum"] == 2**46
    assert prop("contingency_pct")["maximum"] == 100
    assert prop("prefetch")["maximum"] == 8
    assert prop("param_bytes")["enum"] == [1, 2, 4]
    assert prop("grad_bytes")["enum"] == [2, 4]
    assert prop("master_bytes")["enum"] == [0, 4, 8]
    assert prop("opt_bytes")["enum"] == [1, 2, 4, 8]
    assert prop("act_policy")["enum"] == ["none", "selective", "op", "full"]
    assert prop("name")["maxLength"] == 80
    assert prop("name")["pattern"] == NAME_PATTERN
    assert StrictScenarioIn.model_json_schema()["additionalProperties"] is False


def test_every_field_is_optional_with_form_metadata_and_an_example() -> None:
    assert SCHEMA.get("required", []) == []
    groups = dict(GROUPS)
    for name, schema in SCHEMA["properties"].items():
        assert schema["default"] is None, name
        assert schema["title"] and schema["description"], name
        assert schema["x-group"] in groups, name
        assert schema["x-kind"] in ("count", "bytes", "int", "text", "choice"), name
        assert isinstance(schema["x-unit"], str), name
        assert schema["examples"], name


# LoRA's inputs are read against a model's modules (and its targets need a rank): given with one
LORA_CONTEXT = {"model": "llama-2-7b", "lora_rank": 8}
FROZEN_CONTEXT = {"model": "llama-2-7b"}  # frozen modules are the model's


def test_every_example_is_a_valid_input() -> None:
    for name, schema in SCHEMA["properties"].items():
        lora = name.startswith("lora_") or name == "base_quant"  # QLoRA's base is a LoRA run's
        context = LORA_CONTEXT if lora else FROZEN_CONTEXT if name.startswith("fr") else {}
        for example in schema["examples"]:
            assert getattr(parse_scenario({**context, name: example}), name) == example, name


def test_the_examples_together_are_a_valid_scenario() -> None:
    """A client (or schemathesis) may send every field's first example at once."""
    raw = {name: schema["examples"][0] for name, schema in SCHEMA["properties"].items()}
    assert parse_scenario(raw, allow_unknown=False).as_dict() == raw


# --------------------------------------------------------------------------- the field table derives from it


def test_the_field_table_is_the_model_in_order() -> None:
    assert [f.name for f in FIELDS] == list(ScenarioIn.model_fields)


@pytest.mark.parametrize("field", FIELDS, ids=lambda f: f.name)
def test_every_field_entry_matches_the_schema(field: Field) -> None:
    schema = prop(field.name)
    assert field.label == schema["title"]
    assert field.help == schema["description"]
    assert field.unit == schema["x-unit"]
    assert field.group == schema["x-group"]
    assert field.kind == schema["x-kind"]
    if field.kind == "choice":
        assert field.options == tuple(schema["enum"])
    elif field.kind == "text":
        assert field.maximum == schema["maxLength"]
    elif field.choices is not None:
        assert field.choices == tuple(schema["enum"])
        assert (field.minimum, field.maximum) == (min(field.choices), max(field.choices))
    else:
        assert (field.minimum, field.maximum) == (schema["minimum"], schema["maximum"])
    if "x-default" in schema:
        assert STATIC_DEFAULTS[field.name] == schema["x-default"]
    else:
        assert field.name in (
            "unit_params",
            "gather_bytes",
            "reduce_bytes",
            "shard_group",
            "loss",
            "wrap",
            "buffers",
            "act_policy",
            "norms",
            "optimizer_impl",
            "gqa",
            "grad_sync",
            "save_path",
            "load_path",
            "trainable_params",
            "frozen_bytes",
            "lora_targets",
            "param_bytes",
            "grad_bytes",
            "master_bytes",
            "opt_bytes",
        )  # defaults follow other inputs (the stack's choices: loss, units, buffers, kernels, precision layout)


def test_the_static_defaults_are_the_core_scenarios_defaults() -> None:
    """The model's x-default values and the core dataclass's defaults describe the same seed."""
    assert to_scenario(ScenarioIn()) == Scenario() == DEFAULT_SCENARIO
    for name, value in STATIC_DEFAULTS.items():
        assert getattr(Scenario(), name) == value


def test_a_field_that_contradicts_its_reader_is_refused() -> None:
    """x-kind says how the form and CLI read a string; it must be the reader pydantic runs."""

    class Drifted(BaseModel):
        dp: Plain = PydanticField(
            default=None, ge=1, le=8, title="D", description="d", json_schema_extra={"x-kind": "count"}
        )

    with pytest.raises(TypeError, match="x-kind"):
        derive_field("dp", Drifted.model_fields["dp"])


def test_a_field_without_bounds_is_refused() -> None:
    class Unbounded(BaseModel):
        dp: Plain = PydanticField(None, title="D", description="d", json_schema_extra={"x-group": "run", "x-unit": ""})

    with pytest.raises(TypeError, match="ge"):
        derive_field("dp", Unbounded.model_fields["dp"])


# --------------------------------------------------------------------------- exact reading


@pytest.mark.parametrize(
    ("name", "raw", "expected"),
    [
        ("params", "7B", 7_000_000_000),
        ("params", "6.74B", 6_740_000_000),
        ("params", "7,000,000,000", 7_000_000_000),
        ("params", "7_000_000_000", 7_000_000_000),
        ("params", "9.999999999999T", 9_999_999_999_999),
        ("params", 7e9, 7_000_000_000),
        ("params", 9_999_999_999_999.0, 9_999_999_999_999),
        ("capacity_bytes", "80GiB", 80 * 2**30),
        ("capacity_bytes", "80GB", 80 * 10**9),
        ("dp", 8.0, 8),
        ("dp", " 16 ", 16),
        ("param_bytes", "4", 4),
        ("param_bytes", 4.0, 4),
        ("act_policy", " full ", "full"),
        ("name", "  run a  ", "run a"),
    ],
)
def test_strings_and_whole_numbers_are_read_exactly(name: str, raw: object, expected: object) -> None:
    value = getattr(ScenarioIn.model_validate({name: raw}), name)
    assert value == expected
    assert type(value) is type(expected)


@pytest.mark.parametrize(
    ("name", "raw", "fragment"),
    [
        ("dp", True, "true/false"),
        ("dp", 2.5, "not a whole number"),
        ("dp", float("nan"), "not a whole number"),
        ("params", "7.5", "not a whole number"),
        ("params", "80GB", "counts elements"),
        ("activation_bytes", "20B", "ambiguous"),
        ("dp", "8k", "whole number"),
        ("dp", [8], "not list"),
        ("name", 5, "must be text"),
    ],
)
def test_what_is_not_exact_is_refused_in_the_parsers_words(name: str, raw: object, fragment: str) -> None:
    (error,) = errors_of({name: raw})
    assert error["loc"] == (name,)
    assert fragment in error["msg"]
    assert not error["msg"].startswith("Value error")


def test_the_reader_alone() -> None:
    assert read_count("7B") == 7 * 10**9
    assert read_count(None) is None
    assert read_count(12) == 12


def test_json_mode_reads_the_same() -> None:
    inp = StrictScenarioIn.model_validate_json('{"dp": 8.0, "params": "13B", "capacity_bytes": 7e10, "tp": null}')
    assert (inp.dp, inp.params, inp.capacity_bytes, inp.tp) == (8, 13 * 10**9, 7 * 10**10, None)
    assert type(inp.dp) is int


def test_a_bound_error_carries_the_value_read() -> None:
    (error,) = errors_of({"dp": "131,073"})
    assert (error["type"], error["input"], error["loc"]) == ("less_than_equal", 131_073, ("dp",))
    assert field_errors(ValidationError.from_exception_data("x", [])) == []
    (mapped,) = field_errors(errors_of({"dp": "131,073"}))
    assert mapped == FieldError("dp", "131,073 is out of range", "1 … 131,072")


# --------------------------------------------------------------------------- unknown keys


def test_unknown_keys_ignored_or_forbidden() -> None:
    assert ScenarioIn.model_validate({"gpus": 64, "dp": 4}).dp == 4
    errors = errors_of({"gpus": 64, "dp": 4}, StrictScenarioIn)
    assert [(e["type"], e["loc"]) for e in errors] == [("extra_forbidden", ("gpus",))]


def test_unknown_keys_are_named_up_to_the_cap_then_counted() -> None:
    raw = {f"k{i:02}": i for i in range(25)} | {"dp": 0}
    errors = field_errors(errors_of(raw, StrictScenarioIn))
    assert [e.field for e in errors] == [f"k{i:02}" for i in range(MAX_UNKNOWN_REPORTED + 1)] + ["dp"]
    assert errors[MAX_UNKNOWN_REPORTED].message == "and 15 more unknown fields"
    assert all(e.message == "is not a scenario field" for e in errors[:MAX_UNKNOWN_REPORTED])
    assert "params" in errors[0].allowed


# --------------------------------------------------------------------------- across fields


@pytest.mark.parametrize(
    ("raw", "field", "fragment"),
    [
        ({"params": 1_000, "unit_params": 1_001}, "unit_params", "larger than params (1,000)"),
        ({"unit_params": "8B"}, "unit_params", "larger than params (7,000,000,000)"),
        ({"model": "llama-2-7b", "tp": 3}, "tp", "32 attention heads"),
        ({"model": "gpt2", "seq_len": 2048}, "seq_len", "1,024 learned positions"),
        ({"model": "llama-9"}, "model", "neither a known model"),
        ({"model": "llama-2-70b", "seq_len": "1M", "micro_batch": 4096}, "micro_batch", "modelled activation peak"),
        ({"model": "qwen2-0.5b", "unit_params": "1B"}, "unit_params", "larger than params (494,032,768)"),
    ],
)
def test_rules_across_fields_name_the_field(raw: dict[str, object], field: str, fragment: str) -> None:
    (error,) = errors_of(raw)
    assert error["loc"] == (field,)
    assert fragment in error["msg"]
    (mapped,) = field_errors(errors_of(raw))
    assert mapped.field == field
    assert fragment in mapped.message
    assert mapped.allowed


def test_the_rule_states_its_own_allowed_range() -> None:
    (mapped,) = field_errors(errors_of({"params": 1_000, "unit_params": 1_001}))
    assert mapped.allowed == "0 … params (1,000)"
    (tp,) = field_errors(errors_of({"model": "llama-2-7b", "tp": 3}))
    assert tp.allowed == allowed_text(next(f for f in FIELDS if f.name == "tp"))


def test_a_rule_reading_an_unchecked_input_is_skipped() -> None:
    """parse_scenario runs the rules again on the valid fields; one that reads a bad input says nothing."""
    ScenarioIn.model_validate({"unit_params": "8B"}, context={UNCHECKED: frozenset({"params"})})
    ScenarioIn.model_validate({"model": "llama-2-7b"}, context={UNCHECKED: frozenset({"tp"})})
    with pytest.raises(ValidationError):
        ScenarioIn.model_validate({"unit_params": "8B"}, context={UNCHECKED: frozenset({"dp"})})


def test_field_and_cross_field_errors_come_in_one_answer() -> None:
    with pytest.raises(ScenarioError) as info:
        parse_scenario({"dp": 0, "unit_params": "8B", "model": "llama-2-7b", "tp": 3, "act_bytes": 3})
    # act_bytes is a model input: while it is bad, the model's own rules (tp) wait; U is checked
    # against the params the model would give, which is unknown: also skipped
    assert [e.field for e in info.value.errors] == ["dp", "act_bytes"]
    with pytest.raises(ScenarioError) as again:
        parse_scenario({"dp": 0, "unit_params": "8B", "model": "llama-2-7b", "tp": 3})
    assert [e.field for e in again.value.errors] == ["dp", "tp"]  # no params from a model that failed
    with pytest.raises(ScenarioError) as third:
        parse_scenario({"dp": 0, "unit_params": "8B", "model": "llama-2-7b", "tp": 2})
    # with tp = 2 the model gives one tensor-parallel rank's parameters: the split matmuls and embeddings halved
    assert [str(e) for e in third.value.errors] == [
        "unit_params: 8,000,000,000 is larger than params (3,369,340,928) (allowed: 0 … params (3,369,340,928))",
        "dp: 0 is out of range (allowed: 1 … 131,072)",
    ]


def test_to_scenario_refuses_an_unvalidated_input() -> None:
    with pytest.raises(ScenarioError) as info:
        to_scenario(ScenarioIn.model_construct(params=10, unit_params=11))
    assert [e.field for e in info.value.errors] == ["unit_params"]


def test_to_scenario_fills_the_defaults() -> None:
    s = to_scenario(ScenarioIn(param_bytes=4, params=1_000))
    assert (s.gather_bytes, s.unit_params, s.dp) == (4, 1_000, 8)
    m = to_scenario(ScenarioIn(model="gpt2"))
    assert (m.params, m.seq_len, m.model) == (124_439_808, 1_024, "gpt2")
    assert m.source_of("activation_bytes") == "modelled"


# --------------------------------------------------------------------------- as FastAPI reads it


def _app() -> FastAPI:
    app = FastAPI()

    @app.exception_handler(RequestValidationError)
    async def unprocessable(_: Request, exc: RequestValidationError) -> JSONResponse:
        errors = field_errors(exc.errors())
        return JSONResponse({"detail": [{"field": e.field, "msg": str(e)} for e in errors]}, status_code=422)

    @app.get("/estimate")
    def from_query(inp: Annotated[StrictScenarioIn, Query()]) -> dict[str, Any]:
        return to_scenario(inp).as_dict()

    @app.post("/estimate")
    def from_body(inp: StrictScenarioIn) -> dict[str, Any]:
        return to_scenario(inp).as_dict()

    return app


def test_a_query_model_and_a_body_model_for_fastapi() -> None:
    client = TestClient(_app())
    assert client.get("/estimate", params={"dp": "16", "params": "13B"}).json()["params"] == 13 * 10**9
    assert client.post("/estimate", json={"dp": 16, "capacity_bytes": "80GiB"}).json()["capacity_bytes"] == 80 * 2**30
    assert client.get("/estimate").json() == DEFAULT_SCENARIO.as_dict()
    bad = client.get("/estimate", params={"dp": "0", "gpus": "8", "unit_params": "1"})
    assert bad.status_code == 422
    assert [d["field"] for d in bad.json()["detail"]] == ["gpus", "dp"]
    assert "dp: 0 is out of range (allowed: 1 … 131,072)" in json.dumps(bad.json(), ensure_ascii=False)
    across = client.post("/estimate", json={"params": 10, "unit_params": 11})
    assert across.json()["detail"] == [
        {"field": "unit_params", "msg": "unit_params: 11 is larger than params (10) (allowed: 0 … params (10))"}
    ]


def test_the_query_parameters_document_their_bounds() -> None:
    parameters = _app().openapi()["paths"]["/estimate"]["get"]["parameters"]
    dp = next(p for p in parameters if p["name"] == "dp")
    (bounded,) = [s for s in dp["schema"]["anyOf"] if s.get("type") == "integer"]
    assert (bounded["minimum"], bounded["maximum"]) == (1, 131_072)
    assert [p["name"] for p in parameters] == [f.name for f in FIELDS]
