"""What a rank holds between steps, and what moves: one module per kind of state.

- :mod:`app.ledger.state.rules`: the ownership rules, which tensor classes each ZeRO stage shards.
- :mod:`app.ledger.state.persistent`: one stage's persistent lines (parameters, gradients, master
  weights, optimizer states) per busiest rank.
- :mod:`app.ledger.state.host`: offload (CPU, NVMe): each rank's host memory and the node's peak.
- :mod:`app.ledger.state.communication`: bytes each rank sends per step, per collective.
- :mod:`app.ledger.state.checkpoint`: the peak of saving a checkpoint, per policy.
"""
