"""QLoRA's 4-bit base: what bitsandbytes 0.50.2 stores for each quantized weight, in whole bytes.

``BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_quant_type="nf4", bnb_4bit_quant_storage=torch.bfloat16)``
(transformers 5.23.0) replaces every ``nn.Linear`` of the decoder layers with ``bnb.nn.Linear4bit``; the LM head
(``get_keys_to_not_convert``), the embedding and the norms stay in the checkpoint's 16 bits. A weight of n values is
quantized in blocks of 64 (``Params4bit.blocksize``, which transformers does not expose):

- the packed codes, two 4-bit values per byte, stored as ``quant_storage`` elements so FSDP2 can shard them:
  ⌈n ÷ 4⌉ BF16 elements of 2 B (``quantize_4bit``: ``((n + 1) // (itemsize × 2), 1)``). This is the parameter
  FSDP2 shards and all-gathers; the lab counts it in BF16 elements, the frozen width.
- its ``quant_state``, a module attribute FSDP2 does not shard (every rank keeps it whole): the NF4 code table (16
  FP32 values, one per weight) and one absmax per block, FP32 (4 B); with double quantisation
  (``bnb_4bit_use_double_quant``) the absmaxes are themselves quantized to one byte each in blocks of 256, which adds
  their FP32 mean (``offset``), one FP32 absmax per 256 blocks and a 256-entry FP32 code table, per weight.

Read off bitsandbytes' own tensors (``tests/trace/test_qlora_traced.py``: a quantized transformers model's storages,
to the byte). In forward and backward ``MatMul4Bit`` dequantizes the whole weight to the compute dtype for its
matmul and frees it after: one weight's n × 2 B at a time; it keeps no input for the frozen weight.
"""

from __future__ import annotations

from dataclasses import dataclass

from app.ledger.arithmetic import ceil_div, n
from app.ledger.models.inventory import Inventory

BLOCK = 64  # Params4bit.blocksize (transformers' BitsAndBytesConfig has no key for it)
NESTED_BLOCK = 256  # quantize_blockwise of the absmaxes under double quantisation
NF4_CODE = 16 * 4  # the NF4 code table, FP32, one per weight
DYNAMIC_CODE = 256 * 4  # the absmaxes' code table under double quantisation, FP32, one per weight
STORAGE = 2  # bnb_4bit_quant_storage = bfloat16: FSDP2 shards floating-point parameters only
QUANT_KINDS = ("none", "nf4", "nf4-dq")


@dataclass(frozen=True, slots=True)
class Quant:
    """The quantized weights of a model: how many values (``values``), the BF16 elements they are stored in
    (``storage``), the quant states every rank holds whole (``state_bytes``), the largest weight's values (the
    widest dequantized temporary) and the shape of the sum."""

    kind: str
    values: int
    storage: int
    state_bytes: int
    largest: int
    formula: str

    @property
    def nested(self) -> bool:
        return self.kind == "nf4-dq"


def packed_elements(values: int) -> int:
    """The BF16 storage elements of a weight of ``values`` 4-bit values (two per byte, two bytes per element)."""
    return ceil_div(values, 2 * STORAGE)


def state_bytes(values: int, nested: bool) -> int:
    """One quantized weight's quant_state in bytes: its absmaxes and code table (and with double quantisation the
    absmaxes' own absmaxes, mean and code table)."""
    blocks = ceil_div(values, BLOCK)
    if not nested:
        return blocks * 4 + NF4_CODE
    return blocks + NF4_CODE + 4 + ceil_div(blocks, NESTED_BLOCK) * 4 + DYNAMIC_CODE


def quantized(inv: Inventory, layers: int, kind: str) -> Quant | None:
    """The decoder layers' linear weights of ``inv`` quantized as ``kind`` (None: ``none``)."""
    if kind == "none":
        return None
    weights = [t.numel for t in inv.units[1].tensors if len(t.shape) == 2]
    nested = kind == "nf4-dq"
    per_layer = sum(weights)
    storage = sum(packed_elements(v) for v in weights)
    states = sum(state_bytes(v, nested) for v in weights)
    formula = (
        f"{layers} layers × {len(weights)} weights: {n(layers * per_layer)} values in {n(layers * storage)} BF16 "
        f"elements (⌈n ÷ 4⌉ each), quant states {n(layers * states)} B ("
        + ("⌈n ÷ 64⌉ × 1 B + 64 + 4 + ⌈n ÷ 16,384⌉ × 4 + 1,024 B" if nested else "⌈n ÷ 64⌉ × 4 B + 64 B")
        + " each, on every rank)"
    )
    return Quant(kind, layers * per_layer, layers * storage, layers * states, max(weights), formula)
