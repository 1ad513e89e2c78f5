"""Observed runs: what the probe (:mod:`app.observed.probe`) recorded on real ranks, reconciled with the lab.

- :mod:`app.observed.records`: the probe's JSON lines read with pydantic, bounded, every error naming
  its line and field.
- :mod:`app.observed.reconcile`: estimate against observed per instant and rank, the difference named
  entry by entry (allocator reserve, CUDA context, unexplained), exact integers only.
- :mod:`app.observed.render`: the reconciliation as JSON and as a terminal table.
- :mod:`app.cli.observed`: ``zero3-lab reconcile`` and ``zero3-lab probe``.

The core depends on the ledger only; the web page (:mod:`app.web.routes.reconcile`) and the CLI sit on top.
"""
