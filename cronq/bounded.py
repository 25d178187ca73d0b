"""Validators for the small string maps of a job (metadata, HTTP headers), with hard bounds.

A config file is data from people, and everything in it ends up in Redis and in every RQ job a
tick enqueues: counts and lengths are capped so a typo cannot bloat every invocation.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping

__all__ = ["short_repr", "text_map"]


def text_map(
    *,
    what: str,
    max_items: int,
    key_pattern: re.Pattern[str],
    key_rule: str,
    max_value: int,
    single_line: bool = False,
) -> Callable[[object], dict[str, str]]:
    """A before-validator for a `{text: text}` mapping; `key_rule` explains `key_pattern`.

    Values must already be text: YAML turns `version: 1.10` into the number 1.1, so converting
    numbers would silently change what the author meant.
    """

    def validate(value: object) -> dict[str, str]:
        if not isinstance(value, Mapping):
            raise ValueError(f"expected a mapping of {what}, got {short_repr(value)}")
        if len(value) > max_items:
            raise ValueError(f"{len(value)} {what}; at most {max_items} are allowed")
        result: dict[str, str] = {}
        for key, item in value.items():
            if not isinstance(key, str) or not key_pattern.fullmatch(key):
                raise ValueError(f"invalid name {short_repr(key)}: {key_rule}")
            if not isinstance(item, str):
                raise ValueError(f"{key}: expected text, got {short_repr(item)} (quote it)")
            if len(item) > max_value:
                raise ValueError(f"{key}: longer than {max_value} characters")
            if single_line and any(char in item for char in "\r\n\0"):
                raise ValueError(f"{key}: must be a single line")
            result[key] = item
        return result

    return validate


def short_repr(value: object) -> str:
    """`repr` cut to fit in one problem line."""
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."
