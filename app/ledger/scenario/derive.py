"""Writes :mod:`app.ledger.scenario.values`, the core's typed form of the scenario, from the declared fields.

The fields are declared once, in :class:`app.ledger.scenario.declared.ScenarioFields` (each ``int | None``
or ``str | None``: absent means "the default"). The core reads a scenario as ``s.dp``, an ``int``, at a
hundred places under ``mypy --strict``, and no Python type maps one class's fields to "the same fields,
never None": a class built at run time (``make_dataclass``) would be opaque to mypy. So the typed form is
source that this module writes: each field's name, its type (``str`` for text and choices, else
``int``) and its default (the declared ``x-default``, or for an input that follows others its value in
the default scenario). ``tests/ledger/scenario/test_derive.py`` fails while ``values.py`` differs from
what this writes; after changing a field, run::

    python -m app.ledger.scenario.derive
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from app.ledger.scenario.across import FOLLOWERS, FOLLOWS, following
from app.ledger.scenario.fields import FIELDS, STATIC_DEFAULTS, Field

# The order receipts have always listed the scenario's inputs in (the JSON's ``scenario`` section, the
# API's): the wire order, kept; a field declared later follows them, in form order.
RECEIPT_ORDER: tuple[str, ...] = (
    "model", "params", "dp", "param_bytes", "grad_bytes", "master_bytes", "opt_states", "opt_bytes",
    "unit_params", "gather_bytes", "prefetch", "stage", "shard_group", "hpz", "pp", "pp_stage", "ep",
    "bucket_bytes", "activation_bytes", "overhead_bytes", "contingency_pct", "capacity_bytes", "name",
    "seq_len", "micro_batch", "act_bytes", "act_policy", "tp", "sequence_parallel", "logits_bytes",
    "reduce_bytes", "reshard_after_forward", "norms", "offload_optimizer", "offload_param", "ranks_per_node",
    "host_bytes", "load_path", "stack", "loss", "wrap", "buffers", "reserve_bytes", "reserve_source", "ac_every",
    "optimizer_impl", "gqa", "loss_chunks", "routing_imbalance_pct", "grad_accum", "grad_sync",
    "reshard_after_backward", "save_path", "trainable_params", "frozen_bytes", "lora_rank", "lora_targets",
    "base_quant", "frozen_layers", "freeze_embed", "cp", "frozen_modules",
)  # fmt: skip

TARGET = Path(__file__).with_name("values.py")

_HEAD = '''"""The scenario's values, typed, each with its default: GENERATED from app/ledger/scenario/declared.py.

Do not edit: change the field there and run ``python -m app.ledger.scenario.derive`` (see that module;
tests/ledger/scenario/test_derive.py fails while this file is stale). Field order is the receipt's.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class ScenarioValues:
    """Every scenario input: the seed's example by default (``Scenario`` adds what it means)."""

'''


def default_of(name: str) -> int | str:
    """A field's default in the core: its declared one, or (U, the widths that follow the parameter and
    gradient widths) its value in the default scenario; the shard group's is 0, which ``Scenario`` reads
    as "D", so that ``Scenario(dp=16)`` is one group of 16."""
    if name in STATIC_DEFAULTS:
        return STATIC_DEFAULTS[name]
    if name not in FOLLOWERS:
        raise TypeError(f"{name}: no x-default, and its default follows no other input")
    return 0 if FOLLOWS.get(name) == "dp" else following(name, default_of)


def _line(field: Field) -> str:
    typed = "str" if field.kind in ("text", "choice") else "int"
    default = default_of(field.name)
    shown = json.dumps(default, ensure_ascii=False) if isinstance(default, str) or default < 10_000 else f"{default:_}"
    note = "; 0 means D" if FOLLOWS.get(field.name) == "dp" else ""
    return f"    {field.name}: {typed} = {shown}  # {field.label}{note}\n"


def ordered() -> list[Field]:
    """The fields in the receipt's order: :data:`RECEIPT_ORDER`, then any later ones in form order."""
    rank = {name: i for i, name in enumerate(RECEIPT_ORDER)}
    return sorted(FIELDS, key=lambda f: rank.get(f.name, len(rank)))


def source() -> str:
    """The text of ``values.py``, as the declared fields give it."""
    return _HEAD + "".join(_line(f) for f in ordered())


def main() -> int:
    text = source()
    if TARGET.exists() and TARGET.read_text(encoding="utf-8") == text:
        print(f"{TARGET} is up to date")
        return 0
    TARGET.write_text(text, encoding="utf-8")
    print(f"wrote {TARGET}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
