"""Renderings of an estimate: the JSON receipt, the CSV, the terminal table, a comparison, and the
models of every answer the API gives.

Imports the ledger and interop only; the web app and the CLI import from here.

The rooms, bottom up (``tests/test_imports.py`` holds the layers):

- ``strict``: the base of every answer model (extra keys forbidden) and its annotated integers.
- ``scenario_out``: the receipt's ``scenario`` section, derived from the scenario's declared fields.
- ``url``: where the lab is served: the checked base URL and a scenario's page there.
- ``sections/``: the receipt section by section, each as its pydantic models and the function that
  builds them from an estimate: ``peak`` (both peaks and the instants), ``stages`` (a stage's ledger
  lines, verdict and communication; the checkpoint), ``model`` (inventory, activations, FSDP2
  padding), ``fit``, ``host``, ``parallelism``, ``checks`` (checks and kill lists).
- ``receipt``: the whole receipt (:class:`~app.receipts.receipt.Receipt`), as a model and as JSON data.
- ``inventory``, ``interop_out``: a config's inventory and the built-in models; a DeepSpeed import and
  the frameworks' snippets, as the API answers them.
- ``display``, ``csv_rows``, ``table``: byte formatting; the CSV receipt (the core's formulas give their
  arithmetic and remarks apart); the terminal table.
- ``compare``, ``compare_out``: two scenarios side by side (A, B, B − A), and the models of its answer.
"""
