"""The routes of :mod:`app.web.routes` over HTTP (the TestClient): the JSON API and downloads, the page and
its fragments, the paste forms (a model's config.json, a DeepSpeed config), compare, reconcile, trace jobs,
and Schemathesis against the OpenAPI document."""
