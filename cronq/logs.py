"""Log lines of cronq's long-running processes: one event per line, as text for people or as JSON
for log pipelines (`--log-format json`).

A JSON line holds ts, level, logger and message, then the fields the call passed in `extra`
(`job`, `invocation`, ...), and an exception's traceback as one string. Either way a credential
in a URL (`redis://user:PASSWORD@host`) is masked before the line is written: URLs are redacted
where they are logged (`cronq.cli.app.redact`), and this catches what a library's message holds.
"""

from __future__ import annotations

import json
import logging
import re
import sys
from datetime import datetime, timezone
from typing import Any, TextIO

__all__ = ["LOG_FORMATS", "JsonFormatter", "TextFormatter", "configure_logging", "scrub"]

LOG_FORMATS = ("text", "json")
_TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"

# The attributes every LogRecord has: anything else on a record came from `extra`.
_STANDARD = frozenset(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {
    "message",
    "asctime",
}
# user:password@ (or :password@) right after a URL's scheme.
_CREDENTIALS = re.compile(r"(?<=://)([^:/@\s]*):[^@\s]+@")


def scrub(text: str) -> str:
    """`text` with the password of every URL in it masked."""
    return _CREDENTIALS.sub(r"\1:***@", text) if "://" in text else text


class TextFormatter(logging.Formatter):
    """`time LEVEL logger: message`, credentials masked."""

    def __init__(self) -> None:
        super().__init__(_TEXT_FORMAT)

    def format(self, record: logging.LogRecord) -> str:
        return scrub(super().format(record))


class JsonFormatter(logging.Formatter):
    """One JSON object per line; newlines in a message or a traceback stay inside its string."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "ts": datetime.fromtimestamp(record.created, timezone.utc).isoformat(
                timespec="milliseconds"
            ),
            "level": record.levelname,
            "logger": record.name,
            "message": scrub(record.getMessage()),
        }
        for key, value in vars(record).items():
            if key not in _STANDARD and not key.startswith("_"):
                entry.setdefault(key, scrub(value) if isinstance(value, str) else value)
        if record.exc_info:
            entry["exc"] = scrub(self.formatException(record.exc_info))
        if record.stack_info:
            entry["stack"] = scrub(self.formatStack(record.stack_info))
        return json.dumps(entry, default=str, ensure_ascii=False)


def configure_logging(
    log_format: str = "text", *, level: int = logging.INFO, stream: TextIO | None = None
) -> None:
    """Send every log record of the process (RQ's too) to `stream` (stderr) in `log_format`,
    replacing any handler set up before."""
    if log_format not in LOG_FORMATS:
        raise ValueError(f"log format {log_format!r}: expected one of {', '.join(LOG_FORMATS)}")
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(JsonFormatter() if log_format == "json" else TextFormatter())
    logging.basicConfig(level=level, handlers=[handler], force=True)
