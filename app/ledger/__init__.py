"""The pure core: integers in, ledger out.

Imports only the standard library. No web framework, no templates, no I/O: every byte
count is a Python ``int`` and no float ever touches one (a test parses this package).
"""
