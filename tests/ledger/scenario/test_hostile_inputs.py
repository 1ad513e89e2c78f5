"""Anything a user can type or paste: accepted inputs give exact receipts, rejected ones name the field.

Nothing may raise anything but ``ScenarioError`` (or ``SizeError`` from the size parser itself).
"""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from app.ledger.estimate import estimate
from app.ledger.scenario import (
    FIELD_NAMES,
    MAX_UNKNOWN_REPORTED,
    ScenarioError,
    field_errors,
    parse_scenario,
    to_scenario,
)
from app.ledger.scenario.fields import FIELDS
from app.ledger.scenario.inputs import StrictScenarioIn
from app.ledger.scenario.sizes import SizeError, parse_bytes, parse_count, parse_plain
from app.receipts.csv_rows import csv_text
from app.receipts.receipt import receipt
from tests.support.json_data import as_json_data, walk

# Text near the parser's grammar (digits, suffixes, signs, exponents) and anything else at all.
grammar_text = st.text(alphabet="0123456789_,.eE+- kKmMbBgGtTiI\t", max_size=45)
any_text = st.text(max_size=60)
json_values: st.SearchStrategy[Any] = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**80), max_value=2**80),
    st.floats(allow_nan=True, allow_infinity=True),
    any_text,
    grammar_text,
    st.lists(st.integers(), max_size=3),
    st.dictionaries(st.text(max_size=5), st.integers(), max_size=2),
)
field_names = st.sampled_from([f.name for f in FIELDS])


@given(st.one_of(grammar_text, any_text))
def test_the_size_parsers_return_an_int_or_raise_size_error(text: str) -> None:
    for parse in (parse_count, parse_bytes, parse_plain):
        try:
            value = parse(text)
        except SizeError as exc:
            assert str(exc)
        else:
            assert type(value) is int


@given(st.dictionaries(st.one_of(field_names, st.text(max_size=8)), json_values, max_size=8), st.booleans())
def test_any_mapping_gives_an_exact_receipt_or_field_errors(raw: dict[str, Any], strict: bool) -> None:
    try:
        scenario = parse_scenario(raw, allow_unknown=not strict)
    except ScenarioError as exc:
        assert exc.errors
        for error in exc.errors:
            assert error.field in raw or error.field.startswith(tuple(str(k)[:40] for k in raw))
            assert error.message
            assert error.allowed
        return
    e = estimate(scenario)
    data = receipt(e)
    as_json_data(data)  # JSON types only: no float
    for value in walk(data):
        if type(value) is int:
            assert abs(value) < 2**53
    assert csv_text(e)


@given(st.dictionaries(field_names, st.one_of(grammar_text, any_text), max_size=16))
def test_typed_strings_in_every_field(raw: dict[str, str]) -> None:
    try:
        scenario = parse_scenario(raw)
    except ScenarioError as exc:
        assert {e.field for e in exc.errors} <= set(raw)
        return
    for name in FIELD_NAMES:
        assert type(getattr(scenario, name)) in (int, str)


@given(st.dictionaries(st.one_of(field_names, st.text(max_size=8)), json_values, max_size=16))
def test_the_model_validates_anything_or_names_each_field(raw: dict[str, Any]) -> None:
    """What the JSON API does: the strict model, then the scenario; every error maps to a key of the input."""
    try:
        scenario = to_scenario(StrictScenarioIn.model_validate(raw))
    except ValidationError as exc:
        errors = field_errors(exc)
        assert errors
        assert len({e.field for e in errors}) == len(errors)
        assert {e.field for e in errors} <= {str(k)[:40] for k in raw}
        assert sum(e.field not in FIELD_NAMES for e in errors) <= MAX_UNKNOWN_REPORTED + 1
        return
    assert scenario == parse_scenario(raw, allow_unknown=False)
