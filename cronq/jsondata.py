"""Free-form values a job carries to its target (payload, rq args, http body): JSON, bounded.

YAML and TOML can hold things JSON cannot (dates, NaN, non-text keys); they are refused here,
with the place they occur, rather than failing later inside a worker when the value is sent.
"""

from __future__ import annotations

import json
import math
from typing import Annotated, Any

from pydantic import BeforeValidator, WithJsonSchema

__all__ = ["MAX_JSON_DEPTH", "JsonData", "check_json", "json_size"]

MAX_JSON_DEPTH = 32


def check_json(value: object) -> object:
    """Return `value` unchanged if it is plain JSON data; raise ValueError naming where not."""
    _check(value, "", 0)
    return value


def _check(value: object, where: str, depth: int) -> None:
    at = f" at {where}" if where else ""
    if depth > MAX_JSON_DEPTH:
        raise ValueError(f"nested deeper than {MAX_JSON_DEPTH} levels{at}")
    if value is None or isinstance(value, (str, bool, int)):
        return
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"{value} is not a JSON number{at}")
        return
    if isinstance(value, list):
        for index, item in enumerate(value):
            _check(item, f"{where}[{index}]", depth + 1)
        return
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                raise ValueError(f"key {key!r}{at} is not text")
            _check(item, f"{where}.{key}" if where else key, depth + 1)
        return
    hint = "; quote it to send it as text" if hasattr(value, "isoformat") else ""
    raise ValueError(f"{type(value).__name__} {value!s:.40} is not a JSON value{at}{hint}")


def json_size(value: object) -> int:
    """Bytes of the compact UTF-8 JSON text of `value`, as it will be stored and sent."""
    return len(json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode())


JsonData = Annotated[
    Any,
    BeforeValidator(check_json),
    WithJsonSchema({"description": "any JSON value"}),
]
"""A pydantic field type: any JSON value (null, true, 1, "x", [...], {...})."""
