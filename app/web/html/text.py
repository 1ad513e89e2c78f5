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
    Most of these texts carry the scenario's numbers and are new on every request, so nothing is
    cached here (a cache miss costs twice the conversion); see :func:`recurring_ascii_html`.
    """
    return text if text.isascii() else text.encode("ascii", "xmlcharrefreplace").decode("ascii")


@lru_cache(maxsize=128)
def recurring_ascii_html(text: str) -> str:
    """:func:`ascii_html` for the few texts without numbers that come back on every page (a rule,
    a check's title, a class's evidence): converted once each."""
    return ascii_html(text)
