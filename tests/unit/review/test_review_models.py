"""Review data shapes: decision validation, role queues, strike weights."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from review.schemas import Action, DecideRequest, Role, User
from review.strikes import STRIKE_WEIGHTS


def test_decide_request_needs_a_known_action_and_a_reason() -> None:
    """An empty reason or an unknown action is rejected before any database work."""
    assert DecideRequest(action=Action.BAN, reason="threats").action is Action.BAN
    with pytest.raises(ValidationError):
        DecideRequest(action=Action.BAN, reason="")
    with pytest.raises(ValidationError):
        DecideRequest.model_validate({"action": "delete_user", "reason": "x"})


def test_admins_work_every_queue_moderators_theirs_and_the_appeals() -> None:
    """Moderators see the moderator queue and the appeals; admins also see escalations to
    admins; a chat server (platform) works no queue."""
    assert User(id=1, name="m", role=Role.MODERATOR).queues == ["moderator", "appeals"]
    assert User(id=2, name="a", role=Role.ADMIN).queues == ["moderator", "admin", "appeals"]
    assert User(id=3, name="p", role=Role.PLATFORM).queues == []


def test_every_action_has_a_strike_weight() -> None:
    """Each action has a weight; approving or escalating never counts against the sender."""
    assert set(STRIKE_WEIGHTS) == set(Action)
    assert STRIKE_WEIGHTS[Action.APPROVE] == 0
    assert STRIKE_WEIGHTS[Action.ESCALATE_TO_ADMIN] == 0
    assert STRIKE_WEIGHTS[Action.BAN] > STRIKE_WEIGHTS[Action.MUTE] > STRIKE_WEIGHTS[Action.WARN]


def test_unbound_admins_see_every_tenant_moderators_and_platforms_the_default() -> None:
    """A user's tenants as the SQL parameter: bound users their tenants, an unbound admin every
    tenant (None), an unbound moderator or platform token the default tenant only."""
    admin = User(id=1, name="a", role=Role.ADMIN)
    moderator = User(id=2, name="m", role=Role.MODERATOR)
    platform = User(id=3, name="p", role=Role.PLATFORM)
    bound = User(id=4, name="b", role=Role.ADMIN, tenants=("arcade",))
    assert admin.tenant_list is None
    assert moderator.tenant_list == ["default"]
    assert platform.tenant_list == ["default"]
    assert bound.tenant_list == ["arcade"]
    assert admin.sees_tenant("market")
    assert not moderator.sees_tenant("market")
    assert moderator.sees_tenant("default")
    assert not bound.sees_tenant("default")
