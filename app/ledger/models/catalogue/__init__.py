"""The built-in models' entries, one module per family (:mod:`app.ledger.models.known` makes them models).

Each entry reads exactly like the published ``config.json`` (only the keys that shape parameters or activations:
floats such as ``rms_norm_eps`` or ``rope_theta`` size nothing and are left out), with the Hub file and the paper or
report that introduced the model. The order here is the catalogue's: by family, each family oldest first.
"""

from __future__ import annotations

from app.ledger.models.catalogue import deepseek, gemma, gpt, llama, mistral, olmo, phi, qwen
from app.ledger.models.catalogue.sources import Entry

ENTRIES: dict[str, Entry] = {
    **llama.ENTRIES,
    **mistral.ENTRIES,
    **qwen.ENTRIES,
    **phi.ENTRIES,
    **deepseek.ENTRIES,
    **olmo.ENTRIES,
    **gemma.ENTRIES,
    **gpt.ENTRIES,
}
