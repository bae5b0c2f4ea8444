"""Why an analyze call gets no scores: one typed error, answered in Google's error JSON shape.

``{"error": {"code": <HTTP status>, "message": ..., "status": <canonical code>, "details": [...]}}``
as Perspective answers; ``details`` carries Perspective's ``errorType`` when there is one. Every
message names fields, attributes, languages and limits, never the comment text or a key.
"""

from __future__ import annotations

from online.errors import OnlineError

__all__ = ["ERROR_TYPE_URL", "PerspectiveError"]

ERROR_TYPE_URL = "type.googleapis.com/google.commentanalyzer.v1alpha1.Error"
"""The ``@type`` of Perspective's error detail."""


class PerspectiveError(OnlineError):
    """An analyze call refused or failed: ``http_status`` and Google's canonical status name
    (``canonical``); ``error_type`` is Perspective's ``errorType``
    (``LANGUAGE_NOT_SUPPORTED_BY_ATTRIBUTE`` ...)."""

    def __init__(
        self, http_status: int, status: str, message: str, error_type: str | None = None
    ) -> None:
        super().__init__(f"{status}: {message}")
        self.http_status = http_status
        self.canonical = status
        self.message = message
        self.error_type = error_type

    def body(self) -> dict[str, object]:
        """The error as Google APIs answer it."""
        error: dict[str, object] = {
            "code": self.http_status,
            "message": self.message,
            "status": self.canonical,
        }
        if self.error_type is not None:
            error["details"] = [{"@type": ERROR_TYPE_URL, "errorType": self.error_type}]
        return {"error": error}

    @classmethod
    def invalid(cls, message: str, error_type: str | None = None) -> PerspectiveError:
        """400 ``INVALID_ARGUMENT``."""
        return cls(400, "INVALID_ARGUMENT", message, error_type)
