"""The command line, one module per subcommand and the scenario flags they share.

- :mod:`app.cli.main`: the parser and ``main`` (the ``zero3-lab`` entry point), ``serve``.
- :mod:`app.cli.scenario_args`: one flag per scenario field, ``--scenario``, ``--model-config``,
  ``--deepspeed-config``, read into a scenario.
- :mod:`app.cli.estimate`: ``zero3-lab estimate``.
- :mod:`app.cli.trace`: ``zero3-lab trace`` (the trace extra).
- :mod:`app.cli.observed`: ``zero3-lab reconcile`` and ``zero3-lab probe``.
"""

from app.cli.main import build_parser, main

__all__ = ["build_parser", "main"]
