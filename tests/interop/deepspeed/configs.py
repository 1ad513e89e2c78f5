"""The public recipes in ``tests/data/deepspeed/`` and what the reader's tests ask of an import."""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping

from app.interop.deepspeed.reader import DeepSpeedImport
from tests.support import paths

DATA = paths.DATA / "deepspeed"
# Sections read as a whole (their inner keys do not change memory): one line accounts for each.
WHOLE = frozenset({"hybrid_engine", "tensorboard", "scheduler"})


def config(name: str) -> dict[str, object]:
    loaded = json.loads((DATA / f"{name}.json").read_text(encoding="utf-8"))
    assert isinstance(loaded, dict)
    return loaded


def leaf_keys(tree: Mapping[str, object], prefix: str = "") -> Iterator[str]:
    """Every key path of a config that holds a value (an object's keys, recursively)."""
    for key, value in tree.items():
        path = f"{prefix}{key}"
        if isinstance(value, Mapping) and value and path not in WHOLE:
            yield from leaf_keys(value, path + ".")
        else:
            yield path


def accounted(result: DeepSpeedImport) -> set[str]:
    keys: set[str] = set()
    for line in result.lines:
        keys.update(part.strip() for part in line.key.split(","))
    return keys


def lines_of(result: DeepSpeedImport, key: str) -> list[str]:
    return [f"{line.status}: {line.effect}" for line in result.lines if line.key == key]


def assert_every_key_accounted(cfg: Mapping[str, object], result: DeepSpeedImport) -> None:
    alias = {"max_live_parameters": "stage3_max_live_parameters", "max_reuse_distance": "stage3_max_reuse_distance",
             "gather_16bit_weights_on_model_save": "stage3_gather_16bit_weights_on_model_save"}  # fmt: skip
    have = accounted(result) | {"fp16.enabled", "bf16.enabled"}  # the precision line names both when they agree
    missing = []
    for key in leaf_keys(cfg):
        head, _, tail = key.rpartition(".")
        canonical = f"{head}.{alias[tail]}" if tail in alias else key
        if key not in have and canonical not in have:
            missing.append(key)
    assert not missing, f"keys with no line: {missing}"
