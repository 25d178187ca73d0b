"""Problems found in config files, and pydantic's errors said the way a person fixes them.

Rendering (DESIGN §6, what `cronq validate` and `cronq apply` print, one line each):

    file:line: job NAME: field: problem     a problem in a job (NAME is `#N` if it has no
                                            valid name: the N-th job of the file)
    file:line: field: problem               a problem outside any job (project, defaults, jobs)
    file:line: problem                      a problem of the file as a whole (syntax, empty)
    file: problem                           no line to point at (missing or unreadable file)

Field paths are dotted (`failure_policy.constant.delay`), list items are `[i]` (`rq.args[2]`).
"""

from __future__ import annotations

import difflib
import typing
from dataclasses import dataclass
from typing import Any

import annotated_types
from pydantic import BaseModel
from pydantic.fields import FieldInfo
from pydantic_core import ErrorDetails

from cronq.bounded import short_repr

__all__ = ["ConfigProblem", "Loc", "describe_error", "format_field"]

Loc = tuple[str | int, ...]


@dataclass(frozen=True)
class ConfigProblem:
    """One problem (or warning) in one place of one file."""

    file: str
    line: int | None
    job: str | None
    field: str | None
    message: str

    def __str__(self) -> str:
        parts = [self.file if self.line is None else f"{self.file}:{self.line}"]
        if self.job is not None:
            parts.append(f"job {self.job}")
        if self.field:
            parts.append(self.field)
        parts.append(self.message)
        return ": ".join(parts)

    def as_dict(self) -> dict[str, Any]:
        """The JSON form (`--json`): every part, and the rendered line as `text`."""
        return {
            "file": self.file,
            "line": self.line,
            "job": self.job,
            "field": self.field,
            "message": self.message,
            "text": str(self),
        }


def format_field(loc: Loc) -> str:
    text = ""
    for part in loc:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else part)
    return text


def describe_error(root: type[BaseModel], error: ErrorDetails) -> str:
    """A message for one pydantic error at `error["loc"]` under the model `root`, without the
    field path (the caller puts that in front)."""
    kind, loc, ctx = error["type"], error["loc"], error.get("ctx") or {}
    value = error["input"]
    if kind == "missing":
        return "required"
    if kind == "extra_forbidden":
        return _unknown_key(_model_at(root, loc[:-1]), loc[-1] if loc else "")
    if kind in ("value_error", "assertion_error"):
        return error["msg"].split(", ", 1)[-1]
    if kind == "cronq_config":
        return error["msg"]
    if kind in _NUMBER_ERRORS:
        return _number_problem(_field_at(root, loc), kind, value)
    if kind in ("bool_type", "bool_parsing"):
        return f"expected true or false, got {_shown(value)}"
    if kind == "string_type":
        hint = " (quote it)" if isinstance(value, (int, float)) else ""
        return f"expected text, got {_shown(value)}{hint}"
    if kind == "string_too_long":
        return f"longer than {ctx.get('max_length')} characters"
    if kind == "too_long":
        return f"{ctx.get('actual_length')} items; at most {ctx.get('max_length')} are allowed"
    if kind in ("enum", "literal_error"):
        return f"expected {ctx.get('expected')}, got {_shown(value)}"
    if kind in ("model_type", "model_attributes_type", "dict_type", "dataclass_type"):
        return f"expected a mapping (key: value), got {_shown(value)}"
    if kind in ("list_type", "tuple_type"):
        return f"expected a list, got {_shown(value)}"
    if kind == "recursion_loop":
        return "nested too deeply"
    message = error["msg"]
    return f"{message[:1].lower()}{message[1:]}, got {_shown(value)}"


_NUMBER_ERRORS = {
    "int_type",
    "int_parsing",
    "int_from_float",
    "int_parsing_size",
    "float_type",
    "float_parsing",
    "finite_number",
    "greater_than",
    "greater_than_equal",
    "less_than",
    "less_than_equal",
}


def _number_problem(info: FieldInfo | None, kind: str, value: object) -> str:
    bounds: dict[str, object] = {}
    for item in info.metadata if info is not None else []:
        for name in ("gt", "ge", "lt", "le"):
            if isinstance(item, getattr(annotated_types, name.title())):
                bounds[name] = getattr(item, name)
    whole = info is None or _wants_int(info.annotation)
    noun = "a whole number" if whole else "a number"
    if kind.startswith("less_than"):
        limit = f" below {bounds['lt']}" if "lt" in bounds else f" of at most {bounds.get('le')}"
    elif "gt" in bounds:
        limit = f" greater than {bounds['gt']}"
    elif "ge" in bounds:
        limit = f" of at least {bounds['ge']}"
    else:
        limit = ""
    return f"expected {noun}{limit}, got {_shown(value)}"


def _wants_int(annotation: object) -> bool:
    return annotation is int or int in typing.get_args(annotation)


def _shown(value: object) -> str:
    if value is None:
        return "nothing (null)"
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    return short_repr(value)


def _unknown_key(model: type[BaseModel] | None, key: str | int) -> str:
    known = sorted(model.model_fields) if model is not None else []
    close = difflib.get_close_matches(str(key), known, n=1, cutoff=0.6)
    if close:
        return f"unknown key; did you mean {close[0]!r}?"
    if known:
        return f"unknown key; expected one of {', '.join(known)}"
    return "unknown key"


def _field_at(root: type[BaseModel], loc: Loc) -> FieldInfo | None:
    """The declaration of the field at `loc` (list indexes skipped), or None."""
    model: type[BaseModel] | None = root
    info: FieldInfo | None = None
    for part in loc:
        if isinstance(part, int):
            continue
        if model is None or part not in model.model_fields:
            return None
        info = model.model_fields[part]
        model = _model_in(info.annotation)
    return info


def _model_at(root: type[BaseModel], loc: Loc) -> type[BaseModel] | None:
    if not any(isinstance(part, str) for part in loc):
        return root
    info = _field_at(root, loc)
    return _model_in(info.annotation) if info is not None else None


def _model_in(annotation: object) -> type[BaseModel] | None:
    """The pydantic model inside `X | None`, `list[X]`, `Annotated[X, ...]`."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    if typing.get_origin(annotation) is not None:
        for argument in typing.get_args(annotation):
            found = _model_in(argument)
            if found is not None:
                return found
    return None
