"""The one key table (``app.interop.deepspeed.keys``) that the reader and the writer share."""

from __future__ import annotations

import pytest

from app.interop.deepspeed.keys import (
    DEEPSPEED_FIELDS,
    DTYPE_WIDTHS,
    DTYPE_WRITTEN,
    KEYS,
    OPTIMIZER_STATES,
    OPTIMIZER_WRITTEN,
    ZERO,
    lookup,
)
from app.interop.deepspeed.reader import import_deepspeed
from app.interop.deepspeed.report import DeepSpeedConfigError


def test_the_fields_a_config_carries() -> None:
    """The scenario inputs a ds_config.json sets; the model, D and the sequence length come from elsewhere."""
    assert {
        "stage", "param_bytes", "master_bytes", "grad_bytes", "reduce_bytes", "opt_states", "opt_bytes",
        "micro_batch", "bucket_bytes", "prefetch", "act_policy", "offload_optimizer", "offload_param", "hpz",
        "shard_group",
    } == DEEPSPEED_FIELDS  # fmt: skip


def test_what_the_writer_names_the_reader_reads_back() -> None:
    for states, name in OPTIMIZER_WRITTEN.items():
        if name != "SGD":
            assert OPTIMIZER_STATES[name.lower()] == states
        cfg = {"optimizer": {"type": name, "params": {"momentum": 0}}}
        assert import_deepspeed(cfg, {}).scenario.opt_states == states
    for width, dtype in DTYPE_WRITTEN.items():
        assert DTYPE_WIDTHS[dtype] == width


@pytest.mark.parametrize("name", sorted(ZERO))
def test_every_zero_key_in_the_table_is_read_and_no_other(name: str) -> None:
    """A key of the table is never refused as unknown (its value may still be); its other spelling neither."""
    key = ZERO[name]
    for spelling in filter(None, (name, key.alias)):
        assert lookup(ZERO, spelling) is key
        try:
            result = import_deepspeed({"zero_optimization": {"stage": 3, spelling: key.default}}, {})
        except DeepSpeedConfigError as exc:
            assert "refuses unknown keys" not in exc.message
            continue
        if key.kind == "no memory effect":
            (line,) = (line for line in result.lines if line.key == f"zero_optimization.{spelling}")
            assert line.status == "no memory effect"
    with pytest.raises(DeepSpeedConfigError, match="refuses unknown keys"):
        import_deepspeed({"zero_optimization": {name + "_": 1}}, {})


def test_each_key_is_listed_once_under_its_own_path() -> None:
    assert all(path == key.path for path, key in KEYS.items())
    aliases = [key.alias for key in KEYS.values() if key.alias]
    assert len(aliases) == len(set(aliases))
    assert not set(aliases) & {path.rpartition(".")[2] for path in KEYS}
