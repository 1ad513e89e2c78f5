"""Whole config.json files, as transformers writes them, through ``zero3-lab estimate --model-config`` (issue 27).

The catalogue keeps only the keys that size something; a file a user downloads has every key its config class
writes: floats (``rms_norm_eps``, Gemma 2's soft-caps), lists (Gemma's ``layer_types``, Qwen3-MoE's
``mlp_only_layers``), nested objects (``rope_parameters``), nulls. One model of each family is written out by
transformers' own config class (``save_pretrained``'s JSON) and read back by the CLI: the parameter count must equal
transformers' count of the same config on the meta device, and every key the family does not read must be named
back as ignored, none refused.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from app.cli import main
from app.ledger.models.known import KNOWN_MODELS, KnownModel
from app.ledger.models.readers import FAMILY_KEYS
from tests.support.hf_trace import MARKS

pytestmark = MARKS


def _one_per_family() -> list[KnownModel]:
    seen: dict[str, KnownModel] = {}
    for m in KNOWN_MODELS:
        seen.setdefault(str(m.config["model_type"]), m)
    return list(seen.values())


@pytest.mark.parametrize("model", _one_per_family(), ids=lambda m: m.id)
def test_a_whole_config_json_is_counted_as_transformers_counts_it(
    model: KnownModel, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import torch
    from transformers import AutoModelForCausalLM

    from app.trace.models.hf import hf_config

    config = hf_config(model.config)
    whole: dict[str, Any] = json.loads(config.to_json_string())
    path = tmp_path / "config.json"
    path.write_text(json.dumps(whole))
    with torch.device("meta"):
        counted = int(AutoModelForCausalLM.from_config(config).num_parameters())  # type: ignore[no-untyped-call]

    assert main(["estimate", "--model-config", str(path), "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["model"]["params"] == counted
    unread = set(whole) - set(FAMILY_KEYS[model.config["model_type"]])  # type: ignore[index]
    assert len(unread) > 5  # a whole file: most of its keys size nothing
