"""A formula as the core hands it over: the arithmetic and the words around it kept apart.

Every rule spells its formula with the numbers substituted ("⌈7,000,000,000 ÷ 8⌉ = 875,000,000 elements
× 2 B × 1 copy = 1,750,000,000 B"). Some carry words that are not arithmetic: a remark in parentheses
("(one unit at a time)"), a trailing phrase ("t=4 with sequence parallelism"), or only words ("all-gather
not counted"). A :class:`Formula` keeps those as :class:`Remark` parts, so a renderer asks for what it
shows — the whole text (:attr:`Formula.text`: pages, the JSON receipt, the table), the arithmetic alone
(:attr:`Formula.arithmetic`: the CSV's ``formula`` column) or the remarks (:attr:`Formula.remarks`: its
``detail`` column) — and none reads a formula back out of its text.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Remark:
    """Words inside a formula that are not arithmetic.

    ``subject``: the named line the words belong to ("per layer"); said with them where they stand
    apart from the line ("per layer: attention core recomputed"). ``bare``: written after a blank
    without parentheses (a trailing phrase), else in parentheses.
    """

    words: str
    subject: str = ""
    bare: bool = False

    def written(self, after: str) -> str:
        """The remark as the text writes it, following ``after`` (a blank first unless it starts a line)."""
        shown = self.words if self.bare else f"({self.words})"
        return shown if not after or after.endswith("\n") else f" {shown}"

    @property
    def said(self) -> str:
        """The remark standing apart from its formula."""
        return f"{self.subject}: {self.words}" if self.subject else self.words


Part = str | Remark


@dataclass(frozen=True, slots=True)
class Formula:
    """Arithmetic (``str`` parts, lines separated by ``\\n`` inside them) with :class:`Remark` parts between."""

    parts: tuple[Part, ...] = ()

    @classmethod
    def of(cls, *parts: Part) -> Formula:
        return cls(tuple(part for part in parts if part))

    @classmethod
    def words(cls, text: str) -> Formula:
        """A statement with no arithmetic ("stages 0–2 hold full parameters: nothing to gather")."""
        return cls.of(Remark(text, bare=True)) if text else cls()

    @classmethod
    def lines(cls, *lines: Formula) -> Formula:
        """``lines`` one under the other."""
        parts: list[Part] = []
        for i, line in enumerate(lines):
            if i:
                parts.append("\n")
            parts.extend(line.parts)
        return cls.of(*parts)

    @property
    def text(self) -> str:
        """The whole formula as written: arithmetic with its remarks in place."""
        out = ""
        for part in self.parts:
            out += part if isinstance(part, str) else part.written(out)
        return out

    @property
    def arithmetic(self) -> str:
        """The formula without its remarks: empty for a statement with no arithmetic."""
        return "".join(part for part in self.parts if isinstance(part, str))

    @property
    def remarks(self) -> tuple[str, ...]:
        """Each remark once, as it reads apart from the formula, in order."""
        return tuple(dict.fromkeys(part.said for part in self.parts if isinstance(part, Remark)))

    def __str__(self) -> str:
        return self.text

    def __bool__(self) -> bool:
        return bool(self.parts)
