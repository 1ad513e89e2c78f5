"""The layout search's own inputs, bounded: the GPU count, the target global batch, the device, how many rows and
by what they are ranked. The scenario they search from is the lab's own (:class:`app.ledger.scenario.Scenario`).

One pydantic model reads them for the API (a query model FastAPI documents), the page and the CLI; a bad value is
a :class:`app.ledger.scenario.FieldError` naming the field and its allowed range, as a scenario field's is.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from app.ledger.arithmetic import shown_int
from app.ledger.scenario import FieldError, Scenario, ScenarioError
from app.ledger.scenario.presets import DEVICES

# Bounded input, bounded work: 65,536 GPUs is past the largest runs published (Llama 3's 16,384 H100s); the
# search's candidates grow with the divisors of the count, and are capped besides (search.MAX_PROBES).
GPUS = (1, 65_536)
GLOBAL_BATCH = (1, 1_048_576)  # sequences per optimizer step
ROWS = (1, 50)
DEFAULT_GPUS = 512
# Llama 2 and 3 pretrained with ~4M-token batches: 1,024 sequences of 4,096 tokens.
DEFAULT_GLOBAL_BATCH = 1_024
DEFAULT_ROWS = 20
RANKINGS: tuple[str, ...] = ("bytes", "time")
# The devices with link figures: the seed's decimal 80 GB is a scenario's capacity, not a device with links.
SEARCH_DEVICES: tuple[str, ...] = tuple(d.id for d in DEVICES if d.links is not None)
# The scenario inputs the search models itself for each layout: typed, they would describe one layout only.
MODELLED = ("params", "unit_params", "activation_bytes")

Rank = Literal["bytes", "time"]
DeviceId = Literal["a100-40gb", "a100-80gb", "h100-80gb", "h100-nvl", "h200", "b200", "l40s", "mi300x", "rtx4090"]
# spelled out for the type checker and the OpenAPI document; the catalogue decides
assert get_args(DeviceId) == SEARCH_DEVICES, "DeviceId must list the catalogue's devices with links"


class LayoutSearchIn(BaseModel):
    """What the layout search reads beside the scenario; every field optional with a default."""

    model_config = ConfigDict(extra="ignore")

    gpus: int = Field(DEFAULT_GPUS, ge=GPUS[0], le=GPUS[1], title="GPUs",
                      description="GPUs in the run: D × tp × pp of every layout listed.")  # fmt: skip
    global_batch: int = Field(
        DEFAULT_GLOBAL_BATCH, ge=GLOBAL_BATCH[0], le=GLOBAL_BATCH[1], title="Global batch",
        description="Sequences per optimizer step: micro_batch × grad_accum × D of every layout listed.",
    )  # fmt: skip
    device: DeviceId = Field(
        "h100-80gb", title="Device", description="The device from the catalogue: its capacity and link bandwidths."
    )
    rows: int = Field(DEFAULT_ROWS, ge=ROWS[0], le=ROWS[1], title="Rows", description="Layouts listed, at most.")
    rank: Rank = Field("bytes", title="Ranked by",
                       description="bytes: communication per rank per step; time: its lower-bound time.")  # fmt: skip


ALLOWED: dict[str, str] = {
    "gpus": f"{GPUS[0]:,} … {GPUS[1]:,}",
    "global_batch": f"{GLOBAL_BATCH[0]:,} … {GLOBAL_BATCH[1]:,} sequences",
    "device": "one of " + ", ".join(SEARCH_DEVICES),
    "rows": f"{ROWS[0]} … {ROWS[1]}",
    "rank": "one of " + ", ".join(RANKINGS),
}
FIELDS: tuple[str, ...] = tuple(LayoutSearchIn.model_fields)


def _message(field: str, detail: Mapping[str, object]) -> str:
    value = detail.get("input")
    if isinstance(value, str) and value.strip().isdigit():
        value = int(value)
    if field == "gpus" and detail.get("type") == "less_than_equal" and isinstance(value, int):
        return (f"{shown_int(value)} is more GPUs than the search's bound: its work grows with the layouts "
                "(the divisors of the count), so the count is capped")  # fmt: skip
    if detail.get("type") in ("greater_than_equal", "less_than_equal"):
        return f"{shown_int(value) if isinstance(value, int) else repr(value)[:40]} is out of range"
    if detail.get("type") == "literal_error":
        return f"{repr(value)[:40]} is not one of them"
    return str(detail.get("msg", "is not valid"))


def search_errors(exc: ValidationError) -> list[FieldError]:
    """pydantic's errors about the search's inputs, one :class:`FieldError` per field."""
    found: dict[str, FieldError] = {}
    for detail in exc.errors(include_url=False):
        field = str(detail["loc"][-1]) if detail.get("loc") else "layouts"
        found.setdefault(field, FieldError(field, _message(field, detail), ALLOWED.get(field, "")))
    return [found[f] for f in FIELDS if f in found]


def read_search(raw: Mapping[str, object]) -> LayoutSearchIn:
    """The search's inputs from a mapping of typed values (other keys ignored); :class:`ScenarioError` names each
    bad field."""
    try:
        return LayoutSearchIn.model_validate({k: v for k, v in raw.items() if k in FIELDS and v != ""})
    except ValidationError as exc:
        raise ScenarioError(search_errors(exc)) from None


def check_base(s: Scenario) -> None:
    """The scenario a search can start from: a model (its layers and heads decide which layouts it takes), and
    params, U and the activation peak left to the model, which the search recounts for each layout."""
    if not s.model:
        why = "the layout search needs a model (its layers, heads and size decide each layout's share)"
        raise ScenarioError([FieldError("model", why, "a known model id or a config (cfg:…)")])
    typed = [name for name in MODELLED if s.source_of(name) in ("declared", "measured")]
    if typed:
        raise ScenarioError(
            FieldError(name, "is typed: the layout search counts it from the model for each layout",
                       "empty (the model's own)")
            for name in typed
        )  # fmt: skip
