"""Which tenant a ``comments:analyze`` call speaks for: the key's, chosen by ``communityId``.

Perspective has no tenant field; its ``communityId`` names where the comment is posted (a forum,
a server, a subreddit) and stays the verdict's ``group_id``. The tenant comes from the API key
(a platform token, bound to tenants like any other, ``online.auth``):

- a key bound to one tenant (an unbound key: the default tenant) speaks for it, whatever the
  community;
- a key bound to several speaks for the one its call's ``communityId`` names, and a call whose
  ``communityId`` names none of them is refused (403 ``PERMISSION_DENIED``, recorded in
  ``access_denials`` when it named a tenant id);
- with tokens off (``online.require_token = false``) every call is the default tenant's.
"""

from __future__ import annotations

import grpc

from online.auth import Grant
from online.errors import OnlineError
from pipelines.tenants import DEFAULT_TENANT

__all__ = ["NoTenant", "tenant_of_call"]


class NoTenant(OnlineError):
    """A key bound to several tenants, and a call whose ``communityId`` names none of them."""

    status = grpc.StatusCode.PERMISSION_DENIED


def tenant_of_call(grant: Grant | None, community_id: str | None) -> str:
    """The tenant whose rules and policy decide the call (module docstring); :class:`NoTenant`
    when the key cannot speak for it."""
    if grant is None:
        return DEFAULT_TENANT
    if len(grant.tenants) == 1:
        (tenant,) = grant.tenants
        return tenant
    if community_id is not None and community_id in grant.tenants:
        return community_id
    raise NoTenant("the key speaks for several tenants and communityId names none of them")
