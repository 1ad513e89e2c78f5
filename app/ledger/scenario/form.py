"""The form's metadata of each declared scenario field: its group, unit and static default.

:class:`app.ledger.scenario.declared.ScenarioFields` declares each field with :func:`optional` and puts
:func:`form`'s metadata in its ``json_schema_extra``; :func:`form_metadata` reads it back.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field
from pydantic.fields import FieldInfo

# The form's order: the run's stack and hardware first (the answer's opening line names both), then the model, then
# the choices the stack presets.
GROUPS: tuple[tuple[str, str], ...] = (
    ("run", "Stack and hardware"),
    ("model", "Model"),
    ("stack", "Stack choices"),
    ("precision", "Precision and optimizer"),
    ("parallelism", "Parallelism"),
    ("schedule", "Schedule and buffers"),
    ("activation", "Activation model (with a model)"),
    ("measured", "Measured inputs"),
    ("host", "Offload and host memory"),
)


def optional(**info: Any) -> Any:
    """A field that may be absent: ``None`` (its default) unless given; ``info`` is ``Field``'s."""
    return Field(default=None, **info)


def form(group: str, unit: str, default: int | str | None) -> dict[str, Any]:
    """The form's metadata; no ``x-default`` where the default always follows other inputs."""
    return {"x-group": group, "x-unit": unit} | ({} if default is None else {"x-default": default})


def form_metadata(info: FieldInfo) -> dict[str, Any]:
    """A field's ``json_schema_extra``: x-group, x-unit, x-kind and (where it is static) x-default."""
    extra = info.json_schema_extra
    if not isinstance(extra, dict):
        raise TypeError("a scenario field's json_schema_extra is a dict of form metadata")
    return extra
