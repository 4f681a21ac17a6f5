"""The two exception roots: a user's mistake, and an agent run that cannot go on."""

from __future__ import annotations

import errno
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pydantic import ValidationError


class UserError(Exception):
    """Bad input or configuration. The CLI shows the message without a traceback."""


class AgentRunError(Exception):
    """A run could not go on because of the model or a budget, not a bug."""


class ModelError(AgentRunError):
    """The endpoint failed after the allowed retries; says what it answered."""

    def __init__(
        self, message: str, *, status: int | None = None, body: str = "", unmetered_calls: int = 0
    ) -> None:
        super().__init__(message)
        self.status = status
        self.body = body
        self.unmetered_calls = unmetered_calls
        """Tries that timed out after the request was sent (see `Usage.unmetered_calls`)."""


class DeadlineExceeded(ModelError):
    """A model call was cut off because the attempt's time budget (`max_seconds`) ran out."""


class EndpointUnreachable(AgentRunError):
    """Nothing answered at the endpoint's address through every retry (the server is gone).
    Not a `ModelError`: no attempt, self-test or reflection takes it as the model's answer,
    so the run stops and a resume redoes that work once the server is back."""

    def __init__(self, message: str, *, unmetered_calls: int = 0) -> None:
        super().__init__(message)
        self.unmetered_calls = unmetered_calls
        """Earlier tries that timed out after the request was sent (as for `ModelError`)."""


def field_problems(exc: ValidationError, whole: str, prefix: str = "") -> list[str]:
    """pydantic's complaints, each as `field.path: message` (`whole` names the record itself,
    where the complaint is about no one field; `prefix`: the section the record sits in)."""
    return [f"{prefix}{'.'.join(map(str, e['loc'])) or whole}: {e['msg']}" for e in exc.errors()]


def listen_refusal(port: int, refused: OSError, host: str = "127.0.0.1") -> str:
    """`--port PORT: ` why a server may not listen on `port` of `host`, and what to do."""
    if refused.errno == errno.EADDRINUSE:
        why = f"already in use on {host}; pick another port"
    elif refused.errno == errno.EACCES and port < 1024:
        why = "this user may not listen on it (ports below 1024 need root); pick a port above 1024"
    else:
        why = f"cannot listen on {host} ({refused.strerror or refused}); pick another port"
    return f"--port {port}: {why}, or leave --port out for a free one"
