"""What the provider says about a user, by scope (OpenID Connect Core section 5.4): the
claims of the ID token and of the userinfo endpoint, one function for both."""

from __future__ import annotations

from typing import Any

from authlib.oidc.core import UserInfo

from locky.records import User

#: Every claim the provider may state, for discovery's ``claims_supported``.
CLAIMS_SUPPORTED = ("sub", "iss", "aud", "exp", "iat", "auth_time", "nonce", "amr", "azp", "at_hash", "sid",
                    "email", "email_verified", "name", "groups")
#: Memberships read per page while collecting a user's group names.
GROUP_PAGE = 200


def group_names(storage, user_uuid: str) -> list[str]:
    """The names of the user's live groups, sorted (a deleted group's memberships go
    with it, so each live membership names a live group)."""
    names: set[str] = set()
    after_id = 0
    while True:
        page = storage.members.list(user_uuid=user_uuid, after_id=after_id, limit=GROUP_PAGE)
        for member in page.items:
            group = storage.groups.get_by_uuid(member.group_uuid)
            if group is not None:
                names.add(group.name)
        if page.next_after_id is None:
            return sorted(names)
        after_id = page.next_after_id


def user_info(storage, user: User, scope: str | None) -> UserInfo:
    """``sub`` and the claims ``scope`` grants: ``email`` → email and email_verified,
    ``profile`` → name, ``groups`` → the names of the user's groups."""
    scopes = set((scope or "").split())
    claims: dict[str, Any] = {"sub": user.uuid}
    if "email" in scopes:
        claims.update(email=user.email, email_verified=user.email_verified)
    if "profile" in scopes:
        claims["name"] = user.name
    if "groups" in scopes:
        claims["groups"] = group_names(storage, user.uuid)
    return UserInfo(claims)
