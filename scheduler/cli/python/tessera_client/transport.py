"""HTTP(S) to the scheduler with the standard library: bearer token, a CA to trust, a timeout
on every request, no redirects (a token is never sent elsewhere) and no proxies (as the CLI)."""

from __future__ import annotations

import http.client
import json
import socket
import ssl
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from typing import Any, Dict, Optional

from .config import Connection
from .errors import InvalidInputError, TesseraError, UnreachableError, error_for_status

__all__ = ["Transport", "Response"]

_USER_AGENT = "tessera-python"
# The largest JSON answer read (a page of 10,000 tasks is a few MiB); a server sending more is
# refused rather than read into memory.
_MAX_REPLY_BYTES = 256 << 20


@dataclass
class Response:
    """One answered request: status, headers (lower-case names) and the whole body."""

    status: int
    headers: Dict[str, str] = field(default_factory=dict)
    body: bytes = b""


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, req, fp, code, msg, headers, newurl):  # type: ignore[override]
        """Follows nothing: the 3xx surfaces as an ApiError."""
        return None  # the 3xx surfaces as an error instead of carrying the token elsewhere


def _reason(error: BaseException) -> "tuple[str, bool]":
    """A short reason for a failure without an answer, and whether the request may have
    arrived (it was sent, the answer was lost)."""
    if isinstance(error, urllib.error.URLError) and not isinstance(error, urllib.error.HTTPError):
        inner = error.reason
        if isinstance(inner, BaseException):
            return _reason(inner)
        return str(inner), False
    if isinstance(error, ssl.SSLCertVerificationError):
        return f"TLS certificate not trusted: {error.verify_message}", False
    if isinstance(error, ssl.SSLError):
        return f"TLS handshake failed: {error.reason or error}", False
    if isinstance(error, ConnectionRefusedError):
        return "connection refused", False
    if isinstance(error, (http.client.RemoteDisconnected, ConnectionResetError,
                          BrokenPipeError, http.client.IncompleteRead)):
        return "no response", True
    if isinstance(error, (socket.timeout, TimeoutError)):
        return "timed out", True
    if isinstance(error, socket.gaierror):
        return f"unknown host ({error.strerror})", False
    if isinstance(error, OSError):
        return error.strerror or str(error), False
    return str(error), False


class Transport:
    """Sends requests to one scheduler. Safe to share between threads (no state per call)."""

    def __init__(self, connection: Connection, timeout: float = 60.0) -> None:
        url = urllib.parse.urlsplit(connection.server)
        if url.scheme not in ("http", "https") or not url.hostname:
            raise InvalidInputError(
                f"server: '{connection.server}' is not an http:// or https:// URL")
        self.connection = connection
        self.server = connection.server.rstrip("/")
        self.timeout = timeout
        handlers: list = [urllib.request.ProxyHandler({}), _NoRedirect()]
        if url.scheme == "https":
            try:
                context = ssl.create_default_context(cafile=connection.ca_file or None)
            except (OSError, ssl.SSLError) as e:
                raise InvalidInputError(f"ca_file: cannot read {connection.ca_file}: {e}") from None
            context.minimum_version = ssl.TLSVersion.TLSv1_2
            handlers.append(urllib.request.HTTPSHandler(context=context))
        self._opener = urllib.request.build_opener(*handlers)

    def _request(self, method: str, path: str, body: Optional[bytes], content_type: str,
                 headers: Optional[Dict[str, str]]) -> urllib.request.Request:
        request = urllib.request.Request(self.server + path, data=body, method=method)
        request.add_header("User-Agent", _USER_AGENT)
        if self.connection.token:
            request.add_header("Authorization", "Bearer " + self.connection.token)
        if body is not None:
            request.add_header("Content-Type", content_type)
        for name, value in (headers or {}).items():
            request.add_header(name, value)
        return request

    def open(self, method: str, path: str, body: Optional[bytes] = None,
             content_type: str = "application/json", headers: Optional[Dict[str, str]] = None,
             timeout: Optional[float] = None) -> http.client.HTTPResponse:
        """Sends a request and returns the open response of a 2xx answer (the caller reads and
        closes it); raises the ApiError of any other answer, UnreachableError without one."""
        request = self._request(method, path, body, content_type, headers)
        try:
            return self._opener.open(request, timeout=self.timeout if timeout is None else timeout)
        except urllib.error.HTTPError as e:
            with e:
                raise self._api_error(method, path, e.code, _read_capped(e)) from None
        except (urllib.error.URLError, OSError, http.client.HTTPException) as e:
            reason, arrived = _reason(e)
            raise UnreachableError(self.server, reason, arrived) from None

    def send(self, method: str, path: str, body: Optional[bytes] = None,
             content_type: str = "application/json", headers: Optional[Dict[str, str]] = None,
             timeout: Optional[float] = None) -> Response:
        """Sends a request and reads the whole 2xx answer."""
        response = self.open(method, path, body, content_type, headers, timeout)
        with response:
            try:
                data = response.read(_MAX_REPLY_BYTES + 1)
            except (OSError, http.client.HTTPException) as e:
                reason, _ = _reason(e)
                raise UnreachableError(self.server, reason, True) from None
            if len(data) > _MAX_REPLY_BYTES:
                raise TesseraError(f"{method} {path}: the reply is larger than "
                                   f"{_MAX_REPLY_BYTES >> 20} MiB; refused")
            return Response(response.status,
                            {k.lower(): v for k, v in response.headers.items()}, data)

    def call(self, method: str, path: str, payload: Any = None,
             headers: Optional[Dict[str, str]] = None, timeout: Optional[float] = None) -> dict:
        """A JSON request and its JSON object answer."""
        body = None
        if payload is not None:
            body = json.dumps(payload, ensure_ascii=False).encode("utf-8")
        elif method in ("POST", "PUT"):
            body = b""
        response = self.send(method, path, body, "application/json", headers, timeout)
        return self.decode(method, path, response)

    def call_bytes(self, method: str, path: str, data: bytes,
                   timeout: Optional[float] = None) -> dict:
        """Raw bytes (application/octet-stream) and the JSON object answer."""
        response = self.send(method, path, data, "application/octet-stream", None, timeout)
        return self.decode(method, path, response)

    def decode(self, method: str, path: str, response: Response) -> dict:
        """The JSON object of a 2xx answer; a TesseraError for anything else."""
        try:
            parsed = json.loads(response.body.decode("utf-8"))
        except (ValueError, UnicodeDecodeError):
            parsed = None
        if not isinstance(parsed, dict):
            raise TesseraError(f"{method} {path}: the server sent a reply that is not a JSON "
                               f"object (HTTP {response.status})")
        return parsed

    def _api_error(self, method: str, path: str, status: int, body: bytes) -> Exception:
        message, code = "", ""
        try:
            parsed = json.loads(body.decode("utf-8"))
        except (ValueError, UnicodeDecodeError):
            parsed = None
        if isinstance(parsed, dict):
            message = parsed.get("error") if isinstance(parsed.get("error"), str) else ""
            code = parsed.get("code") if isinstance(parsed.get("code"), str) else ""
        if not message:
            message = f"{method} {path} failed with HTTP {status}"
        return error_for_status(status, message, code, method, path)


def _read_capped(response: Any, limit: int = 1 << 20) -> bytes:
    """An error body, at most `limit` bytes (a hostile server cannot make us read forever)."""
    try:
        return response.read(limit) or b""
    except (OSError, http.client.HTTPException):
        return b""
