"""The `cronq` command group and what every command shares: options, errors, output."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from typing import Any, TypeVar
from urllib.parse import urlsplit, urlunsplit

import click
from redis import Redis
from redis.exceptions import RedisError

from cronq import __version__
from cronq.logs import LOG_FORMATS
from cronq.metrics import DEFAULT_HOST

F = TypeVar("F", bound=Callable[..., Any])

DEFAULT_REDIS_URL = "redis://127.0.0.1:6379/0"
DEFAULT_NAMESPACE = "cronq"


class UserError(click.ClickException):
    """A problem with the input or the job: message on stderr, exit status 1, no traceback."""

    exit_code = 1


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(__version__, prog_name="cronq")
def main() -> None:
    """cronq: a durable, distributed cron service on Redis and RQ.

    Jobs are declared in config files (see `cronq schema`), applied with `cronq apply`, and fired by
    `cronq worker` processes exactly once at their time. Run `cronq COMMAND --help` for details.
    """


def redis_options(command: F) -> F:
    """--redis-url and --namespace, with their environment variables (DESIGN §7)."""
    command = click.option(
        "--namespace",
        envvar="CRONQ_NAMESPACE",
        default=DEFAULT_NAMESPACE,
        show_default=True,
        help="Prefix of every Redis key cronq owns. [env: CRONQ_NAMESPACE]",
    )(command)
    return click.option(
        "--redis-url",
        envvar="CRONQ_REDIS_URL",
        default=DEFAULT_REDIS_URL,
        show_default=True,
        help="Redis server, e.g. rediss://:PASSWORD@host:6380/0. [env: CRONQ_REDIS_URL]",
    )(command)


def service_options(command: F) -> F:
    """--metrics-port, --metrics-host and --log-format of the long-running commands (`worker`,
    `watchdog`), whose output is read by Prometheus and log pipelines rather than by people."""
    command = click.option(
        "--log-format",
        type=click.Choice(LOG_FORMATS),
        envvar="CRONQ_LOG_FORMAT",
        default="text",
        show_default=True,
        help="Log lines as text, or as one JSON object per line. [env: CRONQ_LOG_FORMAT]",
    )(command)
    command = click.option(
        "--metrics-host",
        default=DEFAULT_HOST,
        show_default=True,
        help="Address the metrics server binds (0.0.0.0: every interface).",
    )(command)
    return click.option(
        "--metrics-port",
        type=click.IntRange(0, 65535),
        default=None,
        help="Serve Prometheus metrics at http://HOST:PORT/metrics (0: any free port).",
    )(command)


def json_option(command: F) -> F:
    return click.option("--json", "as_json", is_flag=True, help="Print JSON on stdout.")(command)


def print_json(value: Any) -> None:
    json.dump(value, sys.stdout, indent=2, default=str)
    sys.stdout.write("\n")


def redact(url: str) -> str:
    """A Redis URL fit to print: the password never appears in output or logs."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    user = parts.username or ""
    host = parts.hostname or ""
    port = f":{parts.port}" if parts.port else ""
    return urlunsplit(parts._replace(netloc=f"{user}:***@{host}{port}"))


SOCKET_TIMEOUT = 30.0


def connect(url: str) -> Redis:
    """A connection that is known to work, or a UserError naming the (redacted) server."""
    try:
        # redis-py 8 times a socket out after 5 s unless told otherwise, and RQ only raises a
        # timeout it can see: without an explicit one, an RQ worker's blocking dequeue on an idle
        # queue fails every 5 s. 30 s covers cronq's own blocking waits (1 s); RQ raises it for
        # its dequeue; a hung server still cannot hang a client for ever.
        connection = Redis.from_url(url, socket_timeout=SOCKET_TIMEOUT)
        connection.ping()
    except (RedisError, ValueError) as exc:
        raise UserError(f"cannot use Redis at {redact(url)}: {exc}") from None
    return connection
