"""zero_optimization's keys that need no model or width: the stage, offload, and what is not modelled.

DeepSpeed's config model refuses an unknown key inside ``zero_optimization``, so the lab does too (the
table in :mod:`~app.interop.deepspeed.keys` is the list). The sizes (buckets, prefetch, persistence) are
:mod:`~app.interop.deepspeed.resolve`'s, hpZ and MiCS :mod:`~app.interop.deepspeed.partitions`'.
"""

from __future__ import annotations

from collections.abc import Mapping

from app.interop.deepspeed.keys import DEEPSPEED, OFFLOAD, ZERO, Key, lookup
from app.interop.deepspeed.report import DeepSpeedConfigError, Report, Status, shown
from app.interop.deepspeed.values import elements, flag, section, zero_section, zero_value

__all__ = ["read_save_flags", "read_zero"]

_Z = "zero_optimization."
_OFFLOADED = {
    "offload_optimizer": "the FP32 master, the optimizer states and the FP32 gradient partition",
    "offload_param": "stage 3's parameter partitions",
}


def read_zero(r: Report, config: Mapping[str, object]) -> int:
    """zero_optimization's keys that need no model or width; returns the stage."""
    raw = config.get("zero_optimization")
    if isinstance(raw, bool):  # DeepSpeed's deprecated form: true is stage 1
        zero: Mapping[str, object] = {"stage": 1 if raw else 0}
    else:
        zero = section(config, "zero_optimization", "zero_optimization")
    for key in zero:
        known = lookup(ZERO, key)
        if known is None:
            where = " (it is a top-level section)" if key == "aio" else ""
            raise DeepSpeedConfigError(
                _Z + key, f"not a key of zero_optimization in {DEEPSPEED}{where}; DeepSpeed refuses unknown keys there"
            )
        if known.kind == "no memory effect":
            r.line(_Z + key, zero[key], known.effect, "no memory effect")
    stage_raw = zero.get("stage", ZERO["stage"].default)
    stages = (0, 1, 2, 3)
    if isinstance(stage_raw, bool) or stage_raw not in stages:
        raise DeepSpeedConfigError(_Z + "stage", f"must be 0, 1, 2 or 3, not {shown(stage_raw)}")
    stage = stages.index(stage_raw)
    r.set(_Z + "stage", zero.get("stage"), "stage", stage, "the stage the run uses (the comparison shows all four)")
    _offload(r, zero, stage)
    for name in ("zero_quantized_weights", "zero_quantized_nontrainable_weights", "zero_quantized_gradients"):
        if flag(_Z + name, zero.get(name), False):
            r.line(_Z + name, True, ZERO[name].on, "not modelled")
    loco = ZERO["zeropp_loco_param"]
    if zero.get("zeropp_loco_param") is not None:
        r.line(loco.path, zero["zeropp_loco_param"], loco.effect, "not modelled")
    return stage


def _offload(r: Report, zero: Mapping[str, object], stage: int) -> None:
    """offload_optimizer and offload_param: the scenario's offload inputs (the host ledger counts them)."""
    for key, what in _OFFLOADED.items():
        found = zero.get(key)
        path = _Z + key
        if found is None:
            continue
        if not isinstance(found, Mapping):
            raise DeepSpeedConfigError(path, f"must be an object, not {shown(found)}")
        device = found.get("device", OFFLOAD[key]["device"].default)
        if device not in ("none", "cpu", "nvme"):
            raise DeepSpeedConfigError(f"{path}.device", f'must be "none", "cpu" or "nvme", not {shown(device)}')
        where = "stays on the device" if device == "none" else f"moves {what} to {device} (the host ledger)"
        if key == "offload_param" and stage != 3 and device != "none":
            where = f"read only at stage 3 (this is stage {stage}); kept for the comparison's stage 3"
        r.set(f"{path}.device", device, key, str(device), where)
        for sub in found:
            if sub != "device":
                _offload_subkey(r, key, sub, found[sub], stage)
    for key, new in (("cpu_offload", "offload_optimizer"), ("cpu_offload_param", "offload_param")):
        if flag(_Z + key, zero.get(key), False):
            r.set(_Z + key, True, new, "cpu", f"deprecated spelling of {new}.device = cpu")


def _offload_subkey(r: Report, key: str, sub: str, value: object, stage: int) -> None:
    """One key inside an offload section: the host ledger counts with DeepSpeed's defaults, so another value
    (or a partial offload) is not modelled, and says so."""
    known: Key | None = OFFLOAD[key].get(sub)
    path = f"{_Z}{key}.{sub}"
    if known is None:
        raise DeepSpeedConfigError(path, f"not a key of {key} in {DEEPSPEED}")
    note = known.effect
    status: Status = "not modelled" if known.kind == "not modelled" else "no memory effect"
    if sub == "ratio":
        ratio = value if isinstance(value, int | float) and not isinstance(value, bool) else None
        if ratio is None or not 0 <= ratio <= 1:
            raise DeepSpeedConfigError(path, f"must be a number from 0 to 1, not {shown(value)}")
        if ratio < 1 and stage != 3:
            raise DeepSpeedConfigError(path, "a partial offload is stage 3's (DeepSpeed refuses it)")
        if ratio == 1:  # the whole optimizer: what the host ledger counts
            note, status = "the whole optimizer is offloaded, as the host ledger counts it", "checked"
    elif isinstance(known.default, int):
        given = elements(path, value, known.default)
        if given == known.default:
            note, status = f"DeepSpeed's default ({known.default:,}), as the host ledger counts it", "checked"
        else:
            note = (
                f"{given:,}, not DeepSpeed's default {known.default:,}: not modelled (the host ledger's swap "
                "buffers take the default)"
            )
            status = "not modelled"
    r.line(path, value, note, status)


def read_save_flags(r: Report, config: Mapping[str, object]) -> None:
    """Whether a save gathers 16-bit weights: which of the checkpoint section's rows applies."""
    zero = zero_section(config)
    for name in ("stage3_gather_16bit_weights_on_model_save", "stage3_gather_fp16_weights_on_model_save"):
        value = zero_value(zero, name)
        if value is not None:
            on = flag(_Z + name, value, False)
            r.line(
                _Z + name,
                value,
                "consolidated 16-bit weights on save: the checkpoint section's full_params row"
                if on
                else "a sharded save: the checkpoint section's sharded row",
                "checked",
            )
