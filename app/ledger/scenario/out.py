"""The scenario as a receipt writes it, for the receipt's schema: derived from the declared fields.

A receipt's ``scenario`` section is :meth:`app.ledger.scenario.Scenario.as_dict`: every input, canonical
(sizes as integers, defaults filled in). :func:`scenario_out_fields` describes it as pydantic field
definitions (for ``pydantic.create_model``), so that the receipt's schema (:mod:`app.receipts.schema`)
lists no field by hand.
"""

from __future__ import annotations

from dataclasses import fields
from typing import Any, Literal, get_args, get_origin

from app.ledger.scenario.declared import ScenarioFields
from app.ledger.scenario.fields import FIELD_BY_NAME
from app.ledger.scenario.values import ScenarioValues

# The schema has always listed these last (they joined it after the rest): an answer serialized through
# it (compare.json) lists its inputs in the schema's order, so that order is kept.
LISTED_LAST: tuple[str, ...] = ("shard_group", "hpz", "pp", "pp_stage", "ep")


def _type(name: str, count: object, size: object) -> object:
    field = FIELD_BY_NAME[name]
    if field.options is not None:  # the declared Literal of the options, without its None
        return next(t for t in get_args(ScenarioFields.model_fields[name].annotation) if get_origin(t) is Literal)
    if field.kind == "text":
        return str
    return size if field.kind == "bytes" else count


def scenario_out_fields(*, count: object, size: object) -> dict[str, Any]:
    """Every input as a required field: ``str`` for text, a ``Literal`` of the options for a choice,
    ``size`` for a byte size and ``count`` for any other integer (the receipt schema's own annotated
    types); in the receipt's order, but :data:`LISTED_LAST` last."""
    names = [f.name for f in fields(ScenarioValues) if f.name not in LISTED_LAST] + list(LISTED_LAST)
    return {name: (_type(name, count, size), ...) for name in names}
