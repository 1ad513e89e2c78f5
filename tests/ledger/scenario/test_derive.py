"""The scenario's other forms are derived from its declared fields, and held equal to them."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from pydantic import create_model

from app.ledger.scenario import DEFAULT_SCENARIO, Scenario, ScenarioIn, derive, to_scenario, values
from app.ledger.scenario.across import FOLLOWERS
from app.ledger.scenario.declared import ScenarioFields
from app.ledger.scenario.fields import FIELD_BY_NAME, STATIC_DEFAULTS
from app.ledger.scenario.out import scenario_out_fields


def test_the_typed_values_are_what_the_declared_fields_write() -> None:
    """values.py is generated: after changing a field in declared.py, run ``python -m app.ledger.scenario.derive``."""
    assert Path(values.__file__).read_text(encoding="utf-8") == derive.source()


def test_the_scenario_has_every_declared_field_typed_by_its_kind() -> None:
    typed = {f.name: f.type for f in dataclasses.fields(Scenario)}
    assert sorted(typed) == sorted(ScenarioFields.model_fields)
    for name, annotation in typed.items():
        assert annotation == ("str" if FIELD_BY_NAME[name].kind in ("text", "choice") else "int"), name


def test_a_default_that_follows_others_is_the_default_scenarios() -> None:
    for name in FOLLOWERS:
        assert name not in STATIC_DEFAULTS
        assert getattr(Scenario(), name) == getattr(to_scenario(ScenarioIn()), name), name
    assert Scenario(dp=16).shard_group == 16  # the shard group's default follows D


def test_the_receipt_order_starts_as_receipts_always_listed_it() -> None:
    assert tuple(DEFAULT_SCENARIO.as_dict())[: len(derive.RECEIPT_ORDER)] == derive.RECEIPT_ORDER
    assert sorted(derive.RECEIPT_ORDER) == sorted(ScenarioFields.model_fields)


def test_the_receipt_section_model_reads_a_scenario_and_refuses_a_missing_input() -> None:
    model = create_model("Out", **scenario_out_fields(count=int, size=int))
    assert sorted(model.model_fields) == sorted(DEFAULT_SCENARIO.as_dict())
    assert model.model_validate(DEFAULT_SCENARIO.as_dict()).model_dump() == DEFAULT_SCENARIO.as_dict()
    schema = model.model_json_schema()
    assert schema["properties"]["act_policy"]["enum"] == ["none", "selective", "op", "full"]
    assert sorted(schema["required"]) == sorted(ScenarioFields.model_fields)
