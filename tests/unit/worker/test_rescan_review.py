"""What an applied rescan does with a review item, by where the item stands."""

from __future__ import annotations

import pytest

from worker.rescan_review import ItemAction, ReviewState, item_action


@pytest.mark.parametrize("escalate", [True, False])
def test_a_held_item_is_never_touched_and_its_verdict_stands(escalate: bool) -> None:
    """Resolved, under a live claim or with the admins: whatever the rescan says, nothing moves."""
    assert ReviewState.HELD.stands
    assert item_action(ReviewState.HELD, escalate) is ItemAction.LEAVE


@pytest.mark.parametrize(
    ("state", "escalate", "action"),
    [
        (ReviewState.WAITING, False, ItemAction.CLOSE),
        (ReviewState.WAITING, True, ItemAction.LEAVE),
        (ReviewState.CLOSED, True, ItemAction.REOPEN),
        (ReviewState.CLOSED, False, ItemAction.LEAVE),
        (ReviewState.NONE, True, ItemAction.OPEN),
        (ReviewState.NONE, False, ItemAction.LEAVE),
    ],
)
def test_an_item_nobody_decided_follows_the_new_verdict(
    state: ReviewState, escalate: bool, action: ItemAction
) -> None:
    """A waiting item closes when its verdict is no longer escalated; a closed one reopens and a
    missing one opens when it is escalated again; otherwise the item stays as it is."""
    assert not state.stands
    assert item_action(state, escalate) is action
