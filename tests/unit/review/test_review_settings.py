"""Review settings and membership: cookie_secure's tri-state, the limits, --queues parsing."""

from __future__ import annotations

import argparse

import pytest
from pydantic import ValidationError

from review.command import parse_queues
from review.schemas import Role, User
from review.settings import CookieSecure, ReviewSettings


@pytest.mark.parametrize(
    ("host", "secure"),
    [
        ("127.0.0.1", False),
        ("::1", False),
        ("[::1]", False),
        ("localhost", False),
        ("0.0.0.0", True),  # noqa: S104 - the bind under test
        ("10.1.2.3", True),
        ("review.example.org", True),
    ],
)
def test_auto_cookies_are_secure_off_loopback(host: str, secure: bool) -> None:
    """cookie_secure defaults to auto: Secure unless the service is bound to loopback."""
    settings = ReviewSettings(host=host)
    assert settings.cookie_secure is CookieSecure.AUTO
    assert settings.secure_cookies is secure


def test_cookie_secure_on_and_off_override_the_host() -> None:
    """on and off win over the host; the old booleans still read as on and off."""
    public = "0.0.0.0"  # noqa: S104 - the bind under test
    assert ReviewSettings(host=public, cookie_secure="off").secure_cookies is False
    assert ReviewSettings(host="127.0.0.1", cookie_secure="on").secure_cookies is True
    assert ReviewSettings.model_validate({"cookie_secure": True}).cookie_secure is CookieSecure.ON
    assert ReviewSettings.model_validate({"cookie_secure": "false"}).cookie_secure is (
        CookieSecure.OFF
    )
    with pytest.raises(ValidationError):
        ReviewSettings.model_validate({"cookie_secure": "sometimes"})


def test_limits_have_safe_defaults_and_bounds() -> None:
    """Bodies 64 KiB, reasons 1000 characters, ten sign-ins a minute; nonsense is refused."""
    settings = ReviewSettings()
    assert (settings.max_body_bytes, settings.max_reason_chars) == (65_536, 1000)
    assert settings.sign_in_attempts_per_minute == 10
    with pytest.raises(ValidationError):
        ReviewSettings(max_body_bytes=10)
    with pytest.raises(ValidationError):
        ReviewSettings(max_reason_chars=0)
    with pytest.raises(ValidationError):
        ReviewSettings(sign_in_attempts_per_minute=0)


def test_queues_option_parses_a_category_list() -> None:
    """--queues takes comma-separated categories; 'all' or no option means every category."""
    assert parse_queues("spam, hate,spam") == ["hate", "spam"]
    assert parse_queues("all") is None
    assert parse_queues(None) is None
    with pytest.raises(argparse.ArgumentTypeError):
        parse_queues(" , ")


def test_users_work_their_role_queues_within_their_categories() -> None:
    """works() is the role's queues narrowed to the user's categories (None: all)."""
    everyone = User(id=1, name="m", role=Role.MODERATOR)
    assert everyone.works("moderator", "hate")
    assert everyone.works("moderator", None)
    assert not everyone.works("admin", "hate")
    spam_only = User(id=2, name="s", role=Role.MODERATOR, categories=("spam",))
    assert spam_only.works("moderator", "spam")
    assert not spam_only.works("moderator", "hate")
    assert not spam_only.works("moderator", None)
    assert User(id=3, name="a", role=Role.ADMIN, categories=("hate",)).works("admin", "hate")
