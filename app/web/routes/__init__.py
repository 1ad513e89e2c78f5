"""The HTTP routes, one router per concern: routes parse, call the core and a view, and render.

- ``pages``: the lab (the page, or for htmx its results), the paste forms (``/model``, ``/deepspeed``), the
  detail tables and deferred sections (``/lines``, ``/fit-table``, ``/kills``, ``/lower``, ``/snippets``),
  the API docs page.
- ``compare``: ``/compare`` and its JSON and CSV twins.
- ``api``: the JSON API (the receipt, the kill lists, a config's inventory, the built-in models, liveness).
- ``downloads``: the receipts as files, streamed.
- ``reconcile``: ``/reconcile``, the probe's records beside the scenario's schedule.
- ``trace_jobs``: "Trace this scenario": queue a trace, poll it, its report.
"""
