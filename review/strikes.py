"""Per-sender strikes: what each decision costs a sender, and the live totals the rules read.

A decision that finds a violation gives the sender a strike of the action's weight; each strike
counts until its ``expires_at`` (decided + ``review.strike_decay_days``). Totals span every group,
so a sender who offends in one group is a repeat offender everywhere. The live totals are
read by :func:`common.strikes.active_strikes` (the daemon puts them in
``metadata["sender_strikes"]`` for the user-profile rules, so repeat offenders escalate sooner).
"""

from __future__ import annotations

from review.schemas import Action

__all__ = ["STRIKE_WEIGHTS"]

STRIKE_WEIGHTS: dict[Action, int] = {
    Action.APPROVE: 0,
    Action.ESCALATE_TO_ADMIN: 0,
    Action.REMOVE_MESSAGE: 1,
    Action.WARN: 1,
    Action.MUTE: 2,
    Action.BAN: 3,
}
