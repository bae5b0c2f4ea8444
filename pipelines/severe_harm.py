"""The severe harm categories: their names, how urgent their review is, what the policy owes them.

Rule hits in these categories (``pipelines/rulesets/default.toml``) always go to a person,
whatever the hit's action. Their review priority has a floor, and the two categories where
someone may be in danger right now come first in the review queue (``review/queue.py``):

================================  ====================================================  ======
category                          what                                                  floor
================================  ====================================================  ======
``self_harm``                     the writer's own intent to hurt or kill themselves;   1.0
                                  flagged and escalated, never blocked (blocking a
                                  person in crisis silences them)
``sexual_exploitation_minors``    sexual content or solicitation involving a minor;     1.0
                                  blocked and escalated
``threat``                        violence against a person or their family, direct,    0.85
                                  conditional or veiled
``sexual_exploitation``           sexual extortion (sextortion) and grooming cues       0.85
``self_harm_incitement``          telling someone else to hurt or kill themselves       0.8
================================  ====================================================  ======

Adult sexual solicitation keeps its own, non-severe category ``sexual``.
"""

from __future__ import annotations

from types import MappingProxyType

__all__ = [
    "NEVER_BLOCKED",
    "REVIEW_PRIORITY_FLOOR",
    "SELF_HARM",
    "SELF_HARM_INCITEMENT",
    "SEVERE_CATEGORIES",
    "SEXUAL_EXPLOITATION",
    "SEXUAL_EXPLOITATION_MINORS",
    "THREAT",
    "URGENT_CATEGORIES",
    "is_severe",
]

THREAT = "threat"
SELF_HARM = "self_harm"
SELF_HARM_INCITEMENT = "self_harm_incitement"
SEXUAL_EXPLOITATION = "sexual_exploitation"
SEXUAL_EXPLOITATION_MINORS = "sexual_exploitation_minors"

SEVERE_CATEGORIES: tuple[str, ...] = (
    SELF_HARM,
    SEXUAL_EXPLOITATION_MINORS,
    THREAT,
    SEXUAL_EXPLOITATION,
    SELF_HARM_INCITEMENT,
)
"""Most urgent first."""

URGENT_CATEGORIES: frozenset[str] = frozenset({SELF_HARM, SEXUAL_EXPLOITATION_MINORS})
"""Reviewed before everything else in the queue, whatever the rank of other items."""

NEVER_BLOCKED: frozenset[str] = frozenset({SELF_HARM})
"""A hit here caps a model-driven block at flag (a block rule of another category still blocks)."""

REVIEW_PRIORITY_FLOOR: MappingProxyType[str, float] = MappingProxyType(
    {
        SELF_HARM: 1.0,
        SEXUAL_EXPLOITATION_MINORS: 1.0,
        THREAT: 0.85,
        SEXUAL_EXPLOITATION: 0.85,
        SELF_HARM_INCITEMENT: 0.8,
    }
)
"""The least review priority an escalation with a hit in the category gets."""


def is_severe(category: str) -> bool:
    """True for the categories above (their hits always escalate)."""
    return category in REVIEW_PRIORITY_FLOOR
