"""The lab's HTML, built by small Python functions instead of a template engine.

Why not Jinja: a live update re-renders about 150 numbers, each with its formula, and issue 4
asks for the fragment and the page to cost no more than a few hundred microseconds above the
framework's own floor. Jinja's per-expression machinery (attribute lookups, escaping wrappers,
loop contexts) cost more than that on its own. Here every part that never changes (labels, help,
presets, devices, headings) is a module-level string built once at import, and a request only
fills in its numbers with f-strings.

The one rule: every text a user can type (the scenario name, echoed invalid input, a pasted
config and anything derived from it, error messages quoting input) passes through
:func:`app.web.html.text.esc`. Numbers are placed as they are, and the lab's own text
(formulas, evidence, rule names) through :func:`app.web.html.text.ascii_html` (or its cached
twin for texts without numbers), which keeps the page ASCII but escapes nothing.
``tests/web/test_hostile_web.py`` fires hostile text at every field and checks that none of it
arrives unescaped.
"""
