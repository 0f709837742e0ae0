"""The durable layer's JSON (``runtime.durable.compact_json.dumps``): what ``json.dumps`` compact writes,
and an encoding that fails leaves nothing behind that a later one trips on."""

from __future__ import annotations

import json
from typing import Any

import pytest

from runtime.durable.compact_json import dumps


@pytest.mark.parametrize(
    "value",
    [{"a": 1, "b": [1, 2.5, None, True]}, 'é "quoted"\n', 1.0, {1: "int key"}, [], {}, float("inf"), "x" * 1000],
)
def test_it_writes_what_json_dumps_compact_writes(value: Any) -> None:
    assert dumps(value) == json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def test_a_failed_encoding_leaves_no_false_cycle_behind() -> None:
    state: dict[str, Any] = {"inner": {"items": [1, object()]}}
    with pytest.raises(TypeError, match="not JSON serializable"):
        dumps(state)
    state["inner"]["items"].pop()  # the same containers, now encodable: the failure left no trace of them
    assert dumps(state) == '{"inner":{"items":[1]}}'


def test_a_real_cycle_is_refused() -> None:
    loop: dict[str, Any] = {}
    loop["self"] = loop
    with pytest.raises(ValueError, match="Circular reference"):
        dumps(loop)
    assert dumps({"fine": True}) == '{"fine":true}'
