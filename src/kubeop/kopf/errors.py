"""What a handler raises to say how it failed (kopf's names and meanings)."""

from __future__ import annotations

__all__ = ["HandlerRetriesError", "HandlerTimeoutError", "PermanentError", "TemporaryError"]


class PermanentError(Exception):
    """The handler failed and must not be retried (the other handlers go on)."""


class TemporaryError(Exception):
    """The handler failed for now: it runs again after ``delay`` seconds (default 60)."""

    def __init__(self, message: str = "", delay: float | None = 60) -> None:
        super().__init__(message)
        self.delay = delay


class HandlerTimeoutError(PermanentError):
    """The handler ran (with its retries) longer than its ``timeout=``."""


class HandlerRetriesError(PermanentError):
    """The handler failed more than its ``retries=`` allow."""
