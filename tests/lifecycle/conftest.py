"""Fixtures of the account-lifecycle tests (docs/http/authorization.md and docs/http/accounts.md)."""

from __future__ import annotations

import pytest

from locky.testing import LockyClient


@pytest.fixture
def make_client(locky_app_factory):
    """``make_client(**settings) -> LockyClient``: a client of another app on the test's
    database (and so the same mail folder) with these settings."""

    def make(**overrides) -> LockyClient:
        return LockyClient(locky_app_factory(**overrides))

    return make
