"""Every built-in model's parameter count equals transformers' own count of the same config.json (issue 27).

transformers builds each catalogue entry's ``AutoModelForCausalLM`` on the meta device (no memory, no weights) and
counts it with ``num_parameters()``, which counts a tied embedding and head once; the lab's inventory of the same
config must agree to the parameter. The version is the trace extra's (constraints.txt pins it).
"""

from __future__ import annotations

import pytest

from app.ledger.models.inventory import inventory
from app.ledger.models.known import KNOWN_MODELS, KnownModel
from tests.support.hf_trace import MARKS

pytestmark = MARKS


def transformers_count(model: KnownModel) -> int:
    import torch
    from transformers import AutoModelForCausalLM

    from app.trace.models.hf import hf_config

    config = hf_config(model.config)  # the catalogue's facts as transformers' config class takes them
    with torch.device("meta"):
        built = AutoModelForCausalLM.from_config(config)  # type: ignore[no-untyped-call]
    return int(built.num_parameters())


@pytest.mark.parametrize("model", KNOWN_MODELS, ids=lambda m: m.id)
def test_the_catalogue_counts_as_transformers_does(model: KnownModel) -> None:
    assert inventory(model.architecture()).params == transformers_count(model)
