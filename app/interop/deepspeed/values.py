"""One value of a config read by its type and bounds, or refused naming its key.

DeepSpeed's sizes count elements and JSON may spell them as floats (``5e8``); a section must be an
object; a flag must be true or false. Each reader here raises :class:`DeepSpeedConfigError` with the
key's dotted path, so the message says which key to fix.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from app.interop.deepspeed.keys import ELEMENTS_MAX, ZERO
from app.interop.deepspeed.report import DeepSpeedConfigError, shown
from app.ledger.arithmetic import n

__all__ = ["elements", "flag", "ranks", "section", "zero_section", "zero_value"]


def flag(key: str, value: object, default: bool) -> bool:
    if value is None:
        return default
    if not isinstance(value, bool):
        raise DeepSpeedConfigError(key, f"must be true or false, not {shown(value)}")
    return value


def elements(key: str, value: object, default: int | None = None, *, low: int = 0) -> int | None:
    """A count of elements: an integer, or a float with no fraction (JSON's 5e8); None when absent
    (or "auto", which the caller resolves)."""
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise DeepSpeedConfigError(key, f'must be a whole number of elements or "auto", not {shown(value)}')
    if isinstance(value, float) and not (math.isfinite(value) and value.is_integer()):
        raise DeepSpeedConfigError(key, f"must be a whole number, not {shown(value)}")
    number = int(value)
    if not low <= number <= ELEMENTS_MAX:
        raise DeepSpeedConfigError(key, f"must be between {n(low)} and {n(ELEMENTS_MAX)}, not {shown(value)}")
    return number


def ranks(key: str, value: object, default: int, low: int) -> int:
    """A count of ranks (DeepSpeed's pydantic int: a JSON 8.0 reads as 8; no "auto" for these keys)."""
    if isinstance(value, str):
        raise DeepSpeedConfigError(key, f"must be a whole number of ranks, not {shown(value)}")
    got = elements(key, value, default, low=low)
    assert got is not None
    return got


def section(config: Mapping[str, object], key: str, path: str) -> Mapping[str, object]:
    value = config.get(key)
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise DeepSpeedConfigError(path, f"must be an object, not {shown(value)}")
    return value


def zero_section(config: Mapping[str, object]) -> Mapping[str, object]:
    """zero_optimization for the readers that run after it was checked (anything but an object: empty)."""
    raw = config.get("zero_optimization")
    return raw if isinstance(raw, Mapping) else {}


def zero_value(zero: Mapping[str, object], name: str) -> object:
    """A zero_optimization key by its stage3_ name or DeepSpeed's other spelling."""
    return zero.get(name, zero.get(ZERO[name].alias or name))
