"""HTTP plumbing, below the routes and views:

- ``settings``: the settings, read from the environment when the app factory asks.
- ``deps``: the dependencies that read a request's scenario (the one input model).
- ``query``: the page's reading of a scenario from the query string or a form.
- ``htmx``: which requests want a fragment, the ``Vary`` headers, how a live update touches the history.
- ``limits``: request size limits, before any routing.
- ``security``: the security headers on every response.
- ``errors``: every 4xx about the input, in one shape; ``responses``: the error answers routes document.
- ``templating``: the one Jinja environment and its display filters.
- ``static``: static assets, long-cached when versioned.
- ``server``: ``zero3-lab serve`` (uvicorn on the app factory).
"""
