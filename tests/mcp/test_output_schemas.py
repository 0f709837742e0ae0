"""Every tool publishes an outputSchema, made lean: the same verdicts as pydantic's, with fewer subschemas,
in the portable spelling (nullable values as ``anyOf`` branches, never ``type`` lists)."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from jsonschema.validators import validator_for
from mcp import Client
from pydantic import BaseModel, Field

from rath_mcp.models import lean_schema

pytestmark = pytest.mark.anyio


#: A default value that happens to look like a schema: it is data, and must come out unchanged.
SCHEMA_LOOKING_DEFAULT = {"additionalProperties": True, "anyOf": [{"type": "a"}, {"type": "b"}]}


class Inner(BaseModel):
    note: str | None
    weight: float | int | None = None


class Sample(BaseModel):
    name: str
    step: str | None
    count: int | None = None
    labels: dict[str, Any]
    usage: dict[str, int]
    inner: Inner | None
    items: list[dict[str, Any]]
    options: dict[str, Any] | None = Field(default=SCHEMA_LOOKING_DEFAULT)


VALID: list[dict[str, Any]] = [
    {"name": "a", "step": None, "labels": {}, "usage": {}, "inner": None, "items": []},
    {
        "name": "a",
        "step": "s",
        "count": 3,
        "labels": {"x": [1, {"y": None}]},
        "usage": {"t": 1},
        "inner": {"note": None, "weight": 1.5},
        "items": [{"k": 1}, {}],
        "extra": "kept: pydantic models allow unknown keys in the schema they publish",
    },
]
INVALID: list[dict[str, Any]] = [
    {"name": None, "step": None, "labels": {}, "usage": {}, "inner": None, "items": []},
    {"name": "a", "step": 5, "labels": {}, "usage": {}, "inner": None, "items": []},
    {"name": "a", "step": None, "count": "3", "labels": {}, "usage": {}, "inner": None, "items": []},
    {"name": "a", "step": None, "labels": [], "usage": {}, "inner": None, "items": []},
    {"name": "a", "step": None, "labels": {}, "usage": {"t": "1"}, "inner": None, "items": []},
    {"name": "a", "step": None, "labels": {}, "usage": {}, "inner": {"note": 1}, "items": []},
    {"name": "a", "step": None, "labels": {}, "usage": {}, "inner": {"note": None, "weight": "x"}, "items": []},
    {"name": "a", "step": None, "labels": {}, "usage": {}, "inner": None, "items": [1]},
    {"name": "a", "step": None, "labels": {}, "usage": {}, "inner": None, "items": [], "options": []},
    {"step": None, "labels": {}, "usage": {}, "inner": None, "items": []},
]


def verdicts(schema: dict[str, Any]) -> list[bool]:
    validator = validator_for(schema)(schema)
    return [validator.is_valid(instance) for instance in VALID + INVALID]


def test_the_lean_schema_accepts_and_refuses_exactly_what_the_generated_one_does() -> None:
    generated = Sample.model_json_schema()
    lean = copy.deepcopy(generated)
    lean_schema(lean)
    assert verdicts(generated) == [True] * len(VALID) + [False] * len(INVALID)
    assert verdicts(lean) == verdicts(generated)
    assert "additionalProperties" not in lean["properties"]["labels"]
    assert lean["properties"]["step"]["anyOf"] == [{"type": "string"}, {"type": "null"}]  # portable, not a type list
    assert lean["properties"]["options"]["anyOf"] == [{"type": "object"}, {"type": "null"}]  # subschemas leaned too
    assert lean["properties"]["options"]["default"] == SCHEMA_LOOKING_DEFAULT


async def test_every_tool_publishes_a_lean_output_schema(client: Client) -> None:
    tools = (await client.list_tools()).tools
    assert len(tools) == 37
    for tool in tools:
        assert tool.output_schema is not None, tool.name
        text = json.dumps(tool.output_schema)
        assert '"additionalProperties": true' not in text, tool.name
        assert '"type": [' not in text, tool.name  # type lists are what schema linters and Gemini refuse
