"""Typed exceptions for errors the Corral daemon reports (and for reaching it)."""

from typing import Dict, Optional, Type


class CorralError(Exception):
    """Base of every error the SDK raises; ``code`` is the API's error code."""

    def __init__(self, message: str, code: str = "internal", status: int = 0) -> None:
        super().__init__(message)
        self.message = message
        self.code = code
        self.status = status


class NotFound(CorralError):
    """The sandbox, process, file, snapshot or image does not exist."""


class InvalidArgument(CorralError):
    """A request field was refused; the message names it."""


class Conflict(CorralError):
    """The request conflicts with the current state (already exists, wrong state)."""


class ResourceExhausted(CorralError):
    """The daemon has no capacity (memory, CPU, sandbox count) for the request."""


class PermissionDenied(CorralError):
    """The token is missing, wrong, or not allowed to do this."""


class Unavailable(CorralError):
    """The daemon or the sandbox cannot serve the request right now."""


class SandboxTimeout(CorralError):
    """A deadline passed: a process's or sandbox's timeout, or the daemon's."""


class ConnectionFailed(CorralError):
    """The daemon could not be reached (refused, timed out, connection lost)."""


_BY_CODE: Dict[str, Type[CorralError]] = {
    "not_found": NotFound,
    "invalid_argument": InvalidArgument,
    "not_supported": InvalidArgument,
    "already_exists": Conflict,
    "failed_precondition": Conflict,
    "resource_exhausted": ResourceExhausted,
    "permission_denied": PermissionDenied,
    "unauthenticated": PermissionDenied,
    "unavailable": Unavailable,
    "deadline_exceeded": SandboxTimeout,
}


def error_for(code: str, message: str, status: int, fallback: Optional[Type[CorralError]] = None) -> CorralError:
    """Returns the exception class instance for an API error code."""
    cls = _BY_CODE.get(code, fallback or CorralError)
    return cls(message, code=code, status=status)
