"""What an invocation does (DESIGN §5), as written in a config file: `rq`, `http` or `noop`.

Only the spelling is checked here. Nothing is imported or fetched: a config file must not be a
way to run code on the machine that validates it (workers enforce CRONQ_ALLOWED_MODULES).
"""

from __future__ import annotations

import keyword
import re
from datetime import timedelta
from typing import Annotated, Literal
from urllib.parse import urlsplit

from pydantic import (
    AfterValidator,
    BeforeValidator,
    Field,
    PlainSerializer,
    WithJsonSchema,
    model_validator,
)

from cronq.bounded import short_repr, text_map
from cronq.durations import Duration
from cronq.jsondata import JsonData, check_json
from cronq.policies import StrictModel

__all__ = [
    "DEFAULT_HTTP_TIMEOUT",
    "HttpTarget",
    "NoopTarget",
    "PositiveDuration",
    "RqTarget",
    "Target",
]

DEFAULT_HTTP_TIMEOUT = timedelta(seconds=30)
MAX_URL_LENGTH = 2048

_DOTTED = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)+")
_QUEUE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}")
_HEADER_NAME = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]{1,256}")
_STATUS_RANGE = re.compile(r"([1-5][0-9][0-9])\s*-\s*([1-5][0-9][0-9])")
_STATUS_PATTERN = r"^([1-5][xX][xX]|[1-5][0-9]{2}(-[1-5][0-9]{2})?)$"
_STATUS_CLASS = re.compile(r"([1-5])[xX][xX]")


def _positive(value: timedelta) -> timedelta:
    if value <= timedelta(0):
        raise ValueError("must be longer than 0s")
    return value


PositiveDuration = Annotated[Duration, AfterValidator(_positive)]
"""A duration that must be greater than zero (timeouts)."""


def _dotted_path(value: str) -> str:
    if len(value) > 256 or not _DOTTED.fullmatch(value):
        raise ValueError(
            f"expected a dotted path to a function such as 'billing.reports.nightly', got {value!r}"
        )
    if any(keyword.iskeyword(part) for part in value.split(".")):
        raise ValueError(f"{value!r} contains a Python keyword; it cannot be imported")
    return value


def _queue_name(value: str) -> str:
    if not _QUEUE.fullmatch(value):
        raise ValueError(
            "expected a queue name of letters, digits, '_', '.', ':' or '-' "
            f"(at most 128 characters), got {value!r}"
        )
    return value


def _json_list(value: object) -> object:
    if not isinstance(value, list):
        raise ValueError(f"expected a list of arguments, got {short_repr(value)}")
    return check_json(value)


def _json_kwargs(value: object) -> object:
    if not isinstance(value, dict):
        raise ValueError(f"expected a mapping of keyword arguments, got {short_repr(value)}")
    for key in value:
        if not isinstance(key, str) or not key.isidentifier() or keyword.iskeyword(key):
            raise ValueError(f"{short_repr(key)} is not a valid Python argument name")
    return check_json(value)


class RqTarget(StrictModel):
    """Enqueue `func(*args, **kwargs)` on an RQ queue of yours; the invocation lasts as long as
    that RQ job."""

    func: Annotated[str, AfterValidator(_dotted_path)] = Field(
        description="dotted path of the function, e.g. billing.reports.nightly (never imported "
        "when validating)",
        examples=["billing.reports.nightly"],
    )
    queue: Annotated[str, AfterValidator(_queue_name)] = Field(
        default="default", description="RQ queue to enqueue on"
    )
    args: Annotated[list[JsonData], BeforeValidator(_json_list)] = Field(
        default_factory=list, description="positional arguments (JSON values)"
    )
    kwargs: Annotated[dict[str, JsonData], BeforeValidator(_json_kwargs)] = Field(
        default_factory=dict, description="keyword arguments (JSON values)"
    )


def _http_url(value: str) -> str:
    if len(value) > MAX_URL_LENGTH:
        raise ValueError(f"longer than {MAX_URL_LENGTH} characters")
    if any(char.isspace() for char in value):
        raise ValueError(f"{value!r} contains whitespace; percent-encode it")
    try:
        parts = urlsplit(value)
        parts.port  # noqa: B018  (raises on a bad port)
    except ValueError as exc:
        raise ValueError(f"invalid URL {value!r}: {exc}") from None
    if parts.scheme not in ("http", "https"):
        raise ValueError(f"expected an http:// or https:// URL, got {value!r}")
    if not parts.hostname:
        raise ValueError(f"{value!r} has no host")
    return value


def _upper(value: object) -> object:
    return value.upper() if isinstance(value, str) else value


StatusRange = tuple[int, int]


def _status_codes(value: object) -> tuple[StatusRange, ...]:
    items = value if isinstance(value, list) else [value]
    if not items:
        raise ValueError("expected at least one status code")
    ranges: list[StatusRange] = []
    for item in items:
        ranges.append(_status_range(item))
    return tuple(sorted(set(ranges)))


def _status_range(item: object) -> StatusRange:
    if isinstance(item, int) and not isinstance(item, bool) and 100 <= item <= 599:
        return (item, item)
    if isinstance(item, str):
        text = item.strip()
        if text.isdigit() and 100 <= int(text) <= 599:
            return (int(text), int(text))
        if match := _STATUS_CLASS.fullmatch(text):
            return (int(match[1]) * 100, int(match[1]) * 100 + 99)
        if (match := _STATUS_RANGE.fullmatch(text)) and int(match[1]) <= int(match[2]):
            return (int(match[1]), int(match[2]))
    raise ValueError(
        f"expected status codes such as 200, '2xx' or '200-299', got {short_repr(item)}"
    )


def _format_status_codes(value: tuple[StatusRange, ...]) -> list[str]:
    return [str(low) if low == high else f"{low}-{high}" for low, high in value]


StatusCodes = Annotated[
    tuple[StatusRange, ...],
    BeforeValidator(_status_codes),
    PlainSerializer(_format_status_codes, return_type=list[str]),
    WithJsonSchema(
        {
            "type": "array",
            "minItems": 1,
            "items": {
                "anyOf": [
                    {"type": "integer", "minimum": 100, "maximum": 599},
                    {"type": "string", "pattern": _STATUS_PATTERN},
                ]
            },
            "examples": [["2xx"], [200, 204], ["200-299", 304]],
        }
    ),
]

HttpMethod = Literal["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD"]


class HttpTarget(StrictModel):
    """Fetch a URL; the invocation succeeds when the response status is in `success_codes`.

    A `body` that is text is sent as it is; any other JSON value is sent as JSON.
    """

    url: Annotated[str, AfterValidator(_http_url)] = Field(
        description="http:// or https:// URL", examples=["http://127.0.0.1:8000/ping"]
    )
    method: Annotated[HttpMethod, BeforeValidator(_upper)] = Field(
        default="GET", description="HTTP method"
    )
    headers: Annotated[
        dict[str, str],
        BeforeValidator(
            text_map(
                what="headers",
                max_items=64,
                key_pattern=_HEADER_NAME,
                key_rule="a header name is 1-256 letters, digits or !#$%&'*+.^_`|~-",
                max_value=8192,
                single_line=True,
            )
        ),
    ] = Field(default_factory=dict, description="request headers (at most 64)")
    body: JsonData = Field(default=None, description="request body: text, or JSON to send")
    timeout: PositiveDuration = Field(
        default=DEFAULT_HTTP_TIMEOUT, description="time allowed for the response"
    )
    success_codes: StatusCodes = Field(
        default=((200, 299),),
        description="statuses that count as success: codes, classes ('2xx') or ranges",
    )

    @model_validator(mode="after")
    def _no_body_for_head(self) -> HttpTarget:
        if self.method == "HEAD" and self.body is not None:
            raise ValueError("a HEAD request cannot have a body")
        return self

    def is_success(self, status: int) -> bool:
        return any(low <= status <= high for low, high in self.success_codes)


class NoopTarget(StrictModel):
    """Does nothing, for tests and benchmarks: optionally sleeps, optionally fails."""

    sleep: Duration = Field(default=timedelta(0), description="how long the invocation lasts")
    fail: bool = Field(default=False, strict=True, description="end the invocation as FAILED")


Target = RqTarget | HttpTarget | NoopTarget
TARGET_KEYS = ("rq", "http", "noop")
