"""The CLI wiring: `modstream review serve|add-user` and `modstream retention`."""

from __future__ import annotations

import pytest

from modstream.cli import build_parser


def test_review_commands_are_registered() -> None:
    """serve takes host/port overrides; add-user a name and role; disable-user a name."""
    parser = build_parser()
    serve = parser.parse_args(["review", "serve", "--port", "9000"])
    assert (serve.port, serve.host) == (9000, None)
    add = parser.parse_args(["review", "add-user", "ann", "--role", "admin"])
    assert (add.name, add.role) == ("ann", "admin")
    assert parser.parse_args(["review", "add-user", "bob"]).role == "moderator"
    assert parser.parse_args(["review", "disable-user", "bob"]).name == "bob"


def test_add_user_rejects_unknown_roles() -> None:
    """Only moderator and admin exist."""
    with pytest.raises(SystemExit):
        build_parser().parse_args(["review", "add-user", "eve", "--role", "root"])


def test_retention_defaults_to_ninety_days() -> None:
    """modstream retention keeps 90 days and creates three months ahead by default."""
    args = build_parser().parse_args(["retention"])
    assert (args.keep, args.ahead_months, args.dry_run) == ("90d", 3, False)
