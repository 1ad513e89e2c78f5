"""The scenario: what a user typed, bounded and checked, and the canonical run it names.

- :mod:`app.ledger.scenario.sizes`: exact readers of ``7B``, ``80GiB``, ``7,000,000,000``.
- :mod:`app.ledger.scenario.readers`: how each kind of field reads a raw value (exact integers, sizes,
  text, choices).
- :mod:`app.ledger.scenario.declared`: ``ScenarioFields``, the fields declared once: every bound,
  default, unit and help text (the stack's choices, whose help cites each project's code, in
  :mod:`app.ledger.scenario.choices`).
- :mod:`app.ledger.scenario.stacks`: the training stacks' presets, each with its evidence.
- :mod:`app.ledger.scenario.across`: the rules across fields (a model's fill, U ≤ N, the sharding layout).
- :mod:`app.ledger.scenario.inputs`: ``ScenarioIn``, the declared fields with the rules across them,
  as FastAPI, the page and the CLI read it.
- :mod:`app.ledger.scenario.fields`: the field table derived from it (CLI flags, the form, CSV rows).
- :mod:`app.ledger.scenario.values`: the core's typed values and defaults, generated from the declared
  fields by :mod:`app.ledger.scenario.derive`.
- :mod:`app.ledger.scenario.scenario`: the frozen :class:`Scenario` with every default filled in,
  and :class:`FieldError` lines that name the field and its allowed range.
- :mod:`app.ledger.scenario.out`: the receipt's scenario section, for its schema.
- :mod:`app.ledger.scenario.links`: the one canonical query string (the scenario's address).
- :mod:`app.ledger.scenario.presets`: workshop scenarios and device capacities.

This face hands on the names most callers want.
"""

from app.ledger.scenario.across import default_seq_len
from app.ledger.scenario.inputs import ScenarioIn, StrictScenarioIn
from app.ledger.scenario.scenario import (
    DEFAULT_SCENARIO,
    FIELD_NAMES,
    MAX_UNKNOWN_REPORTED,
    MODEL_FILLED,
    FieldError,
    Scenario,
    ScenarioError,
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
