"""From a model's ``config.json`` to the ledger's inputs: architecture, inventory, shards, activations.

Pure like the rest of ``app.ledger``: configs arrive as already-parsed dicts, every count is an
``int``, and nothing here reads a file or imports web code.

- :mod:`app.ledger.models.architecture`: a bounded :class:`Architecture` from a Hugging Face config.
- :mod:`app.ledger.models.known`: config facts of well-known open models, each with its source.
- :mod:`app.ledger.models.inventory`: every parameter tensor, the exact count, the wrapped units.
- :mod:`app.ledger.models.fsdp2`: FSDP2's dim-0-padded shard per rank beside the ⌈N ÷ D⌉ bound.
- :mod:`app.ledger.models.activations`: the activation ledger (never divided by D) and its recompute cost.
"""
