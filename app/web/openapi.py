"""OpenAPI pieces built from the one field table, so the documented bounds are the enforced ones."""

from __future__ import annotations

from typing import Any

from app.ledger.fields import FIELDS, NAME_PATTERN, Field


def field_schema(field: Field) -> dict[str, Any]:
    if field.name == "model":
        return {"type": "string", "maxLength": field.maximum,
                "description": "a known model id (see /api/models) or a compact config, cfg:key=value;…"}  # fmt: skip
    if field.kind == "text":
        return {"type": "string", "maxLength": field.maximum, "pattern": NAME_PATTERN}
    if field.options is not None:
        return {"type": "string", "enum": list(field.options)}
    if field.choices is not None:
        return {"type": "integer", "enum": list(field.choices)}
    return {"type": "integer", "minimum": field.minimum, "maximum": field.maximum}


def _description(field: Field) -> str:
    extra = ""
    if field.kind == "count":
        extra = " In the query string, human counts such as 7B or 400M are also read exactly."
    elif field.kind == "bytes":
        extra = " In the query string, sizes such as 80GB or 80GiB are also read exactly."
    return f"{field.help} Unit: {field.unit}.{extra}"


QUERY_PARAMETERS: list[dict[str, Any]] = [
    {"name": f.name, "in": "query", "required": False, "schema": field_schema(f), "description": _description(f)}
    for f in FIELDS
]

SCENARIO_SCHEMA: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "properties": {f.name: {**field_schema(f), "description": f.help} for f in FIELDS},
}

BODY_SCHEMA: dict[str, Any] = {
    "required": True,
    "content": {"application/json": {"schema": SCENARIO_SCHEMA}},
    "description": "Scenario fields; any omitted field takes its default (the seed's example).",
}

_INT = {"type": "integer"}
_PEAK_KEYS = ("persistent", "gather", "buckets", "activations", "overhead", "contingency", "total")
_CLASS_KEYS = ("parameters", "gradients", "master_weights", "optimizer_states", "total")
MUTATION_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["id", "killed", "check", "message"],
    "properties": {
        "id": {"type": "string"},
        "killed": {"type": "boolean"},
        "check": {"type": "string"},
        "message": {"type": "string"},
    },
}
RECEIPT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["schema_version", "scenario", "stages", "checkpoint", "mutations"],
    "properties": {
        "schema_version": {"type": "integer", "enum": [1]},
        "scenario": SCENARIO_SCHEMA,
        "stages": {
            "type": "array",
            "minItems": 4,
            "maxItems": 4,
            "items": {
                "type": "object",
                "required": ["stage", "persistent", "peak", "fits", "headroom_bytes", "communication_bytes", "lines"],
                "properties": {
                    "stage": {"type": "integer", "minimum": 0, "maximum": 3},
                    "persistent": {
                        "type": "object",
                        "required": list(_CLASS_KEYS),
                        "properties": dict.fromkeys(_CLASS_KEYS, _INT),
                    },
                    "peak": {
                        "type": "object",
                        "required": list(_PEAK_KEYS),
                        "properties": dict.fromkeys(_PEAK_KEYS, _INT),
                    },
                    "fits": {"type": "boolean"},
                    "headroom_bytes": _INT,
                    "communication_bytes": _INT,
                    "lines": {"type": "array", "items": {"type": "object"}},
                },
            },
        },
        "checkpoint": {"type": "object"},
        "mutations": {"type": "array", "items": MUTATION_SCHEMA},
    },
}
ERROR_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["detail"],
    "properties": {"detail": {"type": "array", "items": {"type": "object", "required": ["loc", "msg"]}}},
}
_ERROR_RESPONSE = {
    "description": "Bad input: one entry per bad field, naming it and its allowed range",
    "content": {"application/json": {"schema": ERROR_SCHEMA}},
}
LIMIT_RESPONSES: dict[int | str, dict[str, Any]] = {
    413: {
        "description": "The request body is larger than 64 KiB",
        "content": {"application/json": {"schema": ERROR_SCHEMA}},
    },
    414: {
        "description": "The query string is longer than 2,048 characters",
        "content": {"application/json": {"schema": ERROR_SCHEMA}},
    },
}
RECEIPT_RESPONSES: dict[int | str, dict[str, Any]] = {
    200: {"description": "The receipt", "content": {"application/json": {"schema": RECEIPT_SCHEMA}}},
    422: _ERROR_RESPONSE,
    **LIMIT_RESPONSES,
}
MUTATIONS_RESPONSES: dict[int | str, dict[str, Any]] = {
    200: {
        "description": "The kill lists",
        "content": {
            "application/json": {
                "schema": {
                    "type": "object",
                    "required": ["mutations", "reference_mutations"],
                    "properties": {
                        "mutations": {"type": "array", "items": MUTATION_SCHEMA},
                        "reference_mutations": {"type": "array", "items": MUTATION_SCHEMA},
                    },
                }
            }
        },
    },
    422: _ERROR_RESPONSE,
    **LIMIT_RESPONSES,
}

_UNIT = {"type": "object", "required": ["name", "params"],
         "properties": {"name": {"type": "string"}, "params": {"type": "integer"}}}  # fmt: skip
_TENSOR_GROUP = {
    "type": "object",
    "required": ["name", "shape", "count"],
    "properties": {
        "name": {"type": "string", "description": "checkpoint name; {k} is the layer index, {e} the expert index"},
        "shape": {"type": "array", "items": {"type": "integer"}},
        "count": {"type": "integer", "description": "identical tensors of this kind in one unit (experts)"},
    },
}
_UNIT_GROUP = {
    "type": "object",
    "required": ["name", "count", "params", "tensors"],
    "properties": {
        "name": {"type": "string"},
        "count": {"type": "integer", "description": "identical units (the decoder layers)"},
        "params": {"type": "integer", "description": "parameters in one of these units"},
        "tensors": {"type": "array", "items": _TENSOR_GROUP},
    },
}
INVENTORY_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["model", "family", "params", "layers", "tensor_count", "largest_unit", "units", "ignored_keys",
                 "ignored_key_count"],
    "properties": {
        "model": {"type": "string", "description": "the scenario's model input for this config (cfg:…)"},
        "title": {"type": "string"},
        "family": {"type": "string"},
        "params": {"type": "integer"},
        "layers": {"type": "integer"},
        "tensor_count": {"type": "integer", "description": "tensors in the checkpoint"},
        "largest_unit": _UNIT,
        "units": {"type": "array", "items": _UNIT_GROUP,
                  "description": "the embedding unit, all decoder layers as one entry, the final unit"},
        "ignored_keys": {"type": "array", "items": {"type": "string"},
                         "description": "config keys this family does not read (the first 20)"},
        "ignored_key_count": {"type": "integer"},
    },
}  # fmt: skip
CONFIG_BODY: dict[str, Any] = {
    "required": True,
    "content": {"application/json": {"schema": {"type": "object", "description": "a Hugging Face config.json"}}},
    "description": "A Hugging Face config.json of a supported family (llama, mistral, mixtral, qwen2, gpt2, gpt_neox).",
}
INVENTORY_RESPONSES: dict[int | str, dict[str, Any]] = {
    200: {"description": "The model's inventory", "content": {"application/json": {"schema": INVENTORY_SCHEMA}}},
    422: _ERROR_RESPONSE,
    **LIMIT_RESPONSES,
}
MODELS_RESPONSES: dict[int | str, dict[str, Any]] = {
    200: {"description": "The built-in models", "content": {"application/json": {"schema": {
        "type": "array", "items": {"type": "object", "required": ["id", "title", "source", "params"]}}}}},
    414: LIMIT_RESPONSES[414],
}  # fmt: skip
