"""What a page shows before any markup: one view module per template, figures still integers (the templates
format them with the filters of :mod:`app.web.http.templating`).

The lab's page (``index.html``):

- ``page``: the whole page for one request (:class:`~app.web.views.page.View`), its address, heading and
  presenter mode, and the contexts of ``index.html`` and of a live update's ``partials/_results.html``.
- ``form``: the scenario form's fields and fieldsets (``partials/_form.html``, ``macros/fields.html``), the
  hints of derived fields and the warnings beside implausible values (``partials/_field_slots.html``).
- ``deepspeed``: the "use a DeepSpeed config" form and what a paste was read into (``partials/_deepspeed.html``).
- ``results``: everything the results show (``partials/_results.html``), less the parts a live update defers;
  each part below is one partial:
  ``answer`` (``_answer.html``), ``model`` (``_model.html``), ``parallel`` (``_parallel.html``),
  ``persistent`` (``_persistent.html``), ``peak`` (``_peak.html``), ``lower`` (``_lower.html``, the
  sections below the peak: ``fit``, ``communication``, ``host``, and ``trace_panel`` for ``_trace.html``),
  ``kills`` (``_kills.html``).
- ``charts``: the integer geometry of the peak and fit charts (``macros/charts.html``).

The detail tables, fetched when a <details> is opened: ``lines`` (``_lines.html``), ``fit`` (also
``_fit_table.html``), ``snippets`` (``_snippets.html``), and ``detail`` (``detail.html``, any of them as a page
of its own).

The compare page: ``compare`` (``compare.html``, ``partials/_compare_results.html``).
"""
