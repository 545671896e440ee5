"""Fixtures of the OpenID provider's tests: a user to sign in, signed in (an OP session),
and the issuer the app's documents and tokens name."""

from __future__ import annotations

import pytest

from token_helpers import sign_in


@pytest.fixture
def user(locky_client):
    return locky_client.account("ada@example.com", name="Ada Lovelace")


@pytest.fixture
def end_user(locky_app, user):
    return sign_in(locky_app, user.uuid)


@pytest.fixture
def issuer(locky_app) -> str:
    return locky_app.context.settings.issuer
