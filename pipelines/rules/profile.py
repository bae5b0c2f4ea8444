"""User-profile rules: who sent the message, not only what it says.

They read these ``ChatMessage.metadata`` keys, set by the chat platform (all optional; a
missing or malformed value never raises, the rule just does not fire):

``sender_joined_at``  when the sender's account was created: an ISO-8601 string with a UTC
                      offset (``"2026-01-02T03:04:05Z"``) or an integer of epoch milliseconds.
                      Used by ``check = "new_account_link"``: fires when the account is younger
                      than ``max_account_age_hours`` at ``sent_at`` (a join time after
                      ``sent_at`` counts as new) and the canonical text, defanged links restored
                      (``hxxp``, ``[.]``, ``dot com``), contains a link.
``sender_strikes``    how many earlier violations the platform holds against the sender: a
                      non-negative integer. Used by ``check = "repeat_offender"``: fires when it
                      is at least ``min_strikes``.

``check = "sender_blocklist"`` needs no metadata: it fires when ``sender_id`` is one of the
rule's ``sender_ids``.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from datetime import UTC, datetime, timedelta

from pipelines.canonical.links import TLDS
from pipelines.messages import ChatMessage
from pipelines.rules.config import ProfileCheck, ProfileRule, compile_re2

__all__ = ["LINK_PATTERN", "ProfileMatcher", "contains_link", "metadata_timestamp"]

LINK_PATTERN = (
    r"(?:https?://|ww\.)[^\s]+"
    r"|\b[a-z0-9][a-z0-9-]*(?:\.[a-z0-9-]+)*\.(?:" + "|".join(TLDS) + r")(?:/[^\s]*)?\b"
)
"""A link in canonical text (lower case; ``www.`` reads ``ww.``): scheme, ``www.`` or a bare
common domain."""
_LINK = compile_re2(LINK_PATTERN)
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MAX_EPOCH_MS = 253_402_300_799_999


def contains_link(canonical_text: str) -> bool:
    return _LINK.search(canonical_text) is not None


def metadata_timestamp(value: object) -> datetime | None:
    """An aware UTC datetime from an ISO-8601 string with offset or epoch ms, else ``None``."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        if not 0 <= value <= _MAX_EPOCH_MS:
            return None
        return _EPOCH + timedelta(milliseconds=value)
    if not isinstance(value, str) or len(value) > 64:
        return None
    try:
        parsed = datetime.fromisoformat(value)
        if parsed.tzinfo is None or parsed.utcoffset() is None:
            return None
        return parsed.astimezone(UTC)
    except (ValueError, OverflowError):
        return None


class ProfileMatcher:
    """Evaluates the profile rules against one message."""

    __slots__ = ("_rules",)

    def __init__(self, rules: Sequence[ProfileRule]) -> None:
        self._rules = tuple(rules)

    def match(self, message: ChatMessage, canonical_text: str) -> set[str]:
        found: set[str] = set()
        link: bool | None = None
        for rule in self._rules:
            if rule.check is ProfileCheck.SENDER_BLOCKLIST:
                fired = message.sender_id in rule.sender_ids
            elif rule.check is ProfileCheck.REPEAT_OFFENDER:
                strikes = message.metadata.get("sender_strikes")
                fired = (
                    isinstance(strikes, int)
                    and not isinstance(strikes, bool)
                    and strikes >= rule.min_strikes
                )
            elif _is_new_account(message, rule.max_account_age_hours):
                if link is None:
                    link = contains_link(canonical_text)
                fired = link
            else:
                fired = False
            if fired:
                found.add(rule.meta.id)
        return found

    def locate(self, rule_id: str, canonical_text: str) -> Iterator[tuple[int, int]]:
        """Where rule ``rule_id`` looked in ``canonical_text``: the links a new account's rule
        fires on; nothing for rules about the sender alone."""
        for rule in self._rules:
            if rule.meta.id == rule_id and rule.check is ProfileCheck.NEW_ACCOUNT_LINK:
                for match in _LINK.finditer(canonical_text):
                    if match.end() > match.start():
                        yield match.span()


def _is_new_account(message: ChatMessage, max_age_hours: float) -> bool:
    joined = metadata_timestamp(message.metadata.get("sender_joined_at"))
    if joined is None:
        return False
    sent_at = message.sent_at
    if sent_at.tzinfo is None:
        sent_at = sent_at.replace(tzinfo=UTC)
    return (sent_at - joined) < timedelta(hours=max_age_hours)
