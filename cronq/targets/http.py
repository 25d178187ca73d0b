"""The `http` target: one request through urllib, given up at the invocation's deadline.

Credentials never reach a history row: every user header value, the URL's password and its
query string are masked in errors, and messages name the URL without userinfo or query.
"""

from __future__ import annotations

import base64
import json
import urllib.error
import urllib.request
from http.client import HTTPMessage
from typing import IO
from urllib.parse import unquote, urlsplit, urlunsplit

import redis

from cronq import __version__
from cronq.statemachine import InvocationStatus
from cronq.target_specs import HttpTarget
from cronq.targets.base import Finished, InvocationContext, bounded, describe_error, redact

__all__ = ["HttpInvoker", "RedirectRefused", "safe_url"]

_CREDENTIAL_HEADERS = ("Authorization", "Proxy-authorization", "Cookie")


class RedirectRefused(Exception):
    """A redirect that would change scheme: https→http leaks, http→https surprises."""


class HttpInvoker:
    """Sends the request synchronously; the status decides the outcome."""

    def __init__(self, spec: HttpTarget) -> None:
        self.spec = spec

    def invoke(self, context: InvocationContext, connection: redis.Redis) -> Finished:
        spec = self.spec
        url, headers = _url_and_headers(spec, context)
        secrets = _secrets(spec, headers)
        timeout = min(spec.timeout.total_seconds(), context.seconds_left())
        if timeout <= 0:
            return Finished(InvocationStatus.TIMED_OUT, "deadline passed before the request")
        where = f"{spec.method} {safe_url(spec.url)}"
        request = urllib.request.Request(
            url, data=_body(spec, headers), headers=headers, method=spec.method
        )
        opener = urllib.request.build_opener(_Redirects(spec))
        try:
            with opener.open(request, timeout=timeout) as response:
                status: int = response.status
        except urllib.error.HTTPError as exc:
            status = exc.code
            exc.close()
        except urllib.error.URLError as exc:
            if isinstance(exc.reason, TimeoutError):
                return _timed_out(where, timeout)
            reason = exc.reason
            detail = (
                describe_error(reason, secrets) if isinstance(reason, BaseException) else reason
            )
            return Finished(InvocationStatus.FAILED, bounded(redact(f"{where}: {detail}", secrets)))
        except TimeoutError:
            return _timed_out(where, timeout)
        except Exception as exc:  # the engine must get an outcome, whatever urllib raised
            error = f"{where}: {describe_error(exc, secrets)}"
            return Finished(InvocationStatus.FAILED, bounded(error))
        if spec.is_success(status):
            return Finished(InvocationStatus.SUCCEEDED)
        return Finished(InvocationStatus.FAILED, f"HTTP {status}")

    def abort(self, invocation_id: str, connection: redis.Redis) -> None:
        """Nothing to stop: the request runs inside the engine's task and ends by its timeout."""


def _timed_out(where: str, timeout: float) -> Finished:
    return Finished(InvocationStatus.TIMED_OUT, f"{where}: no response within {timeout:.3g}s")


def safe_url(url: str) -> str:
    """`url` without userinfo, query or fragment: fit for logs and history rows."""
    parts = urlsplit(url)
    host = parts.netloc.rpartition("@")[2]
    return urlunsplit((parts.scheme, host, parts.path, "", ""))


def _url_and_headers(spec: HttpTarget, context: InvocationContext) -> tuple[str, dict[str, str]]:
    """The URL to fetch and the headers in the order they override each other: ours by
    default, then the user's, then the X-Cronq ones, which always describe this invocation.

    urllib does not use a URL's `user:password@`; it becomes Basic auth, as curl does.
    """
    parts = urlsplit(spec.url)
    headers = {"User-Agent": f"cronq/{__version__}"}
    if parts.username is not None:
        pair = f"{unquote(parts.username)}:{unquote(parts.password or '')}"
        headers["Authorization"] = "Basic " + base64.b64encode(pair.encode()).decode()
        parts = parts._replace(netloc=parts.netloc.rpartition("@")[2])
    headers.update(spec.headers)
    headers["X-Cronq-Job"] = context.job_id
    headers["X-Cronq-Invocation"] = context.invocation_id
    headers["X-Cronq-Scheduled-For"] = context.scheduled_for.isoformat()
    return urlunsplit(parts), headers


def _secrets(spec: HttpTarget, headers: dict[str, str]) -> list[str]:
    """Strings that must not appear in an error: any header could carry a key."""
    parts = urlsplit(spec.url)
    found = [*spec.headers.values(), headers.get("Authorization", ""), parts.query]
    if parts.password:
        found += [parts.password, unquote(parts.password)]
    return found


def _body(spec: HttpTarget, headers: dict[str, str]) -> bytes | None:
    """Text as it is, anything else as JSON; Content-Type set unless the user chose one."""
    if spec.body is None:
        return None
    if isinstance(spec.body, str):
        data, content_type = spec.body.encode(), "text/plain; charset=utf-8"
    else:
        data = json.dumps(spec.body, separators=(",", ":"), ensure_ascii=False).encode()
        content_type = "application/json"
    if not any(name.lower() == "content-type" for name in headers):
        headers["Content-Type"] = content_type
    return data


class _Redirects(urllib.request.HTTPRedirectHandler):
    """urllib's redirects, minus the surprises: no change of scheme, credentials dropped on
    a change of host, and none followed when the redirect status itself counts as success."""

    def __init__(self, spec: HttpTarget) -> None:
        self.spec = spec

    def redirect_request(
        self,
        req: urllib.request.Request,
        fp: IO[bytes],
        code: int,
        msg: str,
        headers: HTTPMessage,
        newurl: str,
    ) -> urllib.request.Request | None:
        if self.spec.is_success(code):
            return None
        old, new = urlsplit(req.full_url), urlsplit(newurl)
        if new.scheme and new.scheme != old.scheme:
            fp.close()
            raise RedirectRefused(
                f"HTTP {code} redirect to {safe_url(newurl)} refused: it changes the scheme"
            )
        follow = super().redirect_request(req, fp, code, msg, headers, newurl)
        if follow is not None and (new.hostname, new.port) != (old.hostname, old.port):
            for name in _CREDENTIAL_HEADERS:
                follow.remove_header(name)
        return follow
