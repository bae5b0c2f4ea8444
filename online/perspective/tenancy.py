"""Where a Perspective ``communityId`` becomes a modstream tenant: the one place to change.

Perspective callers name their community (a forum, a server, a subreddit) in ``communityId``.
modstream has no tenants on its messages yet, so every community is moderated with the default
rules and policy; the community is still kept as the verdict's ``group_id``. When messages carry
a tenant, map the community (or the key's tenant) here, and pass it wherever a message's tenant
is read (the rule stage's ``evaluate(message, tenant)``, and the message itself for stored calls).
"""

from __future__ import annotations

__all__ = ["tenant_for_community"]


def tenant_for_community(community_id: str | None) -> str | None:
    """The tenant whose rules and policy score a comment of ``community_id``: ``None``, the
    default tenant, until messages carry tenants (see the module docstring)."""
    del community_id  # TENANTS: the one place where communityId maps to a tenant.
    return None
