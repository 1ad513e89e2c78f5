"""Renderings of an estimate: JSON, CSV, display formatting and the canonical link.

Imports the ledger only; the web app and the CLI import from here.
"""
