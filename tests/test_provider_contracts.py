"""The contract suites of :mod:`locky.testing` on the bundled providers: the Casbin
authorizer, the PyJWT token backend (ES256 with its stored keys, and HS256), the
bcrypt hasher and contrib's Argon2 hasher. The storage contract runs in
``test_storage_contract.py``; an authorizer written from the docs alone runs the
authorizer contract in ``test_outside_authorizer.py``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from locky.testing import TEST_SECRET, make_settings
from locky.testing.authorizer_contract import CUSTOM, AuthorizerContract, cases
from locky.testing.password_hasher_contract import PasswordHasherContract
from locky.testing.token_backend_contract import TokenBackendContract
from locky_bcrypt import BcryptHasher

POLICY_CASES = Path(__file__).resolve().parents[1] / "policies" / "cases.csv"


# -- authorizers -------------------------------------------------------------------------


class TestCasbinAuthorizer(AuthorizerContract):
    @pytest.fixture
    def make_app(self, locky_app_factory):
        return lambda **settings: locky_app_factory(authorizer="casbin", log_requests=False, **settings)


def test_the_contract_table_agrees_with_the_shipped_policy_cases():
    """Where the contract's table and ``policies/cases.csv`` ask the same question they
    expect the same answer, and the table asks most of what the cases ask."""
    table = {(c.subject, c.scope, c.resource, c.action.replace(f"assign:{CUSTOM}", "assign:custom")): c.expect
             for c in cases()}
    shipped = {(c.subject, c.scope, c.resource, c.action): c.expect for c in cases(POLICY_CASES.read_text())}
    shared = set(table) & set(shipped)
    assert {key: (table[key], shipped[key]) for key in shared if table[key] != shipped[key]} == {}
    assert len(shared) >= 0.9 * len(shipped), sorted(set(shipped) - set(table))


# -- token backends ------------------------------------------------------------------------


class TestJWTBackendES256(TokenBackendContract):
    @pytest.fixture
    def make_tokens(self, locky_app_factory):
        return lambda **settings: locky_app_factory(
            tokens="jwt", jwt_algorithm="ES256", log_requests=False, **settings).context.tokens

    def rotate_keys(self, backend):
        backend.keys.rotate()


class TestJWTBackendHS256(TokenBackendContract):
    @pytest.fixture
    def make_tokens(self, locky_app_factory):
        return lambda **settings: locky_app_factory(
            tokens="jwt", jwt_algorithm="HS256", log_requests=False, **settings).context.tokens


# -- password hashers ----------------------------------------------------------------------


class TestBcryptHasher(PasswordHasherContract):
    @pytest.fixture
    def hasher(self):
        return BcryptHasher(rounds=4)

    def test_an_older_cost_needs_a_rehash(self, hasher):
        assert BcryptHasher(rounds=5).needs_rehash(hasher.hash("correct horse battery")) is True


@pytest.mark.extras
class TestArgon2Hasher(PasswordHasherContract):
    @pytest.fixture
    def hasher(self):
        locky_argon2 = pytest.importorskip("locky_argon2", reason="pip install 'locky[argon2]'")
        return locky_argon2.Argon2Hasher(time_cost=1, memory_cost=8, parallelism=1)


# -- locky_app_factory honours an overridden locky_settings ------------------------------------


class TestAppFactoryUsesTheTestsSettings:
    @pytest.fixture
    def locky_settings(self, locky_database_url, locky_mail_dir):
        return make_settings(locky_database_url, mail_dir=locky_mail_dir, access_ttl=123,
                             admin_emails=("boss@example.com",), require_verified_email=True)

    def test_a_second_app_gets_the_overridden_settings(self, locky_app, locky_app_factory, locky_settings):
        second = locky_app_factory()
        assert second is not locky_app
        assert second.context.settings == locky_settings
        assert second.context.settings.access_ttl == 123
        assert second.context.settings.admin_emails == ("boss@example.com",)

    def test_overrides_apply_on_top(self, locky_app_factory, locky_settings, tmp_path):
        other = locky_app_factory(access_ttl=60, database_url=f"sqlite:///{tmp_path / 'other.sqlite'}")
        settings = other.context.settings
        assert settings.access_ttl == 60 and settings.database_url.endswith("other.sqlite")
        assert settings.require_verified_email is True and settings.jwt_secret == TEST_SECRET
        assert settings.admin_emails == ("boss@example.com",)
        assert settings.mail_dir == locky_settings.mail_dir
