"""The pure core: integers in, ledger out.

Imports only the standard library and pydantic (validation, not web). No web framework, no templates,
no I/O: every byte count is a Python ``int`` and no float ever touches one (a test parses this package).

The rooms, bottom up (a room imports only rooms below it; ``tests/test_imports.py`` holds it):

- ``bounds``, ``arithmetic``, ``formula``: the bounds the inputs and the models share; exact integer
  helpers; a formula as arithmetic and remarks apart (:class:`~app.ledger.formula.Formula`).
- ``models/``: a model's config read into an architecture, its tensor inventory, FSDP2 units and
  padding, the tensor/pipeline/expert split, the activation ledger, and the defaults a model fills.
- ``scenario/``: the inputs (bounds, defaults, help), the rules across fields, the frozen
  :class:`~app.ledger.scenario.Scenario`, its canonical link, the workshop presets.
- ``state/``: the ownership rules of each ZeRO stage, the persistent lines, host memory under offload,
  communication per step, the checkpoint peak.
- ``peak/``: the declared peak (the seed's sum of maxima), the schedule-aware walk of one step, the fit finder.
- ``ledger``, ``pipeline``: every stage's ledger under a set of rules; both ends of a pipeline.
- ``verify/``: the independent oracle, the checks, and the mutants the checks kill.
- ``estimate``: everything a receipt, the page or the CLI shows for one scenario.
"""
