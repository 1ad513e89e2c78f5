"""Escaping for the HTML builders."""

from __future__ import annotations

from functools import lru_cache
from html import escape


def esc(text: str) -> str:
    """``text`` safe inside an element or a double- or single-quoted attribute."""
    return text if text.isalnum() else escape(text, quote=True)  # letters and digits need nothing


def ascii_html(text: str) -> str:
    """``text`` with each non-ASCII character as a numeric character reference (``⌈`` → ``&#8968;``).

    The lab's own text (formulas, evidence, messages) uses ⌈ ÷ × ≥ and friends. A page whose
    every part is ASCII is built and encoded several times faster than one that is not (CPython
    widens a whole string to fit its widest character), and the browser shows the same text.
    """
    return text if text.isascii() else _references(text)


# The same texts come back within a page (a formula shared by three stages) and across pages
# (evidence, titles, messages without numbers): a small cache keeps the recent ones.
@lru_cache(maxsize=512)
def _references(text: str) -> str:
    return text.encode("ascii", "xmlcharrefreplace").decode("ascii")
