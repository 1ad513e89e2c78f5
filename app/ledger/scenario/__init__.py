"""The scenario: what a user typed, bounded and checked, and the canonical run it names.

- :mod:`app.ledger.scenario.sizes`: exact readers of ``7B``, ``80GiB``, ``7,000,000,000``.
- :mod:`app.ledger.scenario.inputs`: ``ScenarioIn``, the pydantic model where every bound, default,
  unit and help text lives, and the rules across fields.
- :mod:`app.ledger.scenario.fields`: the field table derived from it (CLI flags, the form, CSV rows).
- :mod:`app.ledger.scenario.scenario`: the frozen :class:`Scenario` with every default filled in,
  and :class:`FieldError` lines that name the field and its allowed range.
- :mod:`app.ledger.scenario.links`: the one canonical query string (the scenario's address).
- :mod:`app.ledger.scenario.presets`: workshop scenarios and device capacities.

This face hands on the names most callers want.
"""

from app.ledger.scenario.scenario import (
    DEFAULT_SCENARIO,
    FIELD_NAMES,
    MAX_UNKNOWN_REPORTED,
    MODEL_FILLED,
    FieldError,
    Scenario,
    ScenarioError,
    ScenarioIn,
    StrictScenarioIn,
    default_seq_len,
    field_errors,
    parse_scenario,
    to_scenario,
)

__all__ = [
    "DEFAULT_SCENARIO",
    "FIELD_NAMES",
    "MAX_UNKNOWN_REPORTED",
    "MODEL_FILLED",
    "FieldError",
    "Scenario",
    "ScenarioError",
    "ScenarioIn",
    "StrictScenarioIn",
    "default_seq_len",
    "field_errors",
    "parse_scenario",
    "to_scenario",
]
