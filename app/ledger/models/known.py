"""Built-in configs of well-known open models (:mod:`app.ledger.models.catalogue`, one module per family).

Each entry reads exactly like the published ``config.json`` so that the same reader,
:func:`architecture_from_config`, handles an uploaded file and a preset: there is one path from config to
ledger, not two.

The published parameter counts these configs must reproduce live in the tests
(``tests/ledger/models/test_inventory.py``), beside their sources, so that a typo here fails there.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

from app.ledger.models.architecture import Architecture, ModelConfigError
from app.ledger.models.catalogue import ENTRIES
from app.ledger.models.readers import architecture_from_config


@dataclass(frozen=True, slots=True)
class KnownModel:
    id: str
    title: str
    source: str
    config: Mapping[str, object]  # read-only view of the config.json facts

    def architecture(self) -> Architecture:
        return architecture_from_config(self.config)


KNOWN_MODELS: tuple[KnownModel, ...] = tuple(
    KnownModel(id_, title, source, MappingProxyType(dict(config))) for id_, (title, source, config) in ENTRIES.items()
)
KNOWN_BY_ID: Mapping[str, KnownModel] = MappingProxyType({m.id: m for m in KNOWN_MODELS})


def known_model(model_id: str) -> KnownModel:
    """The built-in model ``model_id``; an unknown id is a :class:`ModelConfigError` listing the ids."""
    model = KNOWN_BY_ID.get(model_id)
    if model is None:
        shown = repr(model_id[:40]) + ("…" if len(model_id) > 40 else "")
        raise ModelConfigError(f"no built-in model {shown}; built-in: {', '.join(KNOWN_BY_ID)}", "model")
    return model
