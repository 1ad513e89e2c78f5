"""What the reader says about a config: one :class:`Line` per key, or a refusal naming one.

:class:`Report` gathers an import's lines and the scenario fields the config sets; the section readers
(:mod:`~app.interop.deepspeed.reader` and its neighbours) write into it, and every value they show goes
through :func:`shown`, so a key reads the same in every line.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

from app.ledger.arithmetic import n

__all__ = ["DeepSpeedConfigError", "Line", "Report", "Status", "shown"]

Status = Literal["sets", "checked", "no memory effect", "not modelled", "ignored", "unresolved"]


class DeepSpeedConfigError(ValueError):
    """A key DeepSpeed would refuse, or a value the lab cannot read: ``key`` is its dotted path."""

    def __init__(self, key: str, message: str) -> None:
        self.key = key
        self.message = message
        super().__init__(f"{key}: {message}")


@dataclass(frozen=True, slots=True)
class Line:
    """One key of the config: its dotted path, what the file says (``absent`` when DeepSpeed's default
    applies), what the lab does with it, and how (``status``)."""

    key: str
    written: str
    effect: str
    status: Status


def shown(value: object) -> str:
    """A config value as a line shows it (a long string cut at 40 characters, a section as ``{…}``)."""
    if value is None:
        return "absent"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return n(value)
    if isinstance(value, float):
        return f"{value:g}"
    if isinstance(value, str):
        return f'"{value[:40]}"'
    return "{…}" if isinstance(value, Mapping) else "[…]"


@dataclass
class Report:
    """The state of one import: the fields the config sets, its lines, and what stayed unresolved."""

    typed: frozenset[str]
    fields: dict[str, int | str] = field(default_factory=dict)
    origin: dict[str, str] = field(default_factory=dict)
    lines: list[Line] = field(default_factory=list)
    unresolved: list[str] = field(default_factory=list)

    def line(self, key: str, written: object, effect: str, status: Status) -> None:
        self.lines.append(Line(key, shown(written), effect, status))

    def set(self, key: str, written: object, name: str, value: int | str, why: str) -> None:
        """The config sets scenario field ``name`` (unless the user typed it)."""
        if name in self.typed:
            self.line(key, written, f"{why}; {name} was typed, and the typed value is kept", "checked")
            return
        self.fields[name] = value
        self.origin[name] = key
        self.line(key, written, f"{name} = {value if isinstance(value, str) else n(value)}: {why}", "sets")

    def unresolved_auto(self, key: str, needs: str) -> None:
        self.unresolved.append(f"{key}: {needs}")
        self.line(key, "auto", needs, "unresolved")
