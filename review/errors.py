"""Typed outcomes of review operations; the HTTP layer maps each class to one status code."""

from __future__ import annotations

from typing import ClassVar

from common.publishing import PublishError

__all__ = [
    "AlreadyAppealedError",
    "AppealError",
    "AppealNotFoundError",
    "AppealTargetNotFoundError",
    "ClaimLimitError",
    "ClaimRequiredError",
    "ForbiddenQueueError",
    "InvalidAppealError",
    "InvalidDecisionError",
    "InvalidFormError",
    "ItemClaimedError",
    "ItemNotFoundError",
    "ItemResolvedError",
    "NotAppealableError",
    "OwnDecisionError",
    "PublishFailedError",
    "PublishRefusedError",
    "ReviewError",
    "SignInRateLimitedError",
    "StatementTooLongError",
    "UserExistsError",
]


class ReviewError(Exception):
    """Base of every review error. ``code`` is stable and machine-readable."""

    code = "review_error"
    status_code = 400
    retriable: ClassVar[bool] = False
    """Whether the same request may succeed later; the API's error body carries it."""
    retry_after_s: int | None = None
    """When set, the answer carries ``Retry-After`` with this many seconds."""


class ItemNotFoundError(ReviewError):
    code = "item_not_found"
    status_code = 404


class ForbiddenQueueError(ReviewError):
    """The item sits in a queue the caller's role may not work (admin escalations)."""

    code = "forbidden_queue"
    status_code = 403


class ItemClaimedError(ReviewError):
    """Someone else holds a live claim on the item."""

    code = "item_claimed"
    status_code = 409
    retriable = True


class ItemResolvedError(ReviewError):
    code = "item_resolved"
    status_code = 409


class ClaimRequiredError(ReviewError):
    """Deciding or releasing needs a live claim held by the caller (it may have expired)."""

    code = "claim_required"
    status_code = 409


class ClaimLimitError(ReviewError):
    """The caller already holds as many live claims as allowed."""

    code = "claim_limit_reached"
    status_code = 429
    retriable = True


class InvalidDecisionError(ReviewError):
    code = "invalid_decision"
    status_code = 422


class AppealError(ReviewError):
    """An appeal that cannot be filed or decided as asked. ``reason_code`` is what a dead
    letter of the ``moderation.appeals`` reader and the refusals metric carry (a bounded set)."""

    code = "appeal_refused"
    status_code = 422


class InvalidAppealError(AppealError):
    """The appeal itself is malformed: a field missing or out of bounds, not JSON."""

    code = "invalid_appeal"


class StatementTooLongError(InvalidAppealError):
    """The appellant's statement is longer than ``review.max_statement_chars``."""

    code = "statement_too_long"


class AppealTargetNotFoundError(AppealError):
    """No verdict at the appeal's source coordinates, or no decision with its id."""

    code = "appeal_target_not_found"
    status_code = 404


class NotAppealableError(AppealError):
    """Nothing was decided against the message (an allow verdict, an approval), or it is still
    waiting for a moderator, or it is itself an appeal."""

    code = "not_appealable"
    status_code = 409


class AlreadyAppealedError(AppealError):
    """The verdict already has an appeal under another appeal id (one appeal per verdict); filing
    the same appeal id again is a replay and answers the existing appeal instead."""

    code = "already_appealed"
    status_code = 409

    def __init__(self, message: str, existing_appeal_id: str) -> None:
        super().__init__(message)
        self.existing_appeal_id = existing_appeal_id


class AppealNotFoundError(AppealError):
    code = "appeal_not_found"
    status_code = 404


class OwnDecisionError(AppealError):
    """The caller made the decision under appeal: someone else must handle the appeal."""

    code = "own_decision"
    status_code = 403


class InvalidFormError(ReviewError):
    """A console form that cannot be read (too many fields, not form-encoded)."""

    code = "invalid_form"
    status_code = 400


class SignInRateLimitedError(ReviewError):
    """Too many sign-in attempts (or failed token checks) from one client address."""

    code = "too_many_sign_in_attempts"
    status_code = 429
    retriable = True

    def __init__(self, message: str, retry_after_s: int) -> None:
        super().__init__(message)
        self.retry_after_s = retry_after_s


class UserExistsError(ReviewError):
    code = "user_exists"
    status_code = 409


class PublishFailedError(ReviewError, PublishError):
    """Kafka did not take a decision; it stays in the outbox and is retried."""

    code = "publish_failed"
    status_code = 503
    retriable = True


class PublishRefusedError(PublishFailedError):
    """Kafka refused this decision's record itself (too large, corrupt): retrying the same
    record gives the same answer, so the relay sets it aside after its attempts and goes on."""

    code = "publish_refused"
    retriable = False
