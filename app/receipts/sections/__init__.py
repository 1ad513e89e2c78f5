"""The receipt, section by section: each module holds a section's pydantic models (what
``/openapi.json`` documents) and the function that builds them from an estimate (``…_out``).

Bottom up: ``peak`` ← ``stages`` ← ``model`` ← ``parallelism``; ``fit``, ``host`` and ``checks``
stand alone. :mod:`app.receipts.receipt` puts them together.
"""
