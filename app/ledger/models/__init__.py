"""From a model's ``config.json`` to the ledger's inputs: architecture, inventory, shards, activations.

Pure like the rest of ``app.ledger``: configs arrive as already-parsed dicts, every count is an
``int``, and nothing here reads a file or imports web code.

- :mod:`app.ledger.models.architecture`: a bounded :class:`Architecture` from a Hugging Face config.
- :mod:`app.ledger.models.known`: config facts of well-known open models, each with its source.
- :mod:`app.ledger.models.inventory`: every parameter tensor, the exact count, the wrapped units.
- :mod:`app.ledger.models.fsdp2`: FSDP2's dim-0-padded shard per rank beside the ⌈N ÷ D⌉ bound.
- :mod:`app.ledger.models.parallel`: one rank's share of the model under tensor, pipeline and expert parallelism.
- :mod:`app.ledger.models.activations`: the activation ledger (never divided by D) and its recompute cost
  (what a layer saves, the recompute FLOPs, the figures, their formula and assumptions in words).
- :mod:`app.ledger.models.reference`: a model as one scenario input, a known id or a compact config.
- :mod:`app.ledger.models.defaults`: what a scenario's model supplies (params, unit, activation peak).
"""
