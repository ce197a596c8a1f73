"""The exceptions the client raises.

Every failure is a :class:`TesseraError`. Answers the API refused carry its words:
:class:`ApiError` has the HTTP status, the API's ``code`` and message, and the field the message
names (``frames`` in ``"frames: start 12 is after end 3"``). Failures before any answer
(:class:`UnreachableError`), bad input refused here before anything is sent
(:class:`InvalidInputError`), and downloads that do not match what the API listed
(:class:`TransferError`) have classes of their own, so callers catch exactly what they handle.
"""

from __future__ import annotations

import re
from typing import Optional

__all__ = [
    "TesseraError",
    "ApiError",
    "InvalidArgumentError",
    "AuthenticationError",
    "PermissionDeniedError",
    "NotFoundError",
    "ConflictError",
    "StorageFullError",
    "UnreachableError",
    "InvalidInputError",
    "TransferError",
    "UnsafePathError",
    "CancelledError",
    "error_for_status",
]

# "steps[1].depends_on[0].step: no step named ..." -> the field path before the first ": ".
_FIELD = re.compile(r"^([A-Za-z_][A-Za-z0-9_.\[\]-]*(?:, [A-Za-z_][A-Za-z0-9_.\[\]-]*)*): ")


class TesseraError(Exception):
    """Base class of every error this package raises."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def __str__(self) -> str:
        return self.message


class ApiError(TesseraError):
    """The scheduler answered with an error.

    Attributes:
        status: the HTTP status (400, 401, 403, 404, 409, 413, 503, 507, ...).
        code: the API's error code (``invalid_argument``, ``not_found``, ...), or "".
        message: the API's message, which names the offending field.
        field: the field the message starts with (``"frames"``), or None.
        method, path: the request that was refused.
    """

    def __init__(self, status: int, message: str, code: str = "", method: str = "",
                 path: str = "") -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.method = method
        self.path = path
        match = _FIELD.match(message)
        self.field: Optional[str] = match.group(1) if match else None

    def __repr__(self) -> str:
        return (f"{type(self).__name__}(status={self.status}, code={self.code!r}, "
                f"message={self.message!r})")


class InvalidArgumentError(ApiError):
    """HTTP 400: the request (a job, a parameter) was refused; ``field`` names what."""


class AuthenticationError(ApiError):
    """HTTP 401: no token, or one the scheduler does not know (unknown, revoked, expired)."""


class PermissionDeniedError(ApiError):
    """HTTP 403: the token's role does not allow the call, or the job is another user's."""


class NotFoundError(ApiError):
    """HTTP 404: no such job, task, worker, token or file."""


class ConflictError(ApiError):
    """HTTP 409: the call does not fit the current state (cancelling a finished job, ...)."""


class StorageFullError(ApiError):
    """HTTP 507: the scheduler's storage is full or it is read-only; nothing was stored."""


class UnreachableError(TesseraError):
    """The scheduler could not be reached (refused, timed out, TLS failed): no answer at all."""

    def __init__(self, server: str, reason: str, may_have_arrived: bool = False) -> None:
        super().__init__(f"cannot reach the Tessera scheduler at {server} ({reason})")
        self.server = server
        self.reason = reason
        # The request was sent but no answer came: the scheduler may have acted on it.
        self.may_have_arrived = may_have_arrived


class InvalidInputError(TesseraError):
    """Input refused before anything was sent: a missing file, a malformed job or config."""


class TransferError(TesseraError):
    """A download or upload did not match what the API said (size, SHA-256, interrupted)."""


class UnsafePathError(TransferError):
    """The server named a file that would land outside the destination folder; not written."""


class CancelledError(TesseraError):
    """The caller's cancel event was set; the operation stopped (a submit stores no job)."""


_BY_STATUS = {
    400: InvalidArgumentError,
    401: AuthenticationError,
    403: PermissionDeniedError,
    404: NotFoundError,
    409: ConflictError,
    507: StorageFullError,
}


def error_for_status(status: int, message: str, code: str = "", method: str = "",
                     path: str = "") -> ApiError:
    """Builds the ApiError subclass that fits an HTTP status."""
    cls = _BY_STATUS.get(status, ApiError)
    return cls(status, message, code, method, path)
