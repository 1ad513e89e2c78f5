"""The scenario's input model: the declared fields, then the rules across them.

:class:`ScenarioIn` is :class:`app.ledger.scenario.declared.ScenarioFields` (each field's bounds) with
the rules of :mod:`app.ledger.scenario.across` run as a model validator, after every field passed its
own; each broken rule is an error on the field it blames. The page, its links and the CLI read with
it; the JSON API with :class:`StrictScenarioIn`, which refuses unknown keys; FastAPI reads either as
a query or body model. :func:`app.ledger.scenario.to_scenario` turns a validated one into the core's
frozen ``Scenario`` with every default filled in.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Self

from pydantic import ConfigDict, ValidationError, ValidationInfo, model_validator
from pydantic_core import InitErrorDetails

from app.ledger.scenario.across import across_fields
from app.ledger.scenario.declared import ScenarioFields

# A validation context key (see ScenarioIn._across_fields): inputs that were given but invalid,
# so the rules across fields neither read them nor fall back to their defaults.
UNCHECKED = "unchecked"
# The retired zero_init flag's two values as the load_path they meant.
_ZERO_INIT = {"1": "partitioned", "0": "every-rank"}


class ScenarioIn(ScenarioFields):
    """A scenario as typed: every field optional, bounded, and documented; unknown keys ignored.

    The page, its links and the CLI read with this model; the JSON API with
    :class:`StrictScenarioIn`, which refuses unknown keys. Field order is the form's order.
    """

    @model_validator(mode="before")
    @classmethod
    def _renamed(cls, data: Any) -> Any:
        """Links and files from before load_path carry zero_init (1: built partitioned, 0: every rank builds the
        whole model): read as load_path, unless that is given too. Any other zero_init value is left as it came
        (ignored here, refused by the strict model): it was never a valid link."""
        if isinstance(data, Mapping) and "zero_init" in data and "load_path" not in data:
            legacy = _ZERO_INIT.get(str(data["zero_init"]).strip())
            if legacy is not None:
                return {**{k: v for k, v in data.items() if k != "zero_init"}, "load_path": legacy}
        return data

    @model_validator(mode="after")
    def _across_fields(self, info: ValidationInfo) -> Self:
        """U ≤ N and the model's own limits, each problem an error on the field it blames."""
        context = info.context if isinstance(info.context, Mapping) else {}
        problems = across_fields(self, frozenset(context.get(UNCHECKED, ()))).problems
        if problems:
            raise ValidationError.from_exception_data(
                type(self).__name__,
                [InitErrorDetails(type=p.error(), loc=(p.field,), input=getattr(self, p.field)) for p in problems],
            )
        return self


class StrictScenarioIn(ScenarioIn):
    """The same inputs, with unknown keys refused (the JSON API: a typo must not pass silently)."""

    model_config = ConfigDict(extra="forbid")
